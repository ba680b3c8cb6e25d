package main

// command.go is servery's front end: Main, flags to a config, the
// listener, signals and exit codes. The lifecycle itself is driven by
// methods and contexts (Service.Start, Stop, Wait; server.drain), never
// by signals.

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
	"sync/atomic"
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

// Main runs servery with app and returns the exit status, for os.Exit. It
// is the whole program: in the parent it parses the command line (servery's
// flags and every flag defined on flag.CommandLine), checks app, binds the
// listener and runs the workers until a signal; in a worker, which is the
// same executable started by the parent with the same command line, it
// serves app. Code a program runs before calling Main runs in the parent
// and in every worker alike, so it should only define flags.
func Main(app App) int {
	if version, ok := os.LookupEnv(workerEnv); ok {
		return workerEntry(version, os.Args[1:], flag.CommandLine, app)
	}
	return run(os.Args[1:], os.Stdout, os.Stderr, flag.CommandLine, app)
}

// run is the parent's main: it returns the exit status. appFlags holds the
// App's flags.
func run(args []string, stdout, stderr io.Writer, appFlags *flag.FlagSet, app App) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	fe := &frontEnd{log: log}
	// First, so that no SIGHUP from now on ends the process.
	fe.reloads = watchHangups(fe)
	cfg, err := parseConfig(args, stdout, appFlags, app.Check)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "servery: %v\n", err)
		return exitUsage
	}
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
	fe.stop, fe.hurry = watchSignals(fe)
	fe.n = newNotifier(log)
	if cfg.Workers == 1 {
		return runDirect(cfg, app, ln, fe)
	}
	return runSupervised(cfg, ln, fe)
}

// frontEnd is what the parent's front end hands the mode it runs: the
// signals, the service manager and the log.
type frontEnd struct {
	stop    <-chan struct{} // closed by the first SIGINT or SIGTERM
	hurry   context.Context // cancelled by the second: skip the rest of the drain
	reloads *reloader       // SIGHUPs, coalesced
	n       *notifier       // sd_notify
	log     *slog.Logger
	// generation is the serving generation's number, which the mode
	// keeps, so the front end's own lines carry it too.
	generation atomic.Int64
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
func watchSignals(fe *frontEnd) (stop <-chan struct{}, hurry context.Context) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	stopC := make(chan struct{})
	hurry, cut := context.WithCancel(context.Background())
	go func() {
		sig := <-sigs
		fe.log.Info("stop requested", "signal", sig.String(), "generation", fe.generation.Load())
		close(stopC)
		sig = <-sigs
		fe.log.Warn("second signal: skipping the rest of the drain", "signal", sig.String(), "generation", fe.generation.Load())
		cut()
	}()
	return stopC, hurry
}

// runSupervised runs the service's generations of workers until a signal
// or a lost worker, then stops them.
func runSupervised(cfg *config, ln net.Listener, fe *frontEnd) int {
	log := fe.log
	svc := newService(cfg.supervisor(), ln, log)
	svc.notify = fe.n.notify
	svc.keys = cfg.TicketKeys
	svc.reloadTLS = cfg.reloadTLS
	fe.generation.Store(1)
	go fe.reloads.run(func() {
		err := svc.Reload(context.Background())
		if errors.Is(err, errNotServing) {
			log.Warn("reload ignored: not serving yet, or stopping", "generation", fe.generation.Load())
		}
		fe.generation.Store(int64(svc.servingGeneration()))
	}, fe.stop)
	go func() {
		<-fe.stop
		svc.Stop(fe.hurry) // a signal during startup cancels it
	}()
	if err := svc.Start(context.Background()); err != nil {
		if errors.Is(err, context.Canceled) && !errors.Is(err, errSurvived) {
			// The operator stopped a startup, and the rollback was clean.
			log.Info("stopped during startup", "generation", 1, "rolled_back", err)
			return exitOK
		}
		log.Error("not started", "generation", 1, "err", err)
		return exitFailure
	}
	log.Info("serving", "generation", 1, "url", cfg.url(ln), "workers", cfg.Workers,
		"pids", fmt.Sprint(svc.pids()), "ready_in", time.Since(processStart).Round(100*time.Microsecond))
	err := svc.Wait()
	gen := svc.servingGeneration()
	if err != nil {
		log.Error("stopped with error", "generation", gen, "err", err)
		return exitFailure
	}
	log.Info("stopped", "generation", gen)
	return exitOK
}

func errString(err error) string {
	if err == nil {
		return "complete"
	}
	return err.Error()
}
