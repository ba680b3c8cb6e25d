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
	"net/http"
	"os"
	"os/signal"
	"sync"
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
	// First, so that no SIGHUP from now on ends the process.
	reloads := watchHangups(log)
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
	stop, hurry := watchSignals(log)
	n := newNotifier(log)
	if cfg.Workers == 1 {
		return runDirect(cfg, app, ln, stop, hurry, reloads, n, log)
	}
	return runSupervised(cfg, ln, stop, hurry, reloads, n, log)
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

// runDirect serves app in this process until a signal, then drains and
// runs the App's stop step within what is left of the force deadline. A
// reload swaps in a newly built handler (directSwap).
func runDirect(cfg *config, app App, ln net.Listener, stop <-chan struct{}, hurry context.Context, reloads *reloader, n *notifier, log *slog.Logger) int {
	h, err := startDirect(context.Background(), cfg, app, 1, log)
	if err != nil {
		ln.Close()
		log.Error("cannot build runtime", "err", err)
		return exitFailure
	}
	apps := &directSwap{}
	apps.current.Store(&directApp{h: h, generation: 1})
	srv, err := newServer(cfg.Runtime, apps, log)
	if err != nil {
		ln.Close()
		stopApp(context.Background(), app, h)
		log.Error("cannot build runtime", "err", err)
		return exitFailure
	}
	served := make(chan error, 1)
	go func() { served <- srv.serve(ln) }()
	var reloading sync.Mutex // held by a reload, then by the stop
	reloadCtx, cancelReload := context.WithCancel(context.Background())
	defer cancelReload()
	go reloads.run(func() {
		reloading.Lock()
		defer reloading.Unlock()
		reloadDirect(reloadCtx, cfg, app, srv, apps, n, log)
	}, stop)
	if cfg.TicketKeys != nil {
		go rotateDirect(srv, cfg.TicketKeys, stop, log)
	}
	log.Info("serving", "generation", 1, "url", cfg.url(ln), "workers", 1,
		"ready_in", time.Since(processStart).Round(100*time.Microsecond))
	n.notify("READY=1", "STATUS=serving with 1 worker (direct mode)")
	select {
	case err := <-served:
		log.Error("serving stopped", "err", err)
		return exitFailure
	case <-stop:
	}
	n.notify("STOPPING=1")
	began := time.Now()
	cancelReload()
	reloading.Lock() // a reload in progress gives up, and stops what it built
	last := apps.current.Load()
	h = last.h
	err = srv.drain(hurry)
	st := srv.stats()
	log.Info("stopped", "generation", last.generation, "accepted", st.Accepted, "served", st.Served, "drain", errString(err))
	stopCtx, cancel := context.WithDeadline(hurry, began.Add(cfg.ForceTimeout))
	defer cancel()
	if err := stopApp(stopCtx, app, h); err != nil {
		log.Error("app stop failed", "err", err)
		return exitFailure
	}
	return exitOK
}

// rotateDirect rotates the direct mode's ticket keys every
// ticketKeyRotation, as the Service does for workers, until stop closes.
func rotateDirect(srv *server, keys *ticketKeys, stop <-chan struct{}, log *slog.Logger) {
	t := time.NewTicker(ticketKeyRotation)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := keys.rotate(); err != nil {
				log.Error("ticket key rotation", "err", err)
				continue
			}
			setTicketKeys(srv.tls, keys.current())
			log.Info("ticket keys rotated")
		case <-stop:
			return
		}
	}
}

// startDirect runs the App's start step in this process, as worker 0 of 1
// of generation, within the startup timeout.
func startDirect(ctx context.Context, cfg *config, app App, generation int, log *slog.Logger) (http.Handler, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.StartupTimeout)
	defer cancel()
	return startApp(ctx, app, Worker{Index: 0, Count: 1, Generation: generation, Log: log})
}

// reloadDirect is one direct-mode reload: it reads the TLS identity again
// and starts the App again, and only if both succeed swaps them in and
// stops the old App once its requests are done. Otherwise the old handler
// and certificate keep serving, untouched. ctx ends when a stop begins.
func reloadDirect(ctx context.Context, cfg *config, app App, srv *server, apps *directSwap, n *notifier, log *slog.Logger) {
	cur := apps.current.Load()
	gen := cur.generation + 1
	n.notify("RELOADING=1", monotonicUsec())
	log.Info("reloading", "generation", gen, "serving", cur.generation)
	failed := func(err error) {
		log.Error("reload failed, still serving", "generation", gen, "serving", cur.generation, "err", err)
		n.notify("READY=1", fmt.Sprintf("STATUS=reload failed, generation %d still serving: %v", cur.generation, err))
	}
	id, err := cfg.reloadTLS()
	if err != nil {
		failed(err)
		return
	}
	if id != nil {
		if _, err := id.certificate(); err != nil {
			failed(fmt.Errorf("-tls-cert: %w", err))
			return
		}
	}
	h, err := startDirect(ctx, cfg, app, gen, log)
	if err == nil && ctx.Err() != nil {
		stopApp(context.Background(), app, h)
		err = ctx.Err()
	}
	if err != nil {
		failed(err)
		return
	}
	srv.setIdentity(id) // parsed above, so it cannot fail
	drain, cancel := context.WithTimeout(ctx, cfg.Runtime.DrainTimeout)
	defer cancel()
	old, err := apps.swap(drain, &directApp{h: h, generation: gen})
	log.Info("reloaded", "generation", gen, "retiring", old.generation)
	n.notify("READY=1", fmt.Sprintf("STATUS=generation %d serving (direct mode)", gen))
	if err != nil {
		log.Warn("old handler stopped with requests on it", "generation", old.generation, "err", err)
	}
	stopCtx, cancelStop := context.WithTimeout(context.Background(), cfg.ForceTimeout-cfg.Runtime.DrainTimeout)
	defer cancelStop()
	if err := stopApp(stopCtx, app, old.h); err != nil {
		log.Error("app stop failed", "generation", old.generation, "err", err)
		return
	}
	log.Info("generation retired", "generation", old.generation)
}

// runSupervised runs the service's generation of workers until a signal
// or a lost worker, then stops it.
func runSupervised(cfg *config, ln net.Listener, stop <-chan struct{}, hurry context.Context, reloads *reloader, n *notifier, log *slog.Logger) int {
	svc := newService(cfg.supervisor(), ln, log)
	svc.notify = n.notify
	svc.keys = cfg.TicketKeys
	svc.reloadTLS = cfg.reloadTLS
	go reloads.run(func() {
		if err := svc.Reload(context.Background()); errors.Is(err, errNotServing) {
			log.Warn("reload ignored: not serving yet, or stopping")
		}
	}, stop)
	go func() {
		<-stop
		svc.Stop(hurry) // a signal during startup cancels it
	}()
	if err := svc.Start(context.Background()); err != nil {
		if errors.Is(err, context.Canceled) && !errors.Is(err, errSurvived) {
			// The operator stopped a startup, and the rollback was clean.
			log.Info("stopped during startup", "rolled_back", err)
			return exitOK
		}
		log.Error("not started", "err", err)
		return exitFailure
	}
	log.Info("serving", "generation", 1, "url", cfg.url(ln), "workers", cfg.Workers,
		"pids", fmt.Sprint(svc.pids()), "ready_in", time.Since(processStart).Round(100*time.Microsecond))
	if err := svc.Wait(); err != nil {
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
