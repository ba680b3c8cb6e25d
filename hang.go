package main

// hang.go is the hang watch: it finds a worker that has not exited but
// stopped making progress (a deadlocked handler, a hung NFS or FUSE mount
// under -dir, a process stopped or stuck in the kernel). The parent
// probes every serving worker over its pipe with the stats question
// (-worker-timeout) and kills a hung one, with its goroutines' stacks in
// the log first, so it is respawned as a lost worker is. The Supervisor's
// probe and the worker's answer are both here, as methods of their types;
// what a worker counts as progress is in progress.go. A worker whose
// memory grows asks to be recycled instead (memory.go).

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// defaultWorkerTimeout is -worker-timeout's default, gunicorn's 30 s:
// how long a worker's requests in flight may make no progress, none
// answered and nothing written, before the worker is hung. A request
// that legitimately runs longer without writing (a report, a long poll)
// calls Alive, or the operator raises the timeout. Measured by the
// worker's own ticker (progress.go), not by how soon it answers a probe:
// a worker whose CPU its own handlers take answers late, and is busy,
// not hung. Probing starts only once a worker is ready: a slow start is
// the startup timeout's business, never a hang.
const defaultWorkerTimeout = 30 * time.Second

// hungGrace is how long a hung worker gets after SIGQUIT, which makes the
// Go runtime write every goroutine's stack to stderr and exit, before it
// is killed. A stack dump of a few thousand goroutines takes well under
// this.
const hungGrace = 2 * time.Second

// probe asks every ready worker of the generation, every quarter of the
// worker timeout, for its counters, and finds hung one that does not
// answer (judgeSilence); an answer that reports no progress for the
// timeout is judged as it arrives (judgeProgress). It runs from serve
// until the generation's stop begins; scrapes ask too, and any answer
// counts.
func (s *Supervisor) probe() {
	timeout := s.cfg.WorkerTimeout
	interval := timeout / 4
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := monoNow()
	for {
		select {
		case <-tick.C:
		case <-s.done:
			return
		}
		now := monoNow()
		late := time.Duration(now-last) > 2*interval
		last = now
		s.mu.Lock()
		stopping := s.stopping
		var ready []*workerProc
		for _, p := range s.all {
			if p.readyAt.Load() != 0 && !p.gone && !p.hung {
				ready = append(ready, p)
			}
		}
		s.mu.Unlock()
		if stopping {
			return
		}
		for _, p := range ready {
			if late {
				// The parent itself did not run for a while: the host
				// or VM was paused, or its cgroup frozen, and the
				// workers with it. Their silence meanwhile says
				// nothing: the questions are forgotten and asked anew.
				p.askedAt.Store(0)
				continue
			}
			s.judgeSilence(p, timeout)
		}
		s.askStats(time.Now().Add(timeout / 4))
	}
}

// busySilence is how many worker timeouts a worker that is busy, by its
// CPU time, may leave a probe unanswered before it is found hung all the
// same: its handlers keep the runtime from scheduling the answer, and
// it finishes requests meanwhile, or its own stall report says so.
const busySilence = 3

// monoBase is the origin of monoNow.
var monoBase = time.Now()

// monoNow is the monotonic clock, in nanoseconds since this process
// began: the probe's ages are measured on it, so a step of the wall
// clock (NTP, a suspended VM's catch-up) neither hides a hang nor makes
// one up.
func monoNow() int64 { return int64(time.Since(monoBase)) }

// silence is what the probe knows of a worker's unanswered question:
// its CPU time when the probe first saw it pending. The probe goroutine
// alone touches it.
type silence struct {
	question int64 // the askedAt the rest belongs to
	at       int64 // monoNow when cpu was read
	cpu      time.Duration
	known    bool // cpu could be read (Linux)
	logged   bool // late but running: said once
}

// judgeSilence finds p hung when its oldest unanswered question is older
// than the timeout and it has not run meanwhile: a stopped process, or
// one stuck in the kernel, uses no CPU. One whose handlers keep its CPU
// busy answers late and is given up to busySilence timeouts; its own
// stall report finds it hung if its handlers make no progress. Where
// another process's CPU time cannot be read, silence alone decides.
func (s *Supervisor) judgeSilence(p *workerProc, timeout time.Duration) {
	asked := p.askedAt.Load()
	if asked == 0 {
		return
	}
	now, q := monoNow(), &p.silence
	if q.question != asked {
		// First seen pending: no verdict before the CPU time it used
		// since can be measured.
		*q = silence{question: asked, at: now}
		q.cpu, q.known = processCPU(p.pid)
		return
	}
	silent := time.Duration(now - asked)
	if silent <= timeout {
		return
	}
	if q.known && silent <= busySilence*timeout {
		if cpu, ok := processCPU(p.pid); ok && busy(cpu-q.cpu, time.Duration(now-q.at)) {
			if !q.logged {
				q.logged = true
				s.log.Warn("worker late to answer, but running", "worker", p.index, "pid", p.pid,
					"silent_for", silent.Round(time.Millisecond), "timeout", timeout)
			}
			return
		}
	}
	s.hang(p, hangSilent, silent)
}

