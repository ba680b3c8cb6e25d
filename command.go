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
	"path/filepath"
	"sync"
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
	if theirs, ok := os.LookupEnv(upgradeCheckEnv); ok {
		return answerUpgradeCheck(theirs, os.Args[1:], flag.CommandLine, app) // an upgrade's old image asks (upgrade.go)
	}
	if version, ok := os.LookupEnv(workerEnv); ok {
		return workerEntry(version, os.Args[1:], flag.CommandLine, app)
	}
	return run(os.Args[1:], os.Stdout, os.Stderr, flag.CommandLine, app)
}

// run is the parent's main: it returns the exit status. appFlags holds the
// App's flags.
func run(args []string, stdout, stderr io.Writer, appFlags *flag.FlagSet, app App) int {
	sink := newLogSink(stderr)
	log := sink.logger()
	fe := newFrontEnd(log)
	fe.sink = sink
	// First, so that no SIGHUP from now on ends the process, nor a
	// SIGTTIN or SIGTTOU stops it, nor a SIGUSR2 ends it; and after an
	// upgrade's exec, the descriptors handed over are close-on-exec again
	// before the program's own code (its Check) can start a child.
	fe.reloads = watchHangups(fe)
	watchScaling(fe)
	watchUpgrades(fe)
	h, herr := takeHandover()
	cfg, err := parseConfig(args, stdout, appFlags, app.Check)
	if errors.Is(err, flag.ErrHelp) || errors.Is(err, errVersionShown) {
		return exitOK
	}
	if err == nil {
		err = errors.Join(sink.setFormat(cfg.LogFormat), sink.setLevel(cfg.LogLevel)) // checked with the flags
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", programName(), err)
		return exitUsage
	}
	cfg.warnCache(appFlags, log)
	if herr != nil {
		// The old image is gone: its workers read EOF as this exits, and
		// drain.
		log.Error("upgrade: cannot take over", "err", herr)
		return exitFailure
	}
	var ln net.Listener
	code := exitFailure
	if h != nil {
		ln, err = fe.takeOver(cfg, h)
	} else {
		ln, code, err = fe.bind(cfg, stderr)
	}
	if err != nil {
		return code
	}
	fe.delay = cfg.ShutdownDelay
	watchSignals(fe)
	watchReopens(fe)
	fe.n = newNotifier(log)
	return runService(cfg, app, ln, fe, h)
}

// bind makes what the service serves with when it starts: the TLS
// identity, the listener (systemd's, or -addr) and the status listener.
// It logs what fails, and returns the exit status that failure means: a
// socket passed that it cannot serve is the configuration's fault.
func (fe *frontEnd) bind(cfg *config, stderr io.Writer) (net.Listener, int, error) {
	activated, isActivated, err := activatedListener()
	if err != nil {
		fmt.Fprintf(stderr, "%s: socket activation: %v\n", programName(), err)
		return nil, exitUsage, err
	}
	if err := cfg.makeIdentity(fe.log); err != nil {
		fe.log.Error("tls", "err", err)
		return nil, exitFailure, err
	}
	ln, err := listen(cfg, activated, isActivated, fe.log)
	if err != nil {
		fe.log.Error("cannot listen", "addr", cfg.Addr, "err", err)
		return nil, exitFailure, err
	}
	if cfg.StatusAddr != "" {
		if fe.statusLn, err = net.Listen("tcp", cfg.StatusAddr); err != nil {
			ln.Close()
			fe.log.Error("cannot listen", "status_addr", cfg.StatusAddr, "err", err)
			return nil, exitFailure, err
		}
	}
	return ln, exitOK, nil
}

// takeOver is bind for an upgrade's new image: the listeners, the TLS
// identity and the ticket keys are the old image's, handed over, so the
// address stays bound and sessions resume.
func (fe *frontEnd) takeOver(cfg *config, h *handover) (net.Listener, error) {
	if h.TLS != nil {
		cfg.Runtime.TLS = h.TLS
		cfg.TicketKeys = &ticketKeys{keys: h.Keys}
		cfg.Runtime.TicketKeys = h.Keys
	}
	ln, err := handedListener(h.Listener, "listener")
	if err == nil {
		fe.statusLn, err = handedListener(h.Status, "status listener")
	}
	if err != nil {
		fe.log.Error("upgrade: cannot take over", "err", err)
		if ln != nil {
			ln.Close()
		}
		return nil, err
	}
	return ln, nil
}

// programName is the name this program was started as, for the lines it
// writes before it has a logger: servery, or a vendoring program's own.
func programName() string {
	return filepath.Base(os.Args[0])
}

