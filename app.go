package main

// app.go is the application contract: what a program served by servery
// provides (a check, a start step, a stop step) and what each worker tells
// it. The static site is one App (staticapp.go); a program that vendors
// servery supplies its own and calls Main.
//
// The API is exported although this is package main, where exported
// names mean nothing to the compiler: servery is also meant to be copied
// into another module as a package of its own (README, "Embedding your own
// handler"), and there App, Worker and Main are what that program calls.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"
)

// App is a program servery serves: the Go counterpart of the design
// record's WSGI and ASGI runtimes. Only Start is required.
//
// Every process runs the program's code from its own main: the parent and
// each worker are the same executable, started with the same command line.
// Package-level state is therefore per process: with N workers there are N
// copies of every global, cache and connection pool, as there are N Python
// interpreters under a multi-process WSGI server. Budgets an App sizes
// itself (a cache, a pool) should be divided by Worker.Count.
//
// A reload (SIGHUP, or Service.Reload) runs Start again for the next
// generation, and Stop for the one it replaces. With workers they are new
// processes. In direct mode (-workers 1) they run in the one process,
// while the previous handler still serves: the new Start overlaps the old
// handler's last requests, and the old Stop runs after them. So state a
// Start builds belongs to the handler it returns, not to package globals
// that the next Start would overwrite or the old Stop would close.
type App struct {
	// Check runs once in the parent, after the command line is parsed and
	// before anything is bound or started. An error is a usage error: it
	// is printed as one line and servery exits 2. It is for validating
	// the App's own flags; it must not start anything.
	Check func() error

	// Start runs in every worker before it reports prepared, and in the
	// process itself in direct mode (-workers 1). It builds what the
	// worker serves and returns its handler. ctx ends at the startup
	// deadline (-startup-timeout). An error, a panic, or a Start still
	// running at the deadline fails the worker, and the whole generation
	// is rolled back: no worker of it ever answers a request. The error is
	// reported by the parent with the worker's index and pid. A Start
	// that ignores ctx is not waited for past the deadline; should it
	// return a handler later, Stop releases it.
	Start func(ctx context.Context, w Worker) (http.Handler, error)

	// Stop runs in every worker after its drain, with the handler its
	// Start returned, to release what Start built. ctx ends when the stop
	// should hurry: at the drain deadline's SIGTERM (or a second signal),
	// or at the force deadline. A Stop still running at the force
	// deadline is killed with its worker; in direct mode it is no longer
	// waited for, and fails. An error or a panic is logged, the worker
	// exits 1 and reports it, and the stop of its generation fails with
	// it: servery exits 1, as in direct mode. Stop may be nil.
	Stop func(ctx context.Context, h http.Handler) error

	// Health, when set, runs in a worker whenever the parent probes it
	// (-worker-timeout), one call at a time, with the handler its Start
	// returned: it reports whether the worker can still serve, as a
	// request would need, such as a database ping. ctx ends at the worker
	// timeout. The worker answers the probe only once Health returns nil
	// within it, so one that fails, or hangs, makes the parent find the
	// worker hung: its stacks are logged, it is killed and respawned. It
	// must not block on anything a slow but healthy request would not.
	// Health may be nil; the static site's checks that its directory
	// still answers a stat (a hung mount is a hung worker).
	Health func(ctx context.Context, h http.Handler) error

	// Parent, when set, runs in the parent alone, never in a worker, in a
	// goroutine of its own from the moment the first generation serves.
	// ctx ends when the stop begins, whoever began it. It is where a
	// program watches what the parent should act on, such as its
	// configuration file, and asks for a reload or a stop through c, as
	// SIGHUP and SIGTERM do. Main does not wait for it to return. Parent
	// may be nil.
	Parent func(ctx context.Context, c *Control)
}

// Control is how a program's own code in the parent (App.Parent) asks
// for what the operator's signals ask for. Its methods are safe for
// concurrent use.
type Control struct {
	reload  func(ctx context.Context) error
	scale   func(ctx context.Context, n int) error
	upgrade func(ctx context.Context) error
	stop    func()
}

// Reload starts the next generation, as SIGHUP does, and blocks until it
// serves or has been rolled back; the error says why it failed, naming
// the worker. The serving generation keeps serving either way. Reloads
// asked for while one runs wait for it and are answered by one more.
// ctx bounds only the wait: the reload goes on, and a stop cuts it short.
func (c *Control) Reload(ctx context.Context) error { return c.reload(ctx) }

