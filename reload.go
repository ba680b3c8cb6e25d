package main

// reload.go replaces the serving generation without dropping a request:
// the next generation runs the whole startup barrier on the same listener
// while the serving one keeps accepting, and only once every new worker is
// ready does the old one retire, with the usual drain and deadlines. A
// generation that fails is rolled back and the serving one never hears of
// it. SIGHUP is the front end, coalesced; Service.Reload is the control API.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

// errNotServing is Reload's answer when there is no serving generation to
// replace: before Start succeeded, or once the service is ending.
var errNotServing = errors.New("reload: not serving")

// Reload starts the next generation on the listener and blocks until it is
// ready and the previous one has begun to retire, or until it has been
// rolled back; the previous generation then drains within the drain and
// force deadlines, measured from the moment it retires. A reload asked for
// while an earlier generation is still retiring first waits for it, so at
// most two generations ever have live processes, and reloads run one at a
// time.
//
// If the new generation fails (a worker that cannot build its runtime, the
// startup timeout, ctx cancelled, a stop), it is rolled back completely and
// the serving generation is never signalled or written to; Reload returns
// the error, naming the worker, and the service keeps serving. The new
// generation runs the executable as it is now, the TLS identity as
// reloadTLS gives it, and whatever its App reads at start (the static
// site's -dir, resolved again); the command line is the parent's, unchanged.
func (v *Service) Reload(ctx context.Context) error {
	v.reloadMu.Lock()
	defer v.reloadMu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v.mu.Lock()
	if v.stopping || v.serving == nil {
		v.mu.Unlock()
		return errNotServing
	}
	v.cancelReload, v.reloadDone = cancel, make(chan struct{})
	old := v.retiring
	v.mu.Unlock()
	defer v.endReload()

	if old != nil {
		v.log.Info("reload waits for the retiring generation", "generation", old.cfg.Generation)
		select {
		case <-old.done:
		case <-ctx.Done():
			return fmt.Errorf("reload: %w", context.Cause(ctx))
		}
	}
	gen, err := v.reloadGeneration()
	switch {
	case errors.Is(err, errNotServing):
		return err
	case err != nil:
		return v.reloadFailed(v.nextNumber(), err)
	}
	if err := gen.Start(ctx); err != nil {
		return v.reloadFailed(gen.cfg.Generation, err)
	}
	if err := v.promote(gen); err != nil {
		if errors.Is(err, errNotServing) {
			return err
		}
		gen.Wait() // its lost worker stops it; at most two generations live
		return v.reloadFailed(gen.cfg.Generation, err)
	}
	return nil
}

// nextNumber is the number the next generation will have, for the log of
// a reload that failed before it had one.
func (v *Service) nextNumber() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.generations + 1
}

// reloadGeneration builds the next generation with the TLS identity read
// again and announces the reload to the service manager, unless the end
// began since Reload looked (errNotServing): nothing may follow STOPPING=1.
func (v *Service) reloadGeneration() (*Supervisor, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stopping {
		return nil, errNotServing
	}
	v.notify("RELOADING=1", monotonicUsec())
	if v.reloadTLS != nil {
		id, err := v.reloadTLS()
		if err != nil {
			return nil, fmt.Errorf("reload tls: %w", err)
		}
		v.cfg.Runtime.TLS = id
	}
	gen := v.nextGeneration()
	v.log.Info("reloading", "generation", gen.cfg.Generation, "serving", v.serving.cfg.Generation)
	return gen, nil
}

// reloadFailed logs a failed reload, tells the service manager that the
// serving generation goes on, and returns err.
func (v *Service) reloadFailed(generation int, err error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.log.Error("reload failed, still serving", "generation", generation, "serving", v.serving.cfg.Generation, "err", err)
	if !v.stopping {
		v.notify("READY=1", "STATUS=reload failed, generation "+strconv.Itoa(v.serving.cfg.Generation)+" still serving: "+err.Error())
	}
	return fmt.Errorf("reload: %w", err)
}

// promote makes the ready gen the serving generation, sends it the ticket
// keys as they are now (a rotation may have come since its config), and
// retires the one it replaces. A worker of gen lost since its ready fails
// the reload instead: gen is stopping itself, and the serving generation
// stays. If the end began meanwhile, gen serves only to be stopped: the
// stop, waiting for this Reload, stops both.
func (v *Service) promote(gen *Supervisor) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := gen.lostErr(); err != nil {
		return err
	}
	old := v.serving
	v.serving, v.retiring = gen, old
	if v.stopping {
		return errNotServing
	}
	if v.keys != nil {
		gen.sendTicketKeys(v.keys.current())
	}
	v.log.Info("reloaded", "generation", gen.cfg.Generation, "retiring", old.cfg.Generation, "pids", fmt.Sprint(gen.pids()))
	v.notify("READY=1", fmt.Sprintf("STATUS=generation %d serving with %d workers", gen.cfg.Generation, v.cfg.Workers))
	go v.retire(old)
	return nil
}

// retire drains and reaps a replaced generation, then forgets it.
func (v *Service) retire(old *Supervisor) {
	err := old.Stop(context.Background())
	v.mu.Lock()
	if v.retiring == old {
		v.retiring = nil
	}
	v.mu.Unlock()
	if err != nil {
		v.log.Error("retired generation ended with error", "generation", old.cfg.Generation, "err", err)
		return
	}
	v.log.Info("generation retired", "generation", old.cfg.Generation)
}

// endReload clears the reload in progress.
func (v *Service) endReload() {
	v.mu.Lock()
	close(v.reloadDone)
	v.cancelReload, v.reloadDone = nil, nil
	v.mu.Unlock()
}

// reloader is the SIGHUP front end: requests that arrive while a reload
// runs coalesce into at most one more, which runs when it ends.
type reloader struct {
	pending chan struct{} // capacity 1: the one reload asked for meanwhile
}

func newReloader() *reloader { return &reloader{pending: make(chan struct{}, 1)} }

// request asks for a reload; it never blocks.
func (r *reloader) request() {
	select {
	case r.pending <- struct{}{}:
	default: // one is pending already: this one coalesces into it
	}
}

// run calls reload once per pending request until stop closes.
func (r *reloader) run(reload func(), stop <-chan struct{}) {
	for {
		select {
		case <-r.pending:
			reload()
		case <-stop:
			return
		}
	}
}

// watchHangups turns SIGHUP into reload requests, so a hangup (a closed
// terminal, or `systemctl reload`) never ends servery, which is Go's
// default for it. It returns the reloader they feed.
func watchHangups(fe *frontEnd) *reloader {
	r := newReloader()
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	go func() {
		for range hups {
			fe.log.Info("reload requested", "signal", "hangup", "generation", fe.generation.Load())
			r.request()
		}
	}()
	return r
}

// servingGeneration returns the serving generation's number, or 0 before
// the first is ready.
func (v *Service) servingGeneration() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.serving == nil {
		return 0
	}
	return v.serving.cfg.Generation
}
