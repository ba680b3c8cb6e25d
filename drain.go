package main

// drain.go is the stop path on both sides. A serving runtime (the direct
// mode's, or a worker's) drains: it stops accepting, lets in-flight
// requests finish within the drain timeout, then closes what remains. The
// parent escalates: it closes every worker's stdin, then terminates
// survivors at the drain timeout and kills them at the force timeout.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// errDrainCut is returned by drain when connections were still open at the
// end of the drain and had to be closed.
var errDrainCut = errors.New("drain cut short")

// drain stops srv gracefully and blocks until it has. The listener closes
// at once; idle connections close; active ones get until the drain timeout
// to finish, or until hurry is cancelled (a second signal, or SIGTERM in a
// worker). Whatever is still open then is closed.
//
// Before net/http's Shutdown, HTTP/1 clients get closeGrace to leave on
// their own, since Shutdown is abrupt with two kinds of them. It closes an
// idle keep-alive connection at once, racing a request the client may be
// sending on it; and it drops, unanswered, a request it reads after it
// began, which is the first request of a connection accepted just before
// the listener closed. Go's Transport retries neither of these when the
// connection is new, nor does any client for a POST. So from the start of
// the drain every HTTP/1 response says Connection: close (counting), and
// the drain waits until the HTTP/1 connections have closed, their clients
// told by an answer, or closeGrace has passed; those left are idle or
// silent, and Shutdown closes them. During a reload, when another
// generation keeps serving the listener, this is what makes a retiring
// worker lose nothing.
func (srv *server) drain(hurry context.Context) error {
	ctx, cancel := context.WithTimeout(hurry, srv.cfg.DrainTimeout)
	defer cancel()
	srv.draining.Store(true)
	if ln := srv.ln.Load(); ln != nil {
		(*ln).Close()
		select {
		case <-srv.serving: // no connection is accepted after this
		case <-ctx.Done():
		}
	}
	srv.awaitClosed(ctx)
	err := srv.http.Shutdown(ctx)
	if err == nil {
		return srv.close()
	}
	srv.http.Close()
	srv.close()
	return fmt.Errorf("%w: %w", errDrainCut, err)
}

// closeGrace is how long a drain lets HTTP/1 clients leave by themselves:
// far more than a keep-alive client needs to send its next request and
// read the answer that closes, far less than a drain.
const closeGrace = time.Second

// awaitClosed blocks until no HTTP/1 connection is open, closeGrace
// passes, or ctx ends.
func (srv *server) awaitClosed(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, closeGrace)
	defer cancel()
	pollUntil(ctx, 2*time.Millisecond, func() bool { return srv.open.Load() == 0 })
}

// pollUntil blocks until done reports true, checked every interval, or
// ctx ends; it returns ctx's error in that case. A drain polls counters
// that every connection or request updates, rather than have each of them
// signal: a drain is rare, requests are not.
func pollUntil(ctx context.Context, interval time.Duration, done func() bool) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !done() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// escalate is the parent's stop: it blocks until every worker is reaped or
// the final deadline passes, and returns an error naming any worker still
// alive then. The deadlines are measured from began. drain is how long
// workers get to finish on their own; a closed s.hurry ends it early.
//
// All workers are waited on together, never one after another, so the
// stop takes as long as the slowest worker, not the sum.
func (s *Supervisor) escalate(began time.Time, drain time.Duration) error {
	force := s.cfg.ForceTimeout - s.cfg.DrainTimeout + drain
	s.log.Info("stop begun", "workers", len(s.procs), "terminate_after", drain, "kill_after", force)
	for _, p := range s.procs {
		p.stdin.Close() // EOF is the drain signal
	}
	stages := []struct {
		at     time.Duration
		hurry  <-chan struct{}
		signal os.Signal
		action string
	}{
		{drain, s.hurry, syscall.SIGTERM, "terminate"},
		{force, nil, syscall.SIGKILL, "kill"},
	}
	for _, st := range stages {
		if s.waitReaped(began.Add(st.at), st.hurry) {
			s.logExits()
			return nil
		}
		s.signalSurvivors(st.signal, st.action)
	}
	if s.waitReaped(time.Now().Add(finalGrace), nil) {
		s.logExits()
		return nil
	}
	return s.survivorsError()
}

// finalGrace is how long the parent waits after SIGKILL before it reports
// a survivor: the kernel needs a moment to tear a process down.
const finalGrace = time.Second

// waitReaped blocks until every worker is reaped (true), or until deadline
// passes or hurry closes (false, unless the last exit came at that very
// moment: select picks at random among ready cases).
func (s *Supervisor) waitReaped(deadline time.Time, hurry <-chan struct{}) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for _, p := range s.procs {
		select {
		case <-p.exited:
		case <-timer.C:
			return len(s.survivors()) == 0
		case <-hurry:
			return len(s.survivors()) == 0
		}
	}
	return true
}

// signalSurvivors sends sig to the process group of every worker not yet
// reaped. Each worker leads its own session, so the signal reaches its
// descendants too.
func (s *Supervisor) signalSurvivors(sig os.Signal, action string) {
	for _, p := range s.survivors() {
		s.log.Warn("worker outlived deadline", "worker", p.index, "pid", p.pid, "action", action)
		if err := s.seam.signal(p, sig); err != nil {
			s.log.Warn("signal failed", "worker", p.index, "pid", p.pid, "signal", sig, "err", err)
		}
	}
}

// survivors returns the workers not yet reaped.
func (s *Supervisor) survivors() []*workerProc {
	var alive []*workerProc
	for _, p := range s.procs {
		select {
		case <-p.exited:
		default:
			alive = append(alive, p)
		}
	}
	return alive
}

// errSurvived is wrapped by the error that names survivors of a stop.
var errSurvived = errors.New("survived the kill deadline")

// survivorsError names every worker still alive after the final deadline.
func (s *Supervisor) survivorsError() error {
	var names []string
	for _, p := range s.survivors() {
		names = append(names, fmt.Sprintf("worker %d (pid %d)", p.index, p.pid))
	}
	return fmt.Errorf("stop: %s %w", strings.Join(names, ", "), errSurvived)
}

// logExits logs how each reaped worker exited.
func (s *Supervisor) logExits() {
	for _, p := range s.procs {
		s.log.Info("worker exited", "worker", p.index, "pid", p.pid, "status", exitStatus(p.status))
	}
}

// exitStatus describes cmd.Wait's result for a log line.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