// frontEnd is what the parent's front end hands the mode it runs: the
// stop and reload requests (signals, or the program's own Control), the
// service manager and the log.
type frontEnd struct {
	stop      chan struct{}   // closed when the stop is requested: first SIGINT or SIGTERM, or Control.Stop
	stopOnce  sync.Once       // closes stop
	hurry     context.Context // cancelled by the second signal: skip the rest of the drain
	cut       context.CancelFunc
	reloads   *reloader       // SIGHUPs, coalesced
	scales    chan int        // SIGTTIN's 1 and SIGTTOU's -1, until the Service takes them
	upgrades  chan struct{}   // SIGUSR2's, until the Service takes them
	sigs      chan os.Signal  // the stop signals, to watchSignals
	quiet     chan chan error // an upgrade's exec asks watchSignals to quiet the stop signals
	stopAsked atomic.Bool     // set by requestStop as it begins
	n         *notifier       // sd_notify
	log       *slog.Logger
	sink      *logSink // log's output, which the workers' lines share (output.go)
	// accessFile is the access log when it is a file, which SIGUSR1
	// reopens: set by runService, read by the signal's goroutine; nil
	// otherwise.
	accessFile atomic.Pointer[accessFile]
	statusLn   net.Listener // -status-addr's, bound by run; nil: off
	// The shutdown delay (-shutdown-delay): delaying is true from the
	// stop request until the delay is over or skipped, and whichever of
	// the two sets it false first decides; skip is closed by a second
	// signal that skips it.
	delay    time.Duration
	delaying atomic.Bool
	skip     chan struct{}
	// generation is the serving generation's number, which the mode
	// keeps, so the front end's own lines carry it too; served says that
	// one has begun to serve.
	generation atomic.Int64
	served     atomic.Bool
}

func newFrontEnd(log *slog.Logger) *frontEnd {
	fe := &frontEnd{log: log, stop: make(chan struct{}), skip: make(chan struct{}), scales: make(chan int, 16), upgrades: make(chan struct{}, 1),
		quiet: make(chan chan error)}
	fe.hurry, fe.cut = context.WithCancel(context.Background())
	return fe
}

// requestStop begins the stop once; later requests do nothing. by says
// who asked, for the log. Whether the shutdown delay runs is decided
// here, once: only if a generation serves. A stop during startup has no
// delay, so a second signal then hurries the rollback at once instead of
// being spent on skipping a delay that never runs.
func (fe *frontEnd) requestStop(by ...any) {
	fe.stopOnce.Do(func() {
		fe.stopAsked.Store(true) // before the line, which may wait: an upgrade's exec looks (quietStops)
		fe.log.Info("stop requested", append(by, "generation", fe.generation.Load())...)
		fe.delaying.Store(fe.delay > 0 && fe.served.Load())
		close(fe.stop)
	})
}

// skipDelay skips the shutdown delay if it still runs, and reports
// whether it did.
func (fe *frontEnd) skipDelay() bool {
	if !fe.delaying.CompareAndSwap(true, false) {
		return false
	}
	close(fe.skip)
	return true
}

// shutdownDelay runs the shutdown delay, if there is one and svc serves:
// svc says it is not ready (Service.leave) and serves on until the delay
// is over, a second signal skips it, or the service ends of its own
// accord. Load balancers and Kubernetes remove an endpoint when its stop
// begins but take a while to stop sending to it; the delay keeps
// answering that traffic instead of refusing it. A stop during startup
// has nothing to delay: nobody sends traffic to a service not yet ready.
func (fe *frontEnd) shutdownDelay(svc *Service) {
	gen := svc.state().Serving
	if !fe.delaying.Load() || gen == 0 {
		fe.delaying.Store(false)
		return
	}
	svc.leave()
	fe.log.Info("shutdown delay: not ready, serving on", "delay", fe.delay, "generation", gen)
	t := time.NewTimer(fe.delay)
	defer t.Stop()
	select {
	case <-t.C:
		if fe.delaying.CompareAndSwap(true, false) {
			fe.log.Info("shutdown delay over", "generation", fe.generation.Load())
		}
	case <-fe.skip:
		fe.log.Warn("second signal: skipping the rest of the shutdown delay", "generation", fe.generation.Load())
	case <-svc.done:
	}
}

