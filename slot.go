package main

// slot.go replaces one worker of a serving generation in its slot: a
// lost one (a respawn), or one that asked to be recycled. The replacement
// goes through the startup barrier alone, with the generation's
// configuration and the same index, and accepts nothing before its
// commit; the generation's other workers serve throughout. What to
// replace, and when, is the lifecycle loop's decision (heal.go).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"time"
)

// replacement is what a successful replace did: the slot's old worker
// and its new one, and, for a recycle, a channel closed once the old one
// has gone (or the generation's stop took it over).
type replacement struct {
	OldPID, NewPID int
	retired        <-chan struct{}
}

// errGenerationStopping is replace's error when the generation's stop
// began first: the stop ends whatever replace had started.
var errGenerationStopping = errors.New("the generation is stopping")

// replace starts a new worker in slot and, once it is ready, makes it the
// slot's worker. For a lost worker (recycle false) it first waits until
// the lost one has been reaped, so a slot has two live workers only
// during a recycle; for a recycle it starts the replacement beside the
// serving worker and, once the replacement is ready, retires the old one
// with the usual drain. It blocks until the replacement is ready, or has
// failed and is gone, or ctx or the generation's stop ended it; a
// recycle's old worker drains after it returns, so the slot's new worker
// is the slot's from then on, and its loss is respawned at once.
func (s *Supervisor) replace(ctx context.Context, slot int, recycle bool) (replacement, error) {
	s.mu.Lock()
	old := s.procs[slot]
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.joins, cancel)()
	if !recycle {
		select {
		case <-old.exited:
		case <-old.leftBehind: // stuck in the kernel for good, perhaps
		case <-ctx.Done():
			return replacement{}, fmt.Errorf("respawn worker %d: %w", slot, context.Cause(ctx))
		}
	}
	p, err := s.admit(ctx, slot)
	if err != nil {
		return replacement{}, err
	}
	r := replacement{OldPID: old.pid, NewPID: p.pid}
	if recycle {
		s.retire(old, s.cfg.DrainTimeout)
		r.retired = s.gone(old)
	}
	return r, nil
}

// admit starts a worker for slot, runs it through a barrier of its own
// and makes it the slot's worker: a replacement (replace) or a slot that
// is new (grow, scale.go). It blocks until the worker serves, or has
// failed and is gone, or ctx or the generation's stop ended it.
func (s *Supervisor) admit(ctx context.Context, slot int) (*workerProc, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.joins, cancel)()
	p, keys, seq, err := s.spawnInto(slot)
	if err != nil {
		return nil, err
	}
	defer s.replacing.Done()
	committed, err := s.barrier(ctx, []*workerProc{p}, p.events, keys)
	if err == nil {
		err = s.install(p, seq)
	}
	if err != nil {
		s.abandon(p, committed)
		return nil, err
	}
	go s.follow(p.events, []*workerProc{p})
	return p, nil
}

// gone returns a channel closed once p has exited, or the generation's
// stop has taken it over.
func (s *Supervisor) gone(p *workerProc) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		defer close(c)
		select {
		case <-p.exited:
		case <-p.leftBehind:
		case <-s.joins.Done():
		}
	}()
	return c
}

// spawnInto starts a worker for slot, unless the generation's stop has
// begun, and returns it with the ticket keys its config carries, the last
// sent, and their seq. The caller owes s.replacing a Done.
func (s *Supervisor) spawnInto(slot int) (*workerProc, [][]byte, uint64, error) {
	// The keys first, and never under spawnMu: a key send holds keyMu
	// across its pipe writes, up to a second for a worker that does not
	// read, and the stop takes spawnMu before it tells any worker to
	// drain. Keys rotated since are sent by install.
	s.keyMu.Lock()
	keys, seq := s.keys, s.keySeq
	s.keyMu.Unlock()
	s.spawnMu.Lock()
	defer s.spawnMu.Unlock()
	s.mu.Lock()
	stopping := s.stopping
	s.mu.Unlock()
	if stopping {
		return nil, nil, 0, errGenerationStopping
	}
	lnFile, err := listenerFile(s.ln)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("worker %d: listener: %w", slot, refused(err))
	}
	defer lnFile.Close() // the worker has its own copy
	p, err := s.spawn(slot, lnFile, make(chan event))
	if err != nil {
		return nil, nil, 0, err
	}
	s.mu.Lock()
	s.all = append(s.all, p)
	s.mu.Unlock()
	s.replacing.Add(1)
	return p, keys, seq, nil
}

