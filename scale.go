package main

// scale.go changes the number of workers while the service serves:
// SIGTTIN adds one, SIGTTOU takes one away (as in gunicorn), and a
// program's Control.Scale sets the count. The count is the lifecycle
// loop's target. Growing adds slots one at a time, each through the
// one-slot barrier a respawn uses (slot.go), so a new worker accepts
// nothing before its commit and the others serve throughout; shrinking
// retires the highest slots with the usual drain, as a recycle retires
// its old worker. A reload builds its generation with the target, so the
// count holds across reloads, and each new worker gets the processor
// share (GOMAXPROCS) of the count it joins. As for every other decision,
// run decides (onScale, nextScale) and a goroutine does what blocks,
// reporting evGrown.
//
// Direct mode (-workers 1) cannot scale: its connections live in this
// process, and a service started in worker mode stays in it (at least 2).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// errScaleDirect is the answer to a scale in direct mode.
var errScaleDirect = errors.New("scale: direct mode (-workers 1) serves in this process and has no workers to add or remove; restart with -workers 2 or more")

// Scale sets the number of workers to n and blocks until the serving
// generation has n, or adding one failed: the error then says which,
// and the count stays at what serves. n is within -workers' bounds and
// at least 2. A scale asked for while another runs, or a reload, sets a
// new target; every caller is answered once the count serves. ctx bounds
// only the wait.
func (v *Service) Scale(ctx context.Context, n int) error {
	r := make(chan error, 1)
	if !v.send(evScale{n: n, reply: r}) {
		return errNotServing
	}
	select {
	case err := <-r:
		return err
	case <-ctx.Done():
		return fmt.Errorf("scale: %w", context.Cause(ctx))
	}
}

// requestScale asks for one worker more (delta 1) or less (-1), as
// SIGTTIN and SIGTTOU do, without waiting.
func (v *Service) requestScale(delta int) { v.send(evScale{delta: delta}) }

// onScale sets the target count, if it is a count this service can run,
// and begins to reach it.
func (v *Service) onScale(l *life, ev evScale) {
	n := ev.n
	if ev.delta != 0 {
		n = l.target + ev.delta
	}
	var err error
	switch {
	case v.workers == 1:
		err = errScaleDirect
	case l.ending || l.leaving || l.serving == nil:
		err = fmt.Errorf("scale: %w", errNotServing)
	case n < 2 || n > maxWorkers:
		err = fmt.Errorf("scale to %d: the worker count must be from 2 to %d (1 is direct mode, which a running service cannot become)", n, maxWorkers)
	}
	if err != nil {
		if ev.reply == nil {
			v.log.Warn("scale ignored", "generation", l.number(l.serving), "workers", l.target, "err", err)
		}
		reply(ev.reply, err)
		return
	}
	if n != l.target {
		v.log.Info("scaling", "generation", l.serving.number(), "workers", n, "from", l.target)
	}
	l.target = n
	l.scales = append(l.scales, ev.reply)
	v.nextScale(l)
}

// nextScale takes the serving generation one step towards the target:
// a slot added, or the highest ones removed. It waits while a reload
// starts (its generation has the target already), while a slot is
// added, and while the highest slot's worker is being replaced; direct
// mode has no slots to change. Once
// the count is the target, every scale waiting is answered.
func (v *Service) nextScale(l *life) {
	h := l.slots
	if v.workers == 1 || h == nil || l.starting != nil || l.ending || h.growing {
		return
	}
	for h.count > l.target && v.shrink(l) {
	}
	if h.count < l.target {
		v.grow(l)
		return
	}
	if h.count == l.target && len(l.scales) > 0 {
		v.answerScales(l, nil)
		v.notify(fmt.Sprintf("STATUS=generation %d serving with %d workers", h.gen.number(), h.count))
	}
}

// answerScales answers every scale waiting with err, and forgets them:
// the count serves (nil), adding a worker failed, or the stop, or its
// shutdown delay, began.
func (v *Service) answerScales(l *life, err error) {
	for _, r := range l.scales {
		reply(r, err)
	}
	l.scales = nil
}

