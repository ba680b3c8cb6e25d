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
type App struct {
	// Check runs once in the parent, after the command line is parsed and
	// before anything is bound or started. An error is a usage error: it
	// is printed as one line and servery exits 2. It is for validating
	// the App's own flags; it must not start anything.
	Check func() error

	// Start runs in every worker before it reports prepared, and in the
	// process itself in direct mode (-workers 1). It builds what the
	// worker serves and returns its handler. ctx ends at the startup
	// deadline (-startup-timeout). An error, a panic, or a Start that
	// outlives the deadline fails the worker, and the whole generation is
	// rolled back: no worker of it ever answers a request. The error is
	// reported by the parent with the worker's index and pid.
	Start func(ctx context.Context, w Worker) (http.Handler, error)

	// Stop runs in every worker after its drain, with the handler its
	// Start returned, to release what Start built. ctx ends when the stop
	// runs out of time: at the drain deadline's SIGTERM, or at the force
	// deadline. An error, or a panic, is logged and the worker exits 1,
	// which the parent logs as an unclean exit. Stop may be nil.
	Stop func(ctx context.Context, h http.Handler) error
}

// Worker is what a worker's App is told about itself: the counterpart of
// wsgi.multiprocess. Index runs from 0 to Count-1 across a generation;
// in direct mode there is one worker, index 0 of 1. Generation counts
// the generations this servery has started, from 1. Log is the worker's
// logger, carrying its index, pid and generation.
type Worker struct {
	Index, Count, Generation int
	Log                      *slog.Logger
}

// startApp runs app.Start, turning a panic into an error so that an App
// that panics while starting fails its worker like one that returns an
// error, and a nil handler into an error too.
func startApp(ctx context.Context, app App, w Worker) (h http.Handler, err error) {
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

// stopApp runs app.Stop, if there is one, turning a panic into an error.
func stopApp(ctx context.Context, app App, h http.Handler) (err error) {
	if app.Stop == nil {
		return nil
	}
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