// startParent runs app.Parent, if the program has one, in a goroutine of
// its own, with a Control over svc's reload, scale and upgrade and the
// front end's stop. Its
// context ends when the stop begins or when the returned cancel is
// called, as the mode returns.
func (fe *frontEnd) startParent(app App, svc *Service) (cancel func()) {
	if app.Parent == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-fe.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	c := &Control{reload: svc.Reload, scale: svc.Scale, upgrade: svc.Upgrade, stop: func() { fe.requestStop("by", "program") }}
	go app.Parent(ctx, c)
	return cancel
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

// watchSignals is the signal front end. The first SIGINT or SIGTERM
// requests the stop; the next skips the shutdown delay while it runs,
// and otherwise cancels hurry, which skips the rest of the drain. It is
// also where an upgrade's exec quiets them (quietStops): one goroutine
// takes both, so a signal it has taken is a stop the exec sees.
func watchSignals(fe *frontEnd) {
	sigs := make(chan os.Signal, 2)
	fe.sigs = sigs
	signal.Notify(sigs, stopSignals...)
	go func() {
		taken := 0
		for {
			select {
			case sig := <-sigs:
				if taken++; !fe.stopSignal(sig, taken == 1) {
					return
				}
			case r := <-fe.quiet:
				r <- fe.quietNow(sigs)
			}
		}
	}()
}

// stopSignal acts on a stop signal, the first or a later one, and
// reports whether later ones still matter.
func (fe *frontEnd) stopSignal(sig os.Signal, first bool) bool {
	switch {
	case first:
		fe.requestStop("signal", sig.String())
	case fe.skipDelay():
	default:
		fe.log.Warn("second signal: skipping the rest of the drain", "signal", sig.String(), "generation", fe.generation.Load())
		fe.cut()
		return false
	}
	return true
}

// stopSignals are the signals that ask for the stop.
var stopSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM}

// errStopFirst fails an upgrade whose exec a stop came before.
var errStopFirst = errors.New("a stop was asked for first")

// quietStops is the front end's part of an upgrade's exec: from now on a
// stop signal takes its default action (it ends the process, and the
// workers drain as on any parent death) instead of being taken by a
// watcher the exec is about to end, where it would be lost and the new
// image would serve on. It fails if a stop was asked for already, or
// came meanwhile: the stop goes first, and the upgrade does not happen.
func (fe *frontEnd) quietStops() error {
	r := make(chan error, 1)
	select {
	case fe.quiet <- r:
		return <-r
	case <-fe.stop:
		return errStopFirst
	}
}

// quietNow is quietStops in watchSignals' goroutine, which takes sigs.
func (fe *frontEnd) quietNow(sigs chan os.Signal) error {
	if fe.stopAsked.Load() {
		return errStopFirst // by a signal taken, or by the program's Control.Stop
	}
	signal.Reset(stopSignals...)
	if len(sigs) > 0 {
		// One came as they were reset: the watcher takes it next.
		fe.resumeStops()
		return errStopFirst
	}
	return nil
}

// resumeStops undoes quietStops: the exec failed, and the watcher takes
// the stop signals again.
func (fe *frontEnd) resumeStops() { signal.Notify(fe.sigs, stopSignals...) }

// passScales hands svc the scales the signals ask for until it ends.
func (fe *frontEnd) passScales(svc *Service) {
	for {
		select {
		case delta := <-fe.scales:
			svc.requestScale(delta)
		case <-svc.done:
			return
		}
	}
}

// openAccessLog returns where the access log goes, which the parent
// writes for every worker (output.go) and direct mode for itself: the
// log's own output for "-", or the file at path, which SIGUSR1 reopens
// from then on; nil for none.
func (fe *frontEnd) openAccessLog(path string) (io.Writer, error) {
	switch path {
	case "":
		return nil, nil
	case "-":
		return fe.sink.w, nil
	}
	f, err := openAccessFile(path)
	if err != nil {
		return nil, err
	}
	fe.accessFile.Store(f)
	return f, nil
}

// reopenLogs opens the access log file again at its path, after
// logrotate moved it (SIGUSR1). What was written before went to the old
// file, whole; what is written after goes to the new one.
func (fe *frontEnd) reopenLogs() {
	f := fe.accessFile.Load()
	if f == nil {
		fe.log.Info("reopen asked: no log file to reopen", "signal", "SIGUSR1")
		return
	}
	if err := f.reopen(); err != nil {
		fe.log.Error("cannot reopen the access log: still writing the old file", "path", f.path, "err", err)
		return
	}
	fe.log.Info("access log reopened", "path", f.path)
}

