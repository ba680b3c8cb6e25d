package main

// reload.go is the front end of a reload: SIGHUP. A reload replaces the
// serving generation without dropping a request: the next generation
// runs the whole startup barrier on the same listener while the serving
// one keeps accepting, and only once every new worker is ready does the
// old one retire, with the usual drain and deadlines. A generation that
// fails is rolled back and the serving one never hears of it. The
// lifecycle loop decides all of that (lifecycle.go: onReload, next,
// onStarted, promote); Service.Reload and the program's Control.Reload
// ask for it as SIGHUP does.

import (
	"os"
	"os/signal"
	"syscall"
)

// reloader holds the SIGHUPs that arrive before the Service can take
// them, at most one, and hands them on; the Service coalesces the rest.
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