// install makes the ready worker p its slot's worker, the one before it
// gone, unless the stop began meanwhile. Ticket keys rotated since p's
// config was written with those of seq are sent to it first: under keyMu,
// so no rotation falls between.
func (s *Supervisor) install(p *workerProc, seq uint64) error {
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	if s.keySeq != seq {
		s.sendKeys(p, s.keys, time.Now().Add(time.Second))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return errGenerationStopping
	}
	if p.index == len(s.procs) { // a new slot (grow)
		s.procs = append(s.procs, p)
		return nil
	}
	s.procs[p.index].gone = true
	s.procs[p.index] = p
	return nil
}

// abandon ends a replacement that failed: it is gone at once, and unless
// the generation's stop has it already, it is stopped as a retired worker
// is (with no drain if it was never committed), and abandon waits until
// it has been reaped, so the slot's next replacement never runs beside it.
func (s *Supervisor) abandon(p *workerProc, committed bool) {
	s.mu.Lock()
	p.gone = true
	stopping := s.stopping
	s.mu.Unlock()
	go s.follow(p.events, []*workerProc{p}) // its exit, unless the barrier took it
	if stopping {
		return
	}
	drain := time.Duration(0)
	if committed {
		drain = s.cfg.DrainTimeout
	}
	s.retire(p, drain)
	select {
	case <-p.exited:
	case <-p.leftBehind:
	case <-s.joins.Done():
	}
}

// retire makes one worker leave while its generation serves on: it closes
// the worker's protocol input (fd 4), its drain signal, and in a goroutine
// of its own terminates it at drain and kills it at the force deadline,
// both from now, unless it exits first or the generation's stop takes
// over. One still not reaped unreapedGrace after the kill is left behind
// (leave): stuck in the kernel, it holds up no replacement.
func (s *Supervisor) retire(p *workerProc, drain time.Duration) {
	p.stdin.Close()
	force := s.cfg.ForceTimeout - s.cfg.DrainTimeout + drain
	go func() {
		began := time.Now()
		for _, st := range []struct {
			at     time.Duration
			sig    os.Signal
			action string // as the stop's escalate names it
		}{{drain, syscall.SIGTERM, "terminate"}, {force, syscall.SIGKILL, "kill"}, {force + unreapedGrace, nil, "leave"}} {
			timer := time.NewTimer(time.Until(began.Add(st.at)))
			select {
			case <-p.exited:
			case <-s.done:
			case <-timer.C:
				if st.sig == nil {
					s.log.Error("worker outlived SIGKILL: stuck in the kernel; its slot is respawned beside it", "worker", p.index, "pid", p.pid, "after", unreapedGrace)
					p.leave()
					return
				}
				if st.at > 0 {
					s.log.Warn("worker outlived deadline", "worker", p.index, "pid", p.pid, "action", st.action)
				}
				s.seam.signal(p, st.sig)
				continue
			}
			timer.Stop()
			return
		}
	}()
}

// recycleLimits draws one worker's recycling limits from the
// generation's: each at least the limit and at most a tenth above it,
// uniformly, so workers started together do not all reach their limits at
// once. 0 stays 0: never.
func recycleLimits(requests int64, age time.Duration) (int64, time.Duration) {
	if requests > 0 {
		requests += rand.Int64N(requests/10 + 1)
	}
	if age > 0 {
		age += rand.N(age/10 + 1)
	}
	return requests, age
}
