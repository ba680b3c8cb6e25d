// Command servery serves a static site from one process, or from a fixed
// generation of worker processes sharing one listener.
//
// main.go is the front end: flags to a config, validation, signals and
// exit codes. The lifecycle itself is driven by methods and contexts
// (Supervisor.Start, Stop, Wait; server.drain), never by signals.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Exit statuses.
const (
	exitOK      = 0 // a clean stop
	exitFailure = 1 // a runtime failure: bind, startup, a lost worker, a survivor
	exitUsage   = 2 // bad flags or configuration; nothing was bound or started
)

// processStart is when this process began, for "ready in" log lines.
var processStart = time.Now()

func main() {
	if version, ok := os.LookupEnv(workerEnv); ok {
		os.Exit(workerEntry(version))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is servery's main: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "servery: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	activated, isActivated, err := activatedListener()
	if err != nil {
		fmt.Fprintf(stderr, "servery: socket activation: %v\n", err)
		return exitUsage
	}
	if err := cfg.makeIdentity(log); err != nil {
		log.Error("tls", "err", err)
		return exitFailure
	}
	ln, err := listen(cfg, activated, isActivated, log)
	if err != nil {
		log.Error("cannot listen", "addr", cfg.Addr, "err", err)
		return exitFailure
	}
	stop, hurry := watchSignals(log)
	n := newNotifier(log)
	if cfg.Workers == 1 {
		return runDirect(cfg, ln, stop, hurry, n, log)
	}
	return runSupervised(cfg, ln, stop, hurry, n, log)
}

// listen returns the socket systemd passed, if any, or binds -addr. A
// passed socket wins over an explicit -addr, and the log says so: the unit
// file, not the command line, owns the address then.
func listen(cfg *config, activated net.Listener, isActivated bool, log *slog.Logger) (net.Listener, error) {
	if !isActivated {
		return net.Listen("tcp", cfg.Addr)
	}
	if cfg.AddrSet {
		log.Warn("socket activation: the passed socket wins over -addr", "addr", cfg.Addr, "socket", activated.Addr().String())
	}
	log.Info("socket activation", "socket", activated.Addr().String())
	return activated, nil
}

// watchSignals is the signal front end. The first SIGINT or SIGTERM closes
// stop; the second cancels hurry, which skips the rest of the drain.
func watchSignals(log *slog.Logger) (stop <-chan struct{}, hurry context.Context) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	stopC := make(chan struct{})
	hurry, cut := context.WithCancel(context.Background())
	go func() {
		sig := <-sigs
		log.Info("stop requested", "signal", sig.String())
		close(stopC)
		sig = <-sigs
		log.Warn("second signal: skipping the rest of the drain", "signal", sig.String())
		cut()
	}()
	return stopC, hurry
}

// runDirect serves in this process until a signal, then drains.
func runDirect(cfg *config, ln net.Listener, stop <-chan struct{}, hurry context.Context, n *notifier, log *slog.Logger) int {
	srv, err := newServer(cfg.Runtime, log)
	if err != nil {
		ln.Close()
		log.Error("cannot build runtime", "err", err)
		return exitFailure
	}
	served := make(chan error, 1)
	go func() { served <- srv.serve(ln) }()
	log.Info("serving", "dir", cfg.Runtime.Dir, "url", cfg.url(ln), "workers", 1,
		"ready_in", time.Since(processStart).Round(100*time.Microsecond))
	n.notify("READY=1", "STATUS=serving with 1 worker (direct mode)")
	select {
	case err := <-served:
		log.Error("serving stopped", "err", err)
		return exitFailure
	case <-stop:
	}
	n.notify("STOPPING=1")
	err = srv.drain(hurry)
	st := srv.stats()
	log.Info("stopped", "accepted", st.Accepted, "served", st.Served, "drain", errString(err))
	return exitOK
}

// runSupervised runs one generation of workers until a signal or a lost
// worker, then stops it.
func runSupervised(cfg *config, ln net.Listener, stop <-chan struct{}, hurry context.Context, n *notifier, log *slog.Logger) int {
	sup := newSupervisor(cfg.supervisor(), ln, log)
	sup.notify = n.notify
	startCtx, cancelStart := context.WithCancel(context.Background())
	go func() {
		<-stop
		cancelStart() // a signal during startup cancels it
		sup.Stop(hurry)
	}()
	if err := sup.Start(startCtx); err != nil {
		if errors.Is(err, context.Canceled) && !errors.Is(err, errSurvived) {
			// The operator stopped a startup, and the rollback was clean.
			log.Info("stopped during startup", "rolled_back", err)
			return exitOK
		}
		log.Error("not started", "err", err)
		return exitFailure
	}
	log.Info("serving", "dir", cfg.Runtime.Dir, "url", cfg.url(ln), "workers", cfg.Workers,
		"pids", fmt.Sprint(sup.pids()), "ready_in", time.Since(processStart).Round(100*time.Microsecond))
	// Only now, with every worker accepting, is the service ready.
	n.notify("READY=1", fmt.Sprintf("STATUS=%d workers ready", cfg.Workers))
	if err := sup.Wait(); err != nil {
		log.Error("stopped with error", "err", err)
		return exitFailure
	}
	log.Info("stopped")
	return exitOK
}

func errString(err error) string {
	if err == nil {
		return "complete"
	}
	return err.Error()
}