// busy reports whether a process that used cpu in wall ran: a tenth of
// a core. An idle Go process uses far less (a timer, the scavenger); a
// stopped one none.
func busy(cpu, wall time.Duration) bool { return cpu > 0 && cpu*10 >= wall }

// judgeProgress finds p hung when its answer says it has made no
// progress, with requests in flight, for the worker timeout: its
// serving path is stuck, whether the probe's answer came or not.
func (s *Supervisor) judgeProgress(p *workerProc, st workerStats) {
	if t := s.cfg.WorkerTimeout; t > 0 && st.Stalled >= t && p.readyAt.Load() != 0 {
		s.hang(p, hangStalled, st.Stalled)
	}
}

// errHung is wrapped by the loss of a worker the parent killed as hung.
var errHung = errors.New("hung")

// The two ways a worker is found hung.
const (
	hangSilent  = "no answer"   // to the probe, and not running
	hangStalled = "no progress" // with requests in flight
)

// hang ends a hung worker: one line that says so, with what it last
// reported, then SIGQUIT, so the Go runtime writes every goroutine's
// stack to the log (the one thing that shows where a deadlock is), then
// SIGKILL after hungGrace. Its exit is then a lost worker's, which the
// owner of the generation respawns with the slot's backoff (not against
// the budget: heal.go). One still not reaped unreapedGrace after the
// kill is stuck in the kernel (a hard NFS mount): it is reported lost
// then, and its slot respawned beside it.
func (s *Supervisor) hang(p *workerProc, why string, d time.Duration) {
	s.mu.Lock()
	if p.hung || p.gone || s.stopping {
		s.mu.Unlock()
		return
	}
	p.hung = true
	s.mu.Unlock()
	last := s.counts.last(p)
	d = d.Round(time.Millisecond)
	s.log.Error("worker hung", "worker", p.index, "pid", p.pid, "why", why, "for", d,
		"timeout", s.cfg.WorkerTimeout, "inflight", last.Inflight, "memory", last.Memory)
	s.counts.hung(p)
	p.killedFor(fmt.Errorf("%w, %s for %v", errHung, why, d))
	// The worker alone: its descendants go with the kill, from the group.
	if err := signalProcess(p.pid, syscall.SIGQUIT); err != nil {
		s.log.Warn("signal failed", "worker", p.index, "pid", p.pid, "signal", syscall.SIGQUIT, "err", err)
	}
	go s.killHung(p)
}

// unreapedGrace is how long a killed hung worker may take to be reaped
// before its slot is respawned without it: a process in uninterruptible
// sleep takes its SIGKILL only when the kernel call returns.
const unreapedGrace = 5 * time.Second

// killHung kills p after hungGrace unless it exited, and reports it lost
// if it is still not reaped unreapedGrace later.
func (s *Supervisor) killHung(p *workerProc) {
	for _, step := range []time.Duration{hungGrace, unreapedGrace} {
		t := time.NewTimer(step)
		select {
		case <-p.exited:
			t.Stop()
			return
		case <-s.done:
			t.Stop()
			return
		case <-t.C:
		}
		if step == hungGrace {
			s.seam.signal(p, syscall.SIGKILL)
			continue
		}
		s.log.Error("worker outlived SIGKILL: stuck in the kernel; its slot is respawned beside it", "worker", p.index, "pid", p.pid, "after", unreapedGrace)
		p.leave()
		s.observe(event{proc: p, err: fmt.Errorf("%w: killed, %w, and not reaped", errExited, p.killReason())})
	}
}

// answerStats answers the parent's stats question: the worker's
// counters and what it is doing now. The answer comes from a goroutine
// the runtime must schedule, and, when the App has a health check, only
// once the check has passed within the health timeout: a worker whose
// App cannot serve does not answer, and the parent's probe finds it hung.
// One check runs at a time; a question asked meanwhile gets no answer of
// its own, and one stuck for good (a stat on a hung mount) keeps the
// worker silent, holding one goroutine.
func (rt *workerRuntime) answerStats(out *lineWriter) {
	if rt.app.Health == nil {
		rt.sendStats(out)
		return
	}
	if !rt.checking.CompareAndSwap(false, true) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), rt.cfg.WorkerTimeout)
		defer cancel()
		err := rt.app.Health(ctx, rt.h)
		// Cleared before the answer goes, so a question that arrives
		// while it is sent starts a check of its own, not none.
		rt.checking.Store(false)
		if err != nil {
			rt.log.Warn("health check failed", "err", err)
			return
		}
		if ctx.Err() == nil {
			rt.sendStats(out)
		}
	}()
}

// sendStats sends the counters and what the worker does now.
func (rt *workerRuntime) sendStats(out *lineWriter) {
	st := rt.srv.stats()
	st.Inflight, st.Memory = rt.srv.inflight.Load(), residentBytes()
	if err := out.send(message{Type: msgStats, Stats: &st}); err != nil {
		rt.log.Warn("report counters", "err", err)
	}
}
