package main

// heal.go is the lifecycle loop's part that keeps the serving generation
// whole: it replaces a lost worker in its slot (a respawn), backs off a
// slot that keeps failing, gives up when the service loses too many
// workers too fast, and replaces, one at a time, workers that ask to be
// recycled. Like the rest of the loop it only decides: the replacement
// itself is the generation's (Supervisor.replace, slot.go), run in a
// goroutine that reports evReplaced.
//
// The design record's fixed generation, which never respawns, is the
// policy with MaxRestarts 0: the first loss ends the service.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// healPolicy is how the lifecycle loop answers a serving worker's loss.
type healPolicy struct {
	// MaxRestarts is how many workers the service may lose within Window
	// (failed replacements included) and still replace them; one more
	// ends it with exit status 1. 0 is the fixed generation.
	MaxRestarts int
	Window      time.Duration
	// A slot's replacement waits Backoff after its first consecutive
	// failure, twice that after the second, and so on up to BackoffCap,
	// each with jitter (backoff). A failure is a replacement that fails
	// before ready, or a worker lost within Steady of its ready; a worker
	// lost after serving that long is replaced at once.
	Backoff    time.Duration
	BackoffCap time.Duration
	Steady     time.Duration
}

// defaultHeal is the policy servery runs with; README, "When a worker
// dies", gives the reasons for each figure.
var defaultHeal = healPolicy{MaxRestarts: 5, Window: time.Minute,
	Backoff: 100 * time.Millisecond, BackoffCap: 30 * time.Second, Steady: 10 * time.Second}

// The events of healing, which run handles like the others.
type (
	evRespawn struct { // a slot's backoff ended: respawn its worker now
		gen  generation
		slot int
	}
	evRecycle struct { // the worker in slot asks to be recycled
		gen  generation
		slot int
		why  string
	}
	evReplaced struct { // a replace returned
		gen     generation
		slot    int
		recycle bool
		r       replacement
		err     error
	}
)

// healing is what run knows of the serving generation's slots.
type healing struct {
	gen       generation
	began     time.Time       // when gen began to serve: its first workers' ready
	ctx       context.Context // ends when gen stops serving: its replacements roll back
	cancel    context.CancelFunc
	slots     map[int]*slotState
	recycling bool  // a recycle runs: one at a time, so at most N+1 workers live
	queued    []int // slots whose workers asked to be recycled meanwhile, in order
}

// slotState is one slot of the serving generation.
type slotState struct {
	failures int         // consecutive, for the backoff
	since    time.Time   // when its worker became ready (for the first, when the generation began to serve)
	busy     bool        // a replacement runs for it
	lostPID  int         // a worker of the slot lost while busy: the old one of a recycle, or the replacement itself
	lostAt   time.Time   // when its worker was lost, for the respawned line
	timer    *time.Timer // a respawn or a recycle waits for its backoff
}