// runService runs the service's generations until a stop is requested
// or a serving worker is lost, then stops them, and returns the exit
// status. With -workers 1 a generation is direct mode's in-process
// handler, otherwise worker processes; the lifecycle loop drives both
// alike (lifecycle.go).
func runService(cfg *config, app App, ln net.Listener, fe *frontEnd, h *handover) int {
	log := fe.log
	access, err := fe.openAccessLog(cfg.Runtime.AccessLog)
	if err != nil {
		ln.Close()
		log.Error("cannot build runtime", "generation", 1, "err", err)
		return exitFailure
	}
	if f := fe.accessFile.Load(); f != nil {
		defer f.Close()
	}
	var out *workerOutput
	if cfg.Workers > 1 {
		out = newWorkerOutput(fe.sink, access)
		defer out.close() // after every generation has stopped, before the file closes
	}
	build, err := generations(cfg, app, ln, log, out, access)
	if err != nil {
		ln.Close()
		log.Error("cannot build runtime", "generation", 1, "err", err)
		return exitFailure
	}
	svc := newService(ln, log, cfg.Workers, build)
	svc.policy = cfg.policy()
	svc.output = out
	svc.notify = fe.n.notify
	svc.keys = cfg.TicketKeys
	svc.serving = func(n int) { fe.generation.Store(int64(n)); fe.served.Store(true) }
	if cfg.Workers > 1 && multiWorker {
		svc.upgrades = &upgrader{statusLn: fe.statusLn, args: os.Args[1:], exec: execImage, quiet: fe.quietStops, loud: fe.resumeStops}
	}
	if period := watchdogPeriod(); period > 0 {
		go svc.watchdog(period)
	}
	if cfg.Workers > 1 {
		reserveThreads() // before any worker, adopted or new, holds the host's last tasks
	}
	fe.generation.Store(1)
	if h != nil {
		fe.generation.Store(int64(h.Serving.Number))
		svc.takeOver(h)
	}
	if h != nil {
		// Before the stop's watcher, so a stop right after the exec
		// stops the adopted workers too, and before the status listener,
		// so no scrape sees the counters without them.
		if err := svc.adopt(h); err != nil {
			log.Error("upgrade: cannot adopt", "err", err)
			return exitFailure
		}
	}
	go fe.reloads.run(svc.requestReload, svc.done)
	go fe.passScales(svc)
	go fe.passUpgrades(svc)
	if fe.statusLn != nil {
		st := serveStatus(fe.statusLn, svc, log)
		defer st.close()
		log.Info("status listener", "url", "http://"+fe.statusLn.Addr().String()+"/")
	}
	go func() {
		select {
		case <-fe.stop:
			fe.shutdownDelay(svc)
			svc.Stop(fe.hurry) // a signal during startup cancels it
		case <-svc.done:
		}
	}()
	if h != nil {
		defer fe.startParent(app, svc)()
		return fe.waitServed(svc)
	}
	if err := svc.Start(context.Background()); err != nil {
		if errors.Is(err, context.Canceled) && !errors.Is(err, errSurvived) && !errors.Is(err, errAppStop) {
			// The operator stopped a startup, and the rollback was clean.
			log.Info("stopped during startup", "generation", 1, "rolled_back", err)
			return exitOK
		}
		log.Error("not started", "generation", 1, "err", err)
		return exitFailure
	}
	log.Info("serving", "generation", 1, "url", cfg.url(ln), "workers", cfg.Workers,
		"pids", fmt.Sprint(svc.pids()), "ready_in", time.Since(processStart).Round(100*time.Microsecond))
	defer fe.startParent(app, svc)()
	return fe.waitServed(svc)
}

// waitServed waits for svc to end and returns the exit status.
func (fe *frontEnd) waitServed(svc *Service) int {
	err := svc.Wait()
	gen := svc.state().Serving
	if err != nil {
		fe.log.Error("stopped with error", "generation", gen, "err", err)
		return exitFailure
	}
	fe.log.Info("stopped", "generation", gen)
	return exitOK
}

// passUpgrades hands svc the upgrades SIGUSR2 asks for until it ends.
func (fe *frontEnd) passUpgrades(svc *Service) {
	for {
		select {
		case <-fe.upgrades:
			svc.requestUpgrade()
		case <-svc.done:
			return
		}
	}
}

// generations returns what builds each generation for the Service:
// direct mode's handler with -workers 1, around the one server it builds
// here, or worker processes.
func generations(cfg *config, app App, ln net.Listener, log *slog.Logger, out *workerOutput, access io.Writer) (buildFunc, error) {
	if cfg.Workers > 1 {
		sc := cfg.supervisor()
		sc.Output = out
		sc.Runtime.AccessPipe = access != nil // the parent writes every worker's lines
		return workerGenerations(sc, ln, log, cfg.reloadTLS), nil
	}
	rt, err := newDirectRuntime(cfg, app, ln, log, access)
	if err != nil {
		return nil, err
	}
	return rt.generation, nil
}

func errString(err error) string {
	if err == nil {
		return "complete"
	}
	return err.Error()
}
