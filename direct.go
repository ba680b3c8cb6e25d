package main

// direct.go is direct mode (-workers 1): the App's handler served in this
// process, with no worker and no barrier. Each generation is one build of
// the handler (directGen); the lifecycle loop (lifecycle.go) drives them
// exactly as it drives generations of workers, so a reload builds the
// handler again in-process and swaps it in under live connections, and a
// stop drains the one server.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// directRuntime is what every generation of direct mode shares: the one
// http.Server, its listener and the swap that hands each request to the
// current generation's handler.
type directRuntime struct {
	cfg  *config
	app  App
	srv  *server
	ln   net.Listener
	swap *directSwap
	log  *slog.Logger

	keyMu  sync.Mutex
	keySeq uint64 // of the ticket keys installed last

	countOnce sync.Once
	counts    *tally // the Service's, from the first generation's reports

	// exe is this process's executable as it was when it started, for
	// staleExecutable; nil where it cannot be found.
	exe os.FileInfo
}

// newDirectRuntime builds the server around an empty swap; nothing is
// accepted until the first generation serves.
func newDirectRuntime(cfg *config, app App, ln net.Listener, log *slog.Logger, access io.Writer) (*directRuntime, error) {
	rt := &directRuntime{cfg: cfg, app: app, ln: ln, swap: &directSwap{}, log: log}
	if path, err := os.Executable(); err == nil {
		rt.exe, _ = os.Stat(path)
	}
	srv, err := newServer(cfg.Runtime, rt.swap, log, access)
	if err != nil {
		return nil, fmt.Errorf("build runtime: %w", err)
	}
	rt.srv = srv
	return rt, nil
}

// generation returns direct mode's generation n, which reports the
// server's failure through lost while it serves. The ticket keys are the
// server's, installed by promote.
func (rt *directRuntime) generation(n, _ int, _ [][]byte, r reports) generation {
	d := &directGen{rt: rt, n: n, lost: r.lost, done: make(chan struct{})}
	rt.countOnce.Do(func() {
		rt.counts = r.counts
		rt.counts.begin(rt.srv, 0) // one server counts for every generation
	})
	d.hurry, d.cut = context.WithCancel(context.Background())
	return d
}

// directGen is one generation of direct mode: one build of the App's
// handler, and for a reload the TLS identity read again.
type directGen struct {
	rt   *directRuntime
	n    int
	lost func(error)
	app  *directApp   // what Start built
	id   *tlsIdentity // a reload's identity, read again; nil: keep the one served

	servedAt time.Time          // when promote swapped its handler in
	hurry    context.Context    // ends to skip the rest of the drain
	cut      context.CancelFunc // ends hurry
	stopOnce sync.Once
	done     chan struct{} // closed once the stop has finished
	err      error         // the stop's result; read after done
}

// Start reads the TLS identity again, for a reload, and runs the App's
// start step within the startup timeout. A Start that ctx cancels returns
// at once; a handler its App returns later is stopped then (startApp).
func (d *directGen) Start(ctx context.Context) error {
	if d.n > 1 {
		d.rt.staleExecutable(d.n)
		id, err := d.rt.cfg.reloadTLS()
		if err != nil {
			return fmt.Errorf("reload tls: %w", err)
		}
		if id != nil {
			if _, err := id.certificate(); err != nil {
				return fmt.Errorf("reload tls: -tls-cert: %w", err)
			}
		}
		d.id = id
	}
	h, err := startDirect(ctx, d.rt.cfg, d.rt.app, d.n, d.rt.log)
	if err != nil {
		return err
	}
	d.app = &directApp{h: h, generation: d.n, lost: d.lost}
	return nil
}

// promote swaps the new handler (and certificate) in: every request that
// begins from now on gets it. The first generation also starts the
// server; its failure is the serving generation's loss.
func (d *directGen) promote(seq uint64, keys [][]byte) error {
	rt := d.rt
	d.servedAt = time.Now()
	if d.id != nil {
		rt.srv.setIdentity(d.id) // parsed by Start, so it cannot fail
	}
	if keys != nil {
		d.sendTicketKeys(seq, keys)
	}
	if old := rt.swap.current.Swap(d.app); old != nil {
		return nil
	}
	go func() {
		// The Service closes the listener when the end begins, before
		// the drain does: that is no failure.
		if err := rt.srv.serve(rt.ln); err != nil && !errors.Is(err, net.ErrClosed) {
			rt.swap.current.Load().lost(err)
		}
	}()
	return nil
}

// replace has nothing to do in direct mode: its one process is the
// service, which the service manager restarts.
func (d *directGen) replace(context.Context, int, bool) (replacement, error) {
	return replacement{}, errors.New("direct mode has no worker to replace")
}

// grow and shrink have nothing to do in direct mode, which the Service
// never scales (scale.go).
func (d *directGen) grow(context.Context, int, int) (replacement, error) {
	return replacement{}, errScaleDirect
}

func (d *directGen) shrink(int, int) error { return errScaleDirect }