// grow adds the slot past the last one and starts its worker in a
// goroutine, which reports evGrown.
func (v *Service) grow(l *life) {
	h := l.slots
	slot, count := h.count, l.target
	h.count++
	h.growing = true
	s := h.slot(slot)
	s.busy = true
	v.log.Info("worker adding", "generation", h.gen.number(), "worker", slot, "workers", count)
	gen, ctx := h.gen, h.ctx
	go func() {
		r, err := gen.grow(ctx, slot, count)
		v.send(evGrown{gen: gen, slot: slot, r: r, err: err})
	}()
}

// onGrown records how adding a slot ended. One that failed is removed
// again and the target falls back to the count that serves: no serving
// worker was lost, so the budget is not spent, and every scale waiting
// gets the error.
func (v *Service) onGrown(l *life, ev evGrown) {
	h := l.slots
	if h == nil || ev.gen != h.gen {
		return // a reload replaced the generation, the new slot with it
	}
	h.growing = false
	s := h.slot(ev.slot)
	s.busy = false
	lost := s.lostPIDs
	s.lostPIDs = nil
	switch {
	case ev.err != nil && l.ending:
	case ev.err != nil:
		delete(h.byIndex, ev.slot)
		h.count--
		l.target = min(l.target, h.count) // a later scale may have asked for fewer
		err := fmt.Errorf("scale: worker %d: %w", ev.slot, ev.err)
		v.log.Error("worker add failed", "generation", ev.gen.number(), "worker", ev.slot, "workers", h.count, "err", ev.err)
		v.answerScales(l, err)
	default:
		s.pid, s.since = ev.r.NewPID, time.Now()
		v.log.Info("worker added", "generation", ev.gen.number(), "worker", ev.slot, "pid", ev.r.NewPID, "workers", h.count)
		if slices.Contains(lost, ev.r.NewPID) {
			s.lostAt = time.Now()
			v.lostNow(l, ev.slot, s) // lost before run saw it ready
		}
	}
	v.nextScale(l)
	v.nextRecycle(l)
}

// shrink removes the highest slot and retires its worker with the usual
// drain, and reports whether it did: not while the slot's worker is
// being replaced, whose end calls nextScale again. A slot whose lost
// worker waits for its respawn's backoff goes at once, its timer with
// it (a host out of room is when one wants fewer workers), as do a
// recycle's retry timer and its queued recycle.
func (v *Service) shrink(l *life) bool {
	h := l.slots
	slot := h.count - 1
	s := h.slot(slot)
	if s.busy && s.respawn == nil {
		return false
	}
	replaceTimer(&s.respawn, nil)
	replaceTimer(&s.retry, nil)
	h.queued = slices.DeleteFunc(h.queued, func(a recycleAsk) bool { return a.slot == slot })
	delete(h.byIndex, slot)
	h.count--
	if err := h.gen.shrink(slot, h.count); err != nil {
		v.log.Error("worker remove failed", "generation", h.gen.number(), "worker", slot, "err", err)
		return true
	}
	v.log.Info("worker removed", "generation", h.gen.number(), "worker", slot, "pid", s.pid, "workers", h.count)
	return true
}

// grow starts a worker in slot, the one past the generation's last,
// through a barrier of its own, and blocks until it serves or has failed
// and is gone; count is the number of workers it joins, for its
// processor share and its Worker.Count.
func (s *Supervisor) grow(ctx context.Context, slot, count int) (replacement, error) {
	s.count.Store(int64(count))
	p, err := s.admit(ctx, slot)
	if err != nil {
		s.count.Store(int64(slot)) // the slots that serve without it
		return replacement{}, err
	}
	return replacement{NewPID: p.pid}, nil
}

// shrink removes slot, the generation's last, and retires its worker
// with the usual drain; count is the number left. It does not block.
func (s *Supervisor) shrink(slot, count int) error {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return errGenerationStopping
	}
	if slot != len(s.procs)-1 {
		n := len(s.procs)
		s.mu.Unlock()
		return fmt.Errorf("worker %d is not the last of %d", slot, n)
	}
	p := s.procs[slot]
	p.gone = true
	s.procs = s.procs[:slot]
	s.mu.Unlock()
	s.count.Store(int64(count))
	s.retire(p, s.cfg.DrainTimeout)
	return nil
}