func newHealing(gen generation) *healing {
	h := &healing{gen: gen, began: time.Now(), slots: map[int]*slotState{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// slot returns the state of slot i.
func (h *healing) slot(i int) *slotState {
	s := h.slots[i]
	if s == nil {
		s = &slotState{since: h.began}
		h.slots[i] = s
	}
	return s
}

// end cancels every pending respawn and recycle, and rolls back those
// running: the generation stops serving.
func (h *healing) end() {
	h.cancel()
	for _, s := range h.slots {
		if s.timer != nil {
			s.timer.Stop()
		}
	}
	h.queued = nil
}

// heals reports whether ev is a loss run answers with a respawn: one of a
// worker (not direct mode's server) of the serving generation, under a
// policy that respawns.
func (v *Service) heals(l *life, ev evLost) bool {
	var we *workerError
	return v.heal.MaxRestarts > 0 && l.heal != nil && ev.gen == l.heal.gen && errors.As(ev.err, &we)
}

// onWorkerLost answers the loss of a serving worker: once the end has
// begun, nothing; past the budget, the end; otherwise a respawn of its
// slot, at once or after the slot's backoff. A slot whose replacement
// runs already (a recycle) is left to it.
func (v *Service) onWorkerLost(l *life, ev evLost) {
	var we *workerError
	errors.As(ev.err, &we)
	if l.ending {
		v.log.Info("worker lost as the service ends", "generation", ev.gen.number(), "worker", we.Index)
		return
	}
	now := time.Now()
	if v.overBudget(l, now, ev.err) {
		return
	}
	s := l.heal.slot(we.Index)
	if s.busy {
		// The replacement's end decides: the old worker of a recycle
		// needs none, a replacement lost as it became ready does.
		s.lostPID = we.PID
		return
	}
	s.lostAt = now
	v.lostNow(l, we.Index, s)
}

// lostNow respawns the worker of slot s just lost: a failure if it had
// not served steadily.
func (v *Service) lostNow(l *life, slot int, s *slotState) {
	if time.Since(s.since) < v.heal.Steady {
		s.failures++
	} else {
		s.failures = 0
	}
	v.respawnAfter(l, slot, s)
}

// overBudget counts a loss or failed replacement at now against the
// service's budget and, if it is spent, ends the service with one line
// that says so, and reports true.
func (v *Service) overBudget(l *life, now time.Time, err error) bool {
	window := now.Add(-v.heal.Window)
	l.losses = slices.DeleteFunc(l.losses, func(t time.Time) bool { return t.Before(window) })
	l.losses = append(l.losses, now)
	if len(l.losses) <= v.heal.MaxRestarts {
		return false
	}
	giveUp := fmt.Errorf("%w: %d workers lost within %v (-max-restarts %d); last: %w",
		errGaveUp, len(l.losses), v.heal.Window, v.heal.MaxRestarts, err)
	v.log.Error("giving up", "generation", l.heal.gen.number(), "lost", len(l.losses),
		"within", v.heal.Window, "max_restarts", v.heal.MaxRestarts, "last", err)
	v.end(l, giveUp)
	return true
}

// errGaveUp begins the error of a service that lost more workers than its
// budget allows.
var errGaveUp = errors.New("giving up")

// respawnAfter respawns slot's worker after the slot's backoff: at once
// after a steady worker's loss.
func (v *Service) respawnAfter(l *life, slot int, s *slotState) {
	delay := v.backoff(s.failures)
	v.log.Info("worker respawning", "generation", l.heal.gen.number(), "worker", slot, "delay", delay, "failures", s.failures)
	if delay == 0 {
		v.respawn(l, slot)
		return
	}
	gen := l.heal.gen
	s.timer = time.AfterFunc(delay, func() { v.send(evRespawn{gen, slot}) })
}

// backoff is the delay before a slot's next replacement after failures
// consecutive failures: none after none, then Backoff doubling up to
// BackoffCap, each drawn uniformly from 0.8 to 1.2 times that, so slots
// that failed together do not retry together.
func (v *Service) backoff(failures int) time.Duration {
	if failures == 0 {
		return 0
	}
	d := v.heal.BackoffCap
	if failures <= 30 {
		d = min(d, v.heal.Backoff<<(failures-1))
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// respawn runs the replacement of slot's lost worker, unless the
// generation no longer serves.
func (v *Service) respawn(l *life, slot int) {
	h := l.heal
	s := h.slot(slot)
	s.timer = nil
	if l.ending || h.ctx.Err() != nil {
		return
	}
	s.busy = true
	v.replaceIn(h, slot, false)
}

// replaceIn runs gen.replace for slot in a goroutine, which reports
// evReplaced.
func (v *Service) replaceIn(h *healing, slot int, recycle bool) {
	gen, ctx := h.gen, h.ctx
	go func() {
		r, err := gen.replace(ctx, slot, recycle)
		v.send(evReplaced{gen: gen, slot: slot, recycle: recycle, r: r, err: err})
	}()
}

// onRespawn respawns a slot whose backoff ended, if its generation still
// serves.
func (v *Service) onRespawn(l *life, ev evRespawn) {
	if l.heal != nil && ev.gen == l.heal.gen {
		v.respawn(l, ev.slot)
	}
}

// onRecycle queues a worker's request to be recycled and begins the next
// recycle, if none runs.
func (v *Service) onRecycle(l *life, ev evRecycle) {
	h := l.heal
	if h == nil || ev.gen != h.gen || l.ending {
		return
	}
	h.slot(ev.slot).timer = nil
	if !slices.Contains(h.queued, ev.slot) {
		h.queued = append(h.queued, ev.slot)
	}
	v.log.Info("worker recycle queued", "generation", ev.gen.number(), "worker", ev.slot, "reason", ev.why)
	v.nextRecycle(l)
}

// nextRecycle begins the next queued recycle, unless one runs, a reload
// runs (which replaces every worker anyway) or the end began. A slot
// whose worker is being respawned needs no recycle.
func (v *Service) nextRecycle(l *life) {
	h := l.heal
	if h == nil || h.recycling || l.starting != nil || l.ending {
		return
	}
	for len(h.queued) > 0 {
		slot := h.queued[0]
		h.queued = h.queued[1:]
		s := h.slot(slot)
		if s.busy || s.timer != nil {
			continue // its worker was lost: a respawn replaces it
		}
		s.busy, h.recycling = true, true
		v.log.Info("worker recycling", "generation", h.gen.number(), "worker", slot)
		v.replaceIn(h, slot, true)
		return
	}
}

// onReplaced records how a replacement ended. One that failed counts
// against the budget and backs its slot off: a respawn is tried again
// after the backoff, and so is a recycle, whose old worker serves on.
func (v *Service) onReplaced(l *life, ev evReplaced) {
	h := l.heal
	if h == nil || ev.gen != h.gen {
		return // its generation no longer serves; its stop ended the replacement
	}
	s := h.slot(ev.slot)
	s.busy = false
	if ev.recycle {
		h.recycling = false
	}
	switch {
	case ev.err != nil && l.ending:
	case ev.err != nil:
		v.replaceFailed(l, ev, s)
	case ev.recycle:
		s.since = time.Now()
		v.log.Info("worker recycled", "generation", ev.gen.number(), "worker", ev.slot,
			"old_pid", ev.r.OldPID, "new_pid", ev.r.NewPID)
	default:
		s.since = time.Now()
		v.log.Info("worker respawned", "generation", ev.gen.number(), "worker", ev.slot,
			"old_pid", ev.r.OldPID, "new_pid", ev.r.NewPID, "after", s.since.Sub(s.lostAt).Round(100*time.Microsecond))
	}
	lost := s.lostPID
	s.lostPID = 0
	if ev.err == nil && lost == ev.r.NewPID && !l.ending {
		s.lostAt = time.Now()
		v.lostNow(l, ev.slot, s) // the replacement was lost before run saw it ready
	}
	v.nextRecycle(l)
}

// replaceFailed answers a replacement that failed before it was ready.
func (v *Service) replaceFailed(l *life, ev evReplaced, s *slotState) {
	what := "respawn"
	if ev.recycle {
		what = "recycle"
	}
	v.log.Error("worker "+what+" failed", "generation", ev.gen.number(), "worker", ev.slot, "err", ev.err)
	if v.overBudget(l, time.Now(), ev.err) {
		return
	}
	s.failures++
	if !ev.recycle || s.lostPID != 0 {
		v.respawnAfter(l, ev.slot, s) // the old worker of the recycle was lost meanwhile
		return
	}
	delay := v.backoff(s.failures)
	v.log.Info("worker recycle retried later", "generation", ev.gen.number(), "worker", ev.slot, "delay", delay)
	gen, slot := ev.gen, ev.slot
	s.timer = time.AfterFunc(delay, func() { v.send(evRecycle{gen, slot, "the last recycle failed"}) })
}
