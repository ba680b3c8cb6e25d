package main

// direct.go is direct mode (-workers 1): the App's handler served in this
// process, with no worker and no barrier, and its reload, which builds
// the handler again in-process and swaps it in under live connections.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// runDirect serves app in this process until a signal, then drains and
// runs the App's stop step within what is left of the force deadline. A
// reload swaps in a newly built handler (directReload).
func runDirect(cfg *config, app App, ln net.Listener, fe *frontEnd) int {
	log := fe.log
	fe.generation.Store(1)
	h, err := startDirect(context.Background(), cfg, app, 1, log)
	if err != nil {
		ln.Close()
		log.Error("cannot build runtime", "generation", 1, "err", err)
		return exitFailure
	}
	apps := &directSwap{}
	apps.current.Store(&directApp{h: h, generation: 1})
	srv, err := newServer(cfg.Runtime, apps, log)
	if err != nil {
		ln.Close()
		stopApp(context.Background(), time.Time{}, app, h)
		log.Error("cannot build runtime", "generation", 1, "err", err)
		return exitFailure
	}
	served := make(chan error, 1)
	go func() { served <- srv.serve(ln) }()
	r := &directReload{cfg: cfg, app: app, srv: srv, apps: apps, fe: fe}
	reloadCtx, cancelReload := context.WithCancel(context.Background())
	defer cancelReload()
	// A reload, asked for by SIGHUP or the program, is cut short by the stop.
	reload := func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(reloadCtx, cancel)()
		return r.reload(ctx)
	}
	go fe.reloads.run(func() { reload(context.Background()) }, fe.stop)
	if cfg.TicketKeys != nil {
		go rotateDirect(srv, cfg.TicketKeys, fe.stop, log)
	}
	log.Info("serving", "generation", 1, "url", cfg.url(ln), "workers", 1,
		"ready_in", time.Since(processStart).Round(100*time.Microsecond))
	fe.n.notify("READY=1", "STATUS=serving with 1 worker (direct mode)")
	defer fe.startParent(app, reload)()
	select {
	case err := <-served:
		log.Error("serving stopped", "generation", 1, "err", err)
		return exitFailure
	case <-fe.stop:
	}
	fe.n.notify("STOPPING=1")
	began := time.Now()
	// A reload in progress gives up at once (its App start is cancelled)
	// and stops what it built; none begins after this.
	cancelReload()
	r.mu.Lock()
	last := apps.current.Load()
	err = srv.drain(fe.hurry)
	st := srv.stats()
	log.Info("stopped", "generation", last.generation, "accepted", st.Accepted, "served", st.Served, "drain", errString(err))
	r.retiring.Wait() // a replaced handler's last requests and stop step
	force := began.Add(cfg.ForceTimeout)
	stopCtx, cancel := context.WithDeadline(fe.hurry, force)
	defer cancel()
	if err := stopApp(stopCtx, force, app, last.h); err != nil {
		log.Error("app stop failed", "generation", last.generation, "err", err)
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
	ctx, cancel := startupContext(ctx, cfg.StartupTimeout)
	defer cancel()
	return startApp(ctx, app, Worker{Index: 0, Count: 1, Generation: generation, Log: log})
}

// directReload is the direct mode's reload. One process has no second
// generation to start, so it builds the App's handler again in-process,
// with the TLS identity read again, and swaps both in only if both build;
// otherwise the old ones keep serving, untouched. The listener, the
// http.Server and its connections stay, so nothing is refused or reset.
// Every request is answered whole by the handler that was current when it
// began, and the replaced handler's stop step runs once its last request
// has finished, within the drain timeout.
type directReload struct {
	cfg  *config
	app  App
	srv  *server
	apps *directSwap
	fe   *frontEnd

	mu       sync.Mutex     // held by a reload, then by the stop
	retiring sync.WaitGroup // replaced handlers not yet stopped
}