// beginStop begins the generation's stop in a goroutine of its own. The
// generation still current drains the server, as the end of the service;
// one replaced by a reload waits for its last request. Either then runs
// the App's stop step within what is left of the force deadline.
func (d *directGen) beginStop(error) {
	d.stopOnce.Do(func() {
		go func() {
			d.err = d.stop(time.Now())
			close(d.done)
		}()
	})
}

// stop is the generation's stop, its deadlines measured from began.
func (d *directGen) stop(began time.Time) error {
	rt, log, hurry := d.rt, d.rt.log.With("generation", d.n), d.hurry
	if rt.swap.current.Load() == d.app {
		err := rt.srv.drain(hurry)
		st := rt.srv.stats()
		log.Info("server drained", "accepted", st.Accepted, "served", st.Served, "drain", errString(err))
	} else {
		drain, cancelDrain := context.WithTimeout(hurry, rt.cfg.Runtime.DrainTimeout)
		if err := d.app.idle(drain); err != nil {
			log.Warn("old handler stopped with requests on it", "err", err)
		}
		cancelDrain()
	}
	force := began.Add(rt.cfg.ForceTimeout)
	stopCtx, cancelStop := context.WithDeadline(hurry, force)
	defer cancelStop()
	if err := stopApp(stopCtx, force, rt.app, d.app.h); err != nil {
		log.Error("app stop failed", "err", err)
		return fmt.Errorf("%w: %w", errAppStop, err)
	}
	return nil
}

// Wait blocks until the generation's stop has finished and returns how it
// ended: the App stop step's failure, or nil.
func (d *directGen) Wait() error {
	<-d.done
	return d.err
}

// skipDrain ends the drain and the wait for a replaced handler's last
// request, begun or to come, and hurries the App's stop step.
func (d *directGen) skipDrain() { d.cut() }

// sendTicketKeys installs rotated keys in the one server, unless newer
// ones already are.
func (d *directGen) sendTicketKeys(seq uint64, keys [][]byte) {
	rt := d.rt
	rt.keyMu.Lock()
	defer rt.keyMu.Unlock()
	if rt.srv.tls == nil || seq < rt.keySeq {
		return
	}
	rt.keySeq = seq
	if err := setTicketKeys(rt.srv.tls, keys); err != nil {
		rt.log.Warn("ticket keys", "generation", d.n, "err", err)
	}
}

// number is the generation's number.
func (d *directGen) number() int { return d.n }

// pids is empty: direct mode starts no worker process.
func (d *directGen) pids() []int { return nil }

// staleExecutable warns, at a reload, when the executable on disk is no
// longer the one this process runs: a reload in direct mode builds the
// handler again in this same process, so a new build installed since
// does not run, however the log's "reloaded" reads. Worker processes
// start from the file, so with -workers 2 or more a reload runs it.
func (rt *directRuntime) staleExecutable(generation int) {
	if rt.exe == nil {
		return
	}
	path, err := os.Executable()
	if err != nil {
		return
	}
	now, err := os.Stat(path)
	if err != nil || !os.SameFile(rt.exe, now) || !now.ModTime().Equal(rt.exe.ModTime()) {
		rt.log.Warn("executable changed since start: a reload in direct mode does not run it; restart servery, or serve with -workers 2 or more, whose reloads start the new build",
			"generation", generation, "path", path)
	}
}

// startDirect runs the App's start step in this process, as worker 0 of 1
// of generation, within the startup timeout.
func startDirect(ctx context.Context, cfg *config, app App, generation int, log *slog.Logger) (http.Handler, error) {
	ctx, cancel := startupContext(ctx, cfg.StartupTimeout)
	defer cancel()
	return startApp(ctx, app, Worker{Index: 0, Count: 1, Generation: generation, Log: log.With("generation", generation)})
}

// directSwap is the direct mode's handler: it passes each request to the
// current generation's handler and counts it there, so a replaced one
// knows when it has no request left.
type directSwap struct {
	current atomic.Pointer[directApp]
}

// directApp is one build of the direct mode's handler and the number of
// requests on it.
type directApp struct {
	h          http.Handler
	generation int
	lost       func(error)
	inflight   atomic.Int64
}

func (d *directSwap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := d.acquire()
	defer a.inflight.Add(-1)
	a.h.ServeHTTP(w, r)
}

// acquire returns the current app with the request counted on it. The
// count is taken before the second look, so once a swap has replaced an
// app, no request can begin on it unseen.
func (d *directSwap) acquire() *directApp {
	for {
		a := d.current.Load()
		a.inflight.Add(1)
		if d.current.Load() == a {
			return a
		}
		a.inflight.Add(-1)
	}
}

// idle blocks until no request is left on a, or ctx ends.
func (a *directApp) idle(ctx context.Context) error {
	if err := pollUntil(ctx, 5*time.Millisecond, func() bool { return a.inflight.Load() == 0 }); err != nil {
		return fmt.Errorf("requests still on generation %d: %w", a.generation, err)
	}
	return nil
}