// Scale sets the number of worker processes to n, as SIGTTIN and SIGTTOU
// add and remove one, and blocks until n serve or adding one failed; the
// error then names the worker, and the count stays at what serves. New
// workers start through the startup barrier one at a time, each told
// the new count (Worker.Count); the highest slots go first, with the
// usual drain. The count holds across reloads. n is at least 2 and at
// most -workers' bound; direct mode (-workers 1) cannot scale. ctx
// bounds only the wait.
func (c *Control) Scale(ctx context.Context, n int) error { return c.scale(ctx, n) }

// Upgrade runs the executable on disk in the parent in place of the
// running code, keeping the pid, as SIGUSR2 does, and then in new
// workers. It returns an error only if the upgrade did not happen (the
// new executable failed its check, or the exec failed) and the running
// code serves on; once the exec succeeds this process runs the new code
// from its start, App.Parent included, and the call never returns.
// Direct mode (-workers 1) cannot upgrade. ctx bounds only the wait.
func (c *Control) Upgrade(ctx context.Context) error { return c.upgrade(ctx) }

// Stop begins the stop, as the first SIGTERM does, and returns at once;
// Main returns once the stop has run its course.
func (c *Control) Stop() { c.stop() }

// Worker is what a worker's App is told about itself: the counterpart of
// wsgi.multiprocess. Index runs from 0 to Count-1 across a generation;
// in direct mode there is one worker, index 0 of 1. Generation counts
// the generations this servery has started, from 1. Log is the worker's
// logger, in servery's log format: in a worker process its lines carry
// its index, pid and generation; in direct mode only the generation, as
// the process's own lines do.
type Worker struct {
	Index, Count, Generation int
	Log                      *slog.Logger
}

// startApp runs app.Start and returns its handler, or an error if Start
// failed, panicked, returned no handler or was still running when ctx
// ended. It waits for Start no longer than ctx: in a worker the parent
// would kill it anyway, but in direct mode nothing else bounds the
// startup, and a stop must not wait behind a reload's Start. A Start left
// running is released by Stop if it returns a handler after all.
func startApp(ctx context.Context, app App, w Worker) (http.Handler, error) {
	type started struct {
		h   http.Handler
		err error
	}
	done := make(chan started, 1)
	go func() {
		h, err := callStart(ctx, app, w)
		done <- started{h, err}
	}()
	select {
	case r := <-done:
		return r.h, r.err
	case <-ctx.Done():
	}
	// A start that honours its context returns at once: give it that
	// moment, so its own error is the one reported and what it does on
	// the way out (a cleanup, a log line) runs before the process may
	// exit. One that ignores its context is not waited for.
	grace := time.NewTimer(startGrace)
	defer grace.Stop()
	select {
	case r := <-done:
		return r.h, r.err
	case <-grace.C:
	}
	go func() {
		if r := <-done; r.err == nil {
			stopApp(context.Background(), time.Time{}, app, r.h)
		}
	}()
	return nil, fmt.Errorf("app start: still running: %w", context.Cause(ctx))
}

// startGrace is how long startApp waits, once the start's context has
// ended, for the App's start to return.
const startGrace = 100 * time.Millisecond

// callStart calls app.Start, turning a panic into an error so that an App
// that panics while starting fails its worker like one that returns an
// error, and a nil handler into an error too.
func callStart(ctx context.Context, app App, w Worker) (h http.Handler, err error) {
	defer func() {
		if p := recover(); p != nil {
			w.Log.Error("app start panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("app start panicked: %v", p)
		}
	}()
	if h, err = app.Start(ctx, w); err != nil {
		return nil, fmt.Errorf("app start: %w", err)
	}
	if h == nil {
		return nil, errors.New("app start: returned no handler")
	}
	return h, nil
}

// stopApp runs app.Stop, if there is one, with ctx, and returns its
// error, or an error if it panicked or was still running at deadline (the
// force deadline; zero: no limit). ctx ending only asks Stop to hurry:
// a quick Stop still finishes after a second signal. Past the deadline
// it is not waited for, so a process that has to exit is not held by a
// Stop that ignores its context.
func stopApp(ctx context.Context, deadline time.Time, app App, h http.Handler) error {
	if app.Stop == nil {
		return nil
	}
	if deadline.IsZero() {
		return callStop(ctx, app, h)
	}
	done := make(chan error, 1)
	go func() { done <- callStop(ctx, app, h) }()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return errors.New("app stop: still running at the force deadline")
	}
}

// callStop calls app.Stop, turning a panic into an error.
func callStop(ctx context.Context, app App, h http.Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("app stop panicked: %v", p)
		}
	}()
	if err := app.Stop(ctx, h); err != nil {
		return fmt.Errorf("app stop: %w", err)
	}
	return nil
}