// reload is one reload; ctx ends when the stop begins. It notifies the
// service manager as the Service does; the notifier drops what would
// follow STOPPING=1. It returns why the reload failed, or errNotServing
// once the stop has begun.
func (r *directReload) reload(ctx context.Context) error {
	if ctx.Err() != nil {
		return errNotServing // the stop holds r.mu from now on
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	log, n := r.fe.log, r.fe.n
	cur := r.apps.current.Load()
	gen := cur.generation + 1
	n.notify("RELOADING=1", monotonicUsec())
	log.Info("reloading", "generation", gen, "serving", cur.generation)
	h, id, err := r.build(ctx, gen)
	if err != nil {
		log.Error("reload failed, still serving", "generation", gen, "serving", cur.generation, "err", err)
		n.notify("READY=1", fmt.Sprintf("STATUS=reload failed, generation %d still serving: %v", cur.generation, err))
		return fmt.Errorf("reload: %w", err)
	}
	r.srv.setIdentity(id) // parsed by build, so it cannot fail
	old := r.apps.swap(&directApp{h: h, generation: gen})
	r.fe.generation.Store(int64(gen))
	log.Info("reloaded", "generation", gen, "retiring", old.generation)
	n.notify("READY=1", fmt.Sprintf("STATUS=generation %d serving (direct mode)", gen))
	r.retiring.Go(func() { r.retire(old) })
	return nil
}

// build reads the TLS identity again and starts the App as generation
// gen; it fails if either fails or ctx ended meanwhile.
func (r *directReload) build(ctx context.Context, gen int) (http.Handler, *tlsIdentity, error) {
	id, err := r.cfg.reloadTLS()
	if err != nil {
		return nil, nil, err
	}
	if id != nil {
		if _, err := id.certificate(); err != nil {
			return nil, nil, fmt.Errorf("-tls-cert: %w", err)
		}
	}
	h, err := startDirect(ctx, r.cfg, r.app, gen, r.fe.log)
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		stopApp(context.Background(), time.Time{}, r.app, h)
		return nil, nil, err
	}
	return h, id, nil
}

// retire waits until no request is left on a replaced handler, within the
// drain timeout, then runs its stop step within what is left of the force
// timeout; a second signal cuts both short.
func (r *directReload) retire(old *directApp) {
	log := r.fe.log
	drain, cancel := context.WithTimeout(r.fe.hurry, r.cfg.Runtime.DrainTimeout)
	defer cancel()
	if err := old.idle(drain); err != nil {
		log.Warn("old handler stopped with requests on it", "generation", old.generation, "err", err)
	}
	force := time.Now().Add(r.cfg.ForceTimeout - r.cfg.Runtime.DrainTimeout)
	stopCtx, cancelStop := context.WithDeadline(r.fe.hurry, force)
	defer cancelStop()
	if err := stopApp(stopCtx, force, r.app, old.h); err != nil {
		log.Error("app stop failed", "generation", old.generation, "err", err)
		return
	}
	log.Info("generation retired", "generation", old.generation)
}

// directSwap is the direct mode's handler: it passes each request to the
// current build of the App's handler and counts it there, so a reload
// knows when a replaced one has no request left.
type directSwap struct {
	current atomic.Pointer[directApp]
}

// directApp is one build of the direct mode's handler and the number of
// requests on it.
type directApp struct {
	h          http.Handler
	generation int
	inflight   atomic.Int64
}

func (d *directSwap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := d.acquire()
	defer a.inflight.Add(-1)
	a.h.ServeHTTP(w, r)
}

// acquire returns the current app with the request counted on it. The
// count is taken before the second look, so once swap has replaced an app,
// no request can begin on it unseen.
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

// swap makes next current and returns the app it replaced, on which no
// request begins from now on.
func (d *directSwap) swap(next *directApp) *directApp {
	return d.current.Swap(next)
}

// idle blocks until no request is left on a, or ctx ends.
func (a *directApp) idle(ctx context.Context) error {
	if err := pollUntil(ctx, 5*time.Millisecond, func() bool { return a.inflight.Load() == 0 }); err != nil {
		return fmt.Errorf("requests still on generation %d: %w", a.generation, err)
	}
	return nil
}
