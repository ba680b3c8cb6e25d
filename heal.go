package main

// heal.go is the lifecycle loop's part that keeps the serving generation
// whole: it replaces a lost worker in its slot (a respawn), backs off a
// slot that keeps failing, gives up when the service loses too many
// workers too fast, and replaces, one at a time, workers that ask to be
// recycled. Like the rest of the loop it only decides: the replacement
// itself is the generation's (Supervisor.replace, slot.go), run in a
// goroutine that reports evReplaced.
//
// The design record's fixed generation (DESIGN, "Design record to code"),
// which never respawns, is the policy with MaxRestarts 0: the first loss
// ends the service.

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

// defaultPolicy is the policy servery runs with; DESIGN, "When a worker
// dies: the policy's reasons", gives the reasons for each figure.
var defaultPolicy = healPolicy{MaxRestarts: 5, Window: time.Minute,
	Backoff: 100 * time.Millisecond, BackoffCap: 30 * time.Second, Steady: 10 * time.Second}

// servingSlots is what run knows of the serving generation's slots.
type servingSlots struct {
	gen       generation
	began     time.Time       // when gen began to serve: its first workers' ready
	ctx       context.Context // ends when gen stops serving: its replacements roll back
	cancel    context.CancelFunc
	byIndex   map[int]*slotState // by slot index
	count     int                // its slots, 0 to count-1; scale.go changes it
	growing   bool               // a slot is being added (scale.go)
	recycling bool               // a recycle runs, or its old worker drains: one at a time, so at most N+1 workers live
	queued    []recycleAsk       // workers that asked to be recycled meanwhile, in order
}

// recycleAsk is a worker's request to be recycled, and the limit it
// reached.
type recycleAsk struct {
	slot, pid int
	limit     string
}

// slotState is one slot of the serving generation.
type slotState struct {
	pid      int       // its worker; a loss of any other is of a worker that left the slot
	failures int       // consecutive losses and failed respawns, for the respawn's backoff
	since    time.Time // when its worker became ready (for the first, when the generation began to serve)
	// busy: a replacement runs for the slot, or waits for its backoff.
	// Its end decides what a loss meanwhile means: lostPIDs.
	busy     bool
	lostPIDs []int
	lostAt   time.Time   // when its worker was lost, for the respawned line
	recycled time.Time   // when its recycle began, for the recycled line
	limit    string      // the limit that the worker its recycle replaces reached
	respawn  *time.Timer // a respawn waits for its backoff
	// A failed recycle leaves its worker serving and is tried again
	// after a backoff of its own: recycleFailures in a row so far, and
	// retry, the timer that tries again.
	recycleFailures int
	retry           *time.Timer
	// early counts, in a row, workers that reached -max-worker-memory
	// within Steady of their start: their recycles wait the backoff.
	early int
}

func newServingSlots(gen generation) *servingSlots {
	h := &servingSlots{gen: gen, began: time.Now(), byIndex: map[int]*slotState{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	for i, pid := range gen.pids() {
		h.byIndex[i] = &slotState{pid: pid, since: h.began}
		h.count++
	}
	return h
}

// slot returns the state of slot i.
func (h *servingSlots) slot(i int) *slotState {
	s := h.byIndex[i]
	if s == nil {
		s = &slotState{since: h.began}
		h.byIndex[i] = s
	}
	return s
}

// end cancels every pending respawn and recycle, and rolls back those
// running: the generation stops serving.
func (h *servingSlots) end() {
	h.cancel()
	for _, s := range h.byIndex {
		replaceTimer(&s.respawn, nil)
		replaceTimer(&s.retry, nil)
	}
	h.queued = nil
}

// replaceTimer stops the timer in *at, if any, and puts t there.
func replaceTimer(at **time.Timer, t *time.Timer) {
	if *at != nil {
		(*at).Stop()
	}
	*at = t
}

// heals reports whether ev is a loss run answers with a respawn: one of a
// worker (not direct mode's server) of the serving generation, under a
// policy that respawns.
func (v *Service) heals(l *life, ev evLost) bool {
	var we *workerError
	return v.policy.MaxRestarts > 0 && l.slots != nil && ev.gen == l.slots.gen && errors.As(ev.err, &we)
}

// onWorkerLost answers the loss of a serving worker: once the end has
// begun, nothing; past the budget, the end; otherwise a respawn of its
// slot, at once or after the slot's backoff. A loss in a busy slot is
// left to the end of its replacement (onReplaced), and the loss of a
// worker that has left its slot (a recycled one whose report came late,
// or one whose slot a scale removed) needs nothing.
func (v *Service) onWorkerLost(l *life, ev evLost) {
	var we *workerError
	errors.As(ev.err, &we)
	removed := we.Index >= l.slots.count
	var s *slotState
	if !removed {
		s = l.slots.slot(we.Index) // a removed slot gets no state back
	}
	switch {
	case l.ending:
		v.log.Info("worker lost as the service ends", "generation", ev.gen.number(), "worker", we.Index)
	case removed || !s.busy && we.PID != s.pid:
		v.log.Info("worker lost after it left its slot", "generation", ev.gen.number(), "worker", we.Index, "pid", we.PID)
	case !errors.Is(ev.err, errHung) && v.overBudget(l, time.Now(), ev.err):
	case s.busy:
		s.lostPIDs = append(s.lostPIDs, we.PID)
	default:
		s.lostAt = time.Now()
		v.lostNow(l, we.Index, s)
	}
}

// lostNow respawns the worker of slot s just lost: a failure if it had
// not served steadily.
func (v *Service) lostNow(l *life, slot int, s *slotState) {
	if time.Since(s.since) < v.policy.Steady {
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
	window := now.Add(-v.policy.Window)
	l.losses = slices.DeleteFunc(l.losses, func(t time.Time) bool { return t.Before(window) })
	l.losses = append(l.losses, now)
	if len(l.losses) <= v.policy.MaxRestarts {
		return false
	}
	giveUp := fmt.Errorf("%w: %d workers lost within %v (-max-restarts %d); last: %w",
		errGaveUp, len(l.losses), v.policy.Window, v.policy.MaxRestarts, err)
	v.log.Error("giving up", "generation", l.slots.gen.number(), "lost", len(l.losses),
		"within", v.policy.Window, "max_restarts", v.policy.MaxRestarts, "last", err)
	v.end(l, giveUp)
	return true
}

// errGaveUp begins the error of a service that lost more workers than its
// budget allows.
var errGaveUp = errors.New("giving up")

// respawnAfter respawns slot's worker after the slot's backoff: at once
// after a steady worker's loss. The slot is busy from now on, and a
// recycle that waited to be tried again is moot.
func (v *Service) respawnAfter(l *life, slot int, s *slotState) {
	s.busy = true
	replaceTimer(&s.retry, nil)
	s.recycleFailures = 0
	delay := v.backoff(s.failures)
	v.log.Info("worker respawning", "generation", l.slots.gen.number(), "worker", slot, "delay", delay, "failures", s.failures)
	if delay == 0 {
		replaceTimer(&s.respawn, nil)
		v.respawn(l, slot)
		return
	}
	gen := l.slots.gen
	replaceTimer(&s.respawn, time.AfterFunc(delay, func() { v.send(evRespawn{gen, slot}) }))
}

// backoff is the delay before a slot's next replacement after failures
// consecutive failures: none after none, then Backoff doubling up to
// BackoffCap, each drawn uniformly from 0.8 to 1.2 times that, so slots
// that failed together do not retry together.
func (v *Service) backoff(failures int) time.Duration {
	if failures == 0 {
		return 0
	}
	d := v.policy.BackoffCap
	if failures <= 30 {
		d = min(d, v.policy.Backoff<<(failures-1))
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// respawn runs the replacement of slot's lost worker, unless the
// generation no longer serves.
func (v *Service) respawn(l *life, slot int) {
	h := l.slots
	if l.ending || h.ctx.Err() != nil {
		return
	}
	v.replaceIn(h, slot, false)
}

// replaceIn runs gen.replace for slot in a goroutine, which reports
// evReplaced.
func (v *Service) replaceIn(h *servingSlots, slot int, recycle bool) {
	gen, ctx := h.gen, h.ctx
	go func() {
		r, err := gen.replace(ctx, slot, recycle)
		v.send(evReplaced{gen: gen, slot: slot, recycle: recycle, r: r, err: err})
	}()
}

// onRespawn respawns a slot whose backoff ended, if its generation still
// serves.
func (v *Service) onRespawn(l *life, ev evRespawn) {
	if l.slots == nil || ev.gen != l.slots.gen || ev.slot >= l.slots.count {
		return
	}
	if s := l.slots.slot(ev.slot); s.respawn != nil { // else cancelled as it fired
		s.respawn = nil
		v.respawn(l, ev.slot)
	}
}

// onRecycle queues a worker's request to be recycled and begins the next
// recycle, if none runs.
func (v *Service) onRecycle(l *life, ev evRecycle) {
	h := l.slots
	if h == nil || ev.gen != h.gen || l.ending || ev.slot >= h.count {
		return
	}
	s := h.slot(ev.slot)
	if ev.retry {
		if s.busy || ev.pid != s.pid {
			return // a respawn took the slot over
		}
		s.retry = nil
	}
	if !ev.retry && !s.busy && ev.pid != s.pid {
		return // its worker left the slot (a scale removed it, and added it again)
	}
	if !ev.retry && v.recycledEarly(l, ev, s) {
		return
	}
	ask := recycleAsk{ev.slot, ev.pid, ev.limit}
	if !slices.Contains(h.queued, ask) {
		h.queued = append(h.queued, ask)
	}
	v.log.Info("worker recycle queued", "generation", ev.gen.number(), "worker", ev.slot, "pid", ev.pid, "reason", ev.why)
	v.nextRecycle(l)
}

// recycledEarly delays the recycle of a worker that reached its memory
// bound within Steady of its start, by the slot's backoff, and reports
// whether it did: a bound below what a fresh worker needs would
// otherwise recycle it again and again, each new worker as soon as it
// started. The first says so once, at WARN.
func (v *Service) recycledEarly(l *life, ev evRecycle, s *slotState) bool {
	if ev.limit != "memory" || time.Since(s.since) >= v.policy.Steady {
		s.early = 0
		return false
	}
	s.early++
	if s.early == 1 {
		v.log.Warn("worker over -max-worker-memory as it started: the bound is below what a worker needs; its recycles back off",
			"generation", ev.gen.number(), "worker", ev.slot, "pid", ev.pid, "reason", ev.why)
	}
	gen, slot, pid, why := ev.gen, ev.slot, ev.pid, ev.why
	replaceTimer(&s.retry, time.AfterFunc(v.backoff(s.early), func() {
		v.send(evRecycle{gen: gen, slot: slot, pid: pid, limit: "memory", why: why, retry: true})
	}))
	return true
}

// nextRecycle begins the next queued recycle, unless one runs, a reload
// runs (which replaces every worker anyway) or the end began. A request
// waits while its slot is busy (it may come from the replacement about to
// be installed there) and is dropped once its worker has left the slot.
func (v *Service) nextRecycle(l *life) {
	h := l.slots
	if h == nil || h.recycling || l.starting != nil || l.ending {
		return
	}
	for i := 0; i < len(h.queued); i++ {
		ask := h.queued[i]
		s := h.slot(ask.slot)
		switch {
		case s.busy:
			continue
		case ask.pid != s.pid || s.retry != nil:
			// left the slot, or its recycle failed and waits to retry
		default:
			s.busy, h.recycling, s.recycled, s.limit = true, true, time.Now(), ask.limit
			v.log.Info("worker recycling", "generation", h.gen.number(), "worker", ask.slot, "pid", ask.pid)
			v.replaceIn(h, ask.slot, true)
		}
		h.queued = slices.Delete(h.queued, i, i+1)
		if h.recycling {
			return
		}
		i--
	}
}

// onReplaced records how a replacement ended. One that failed counts
// against the budget and backs its slot off: a respawn is tried again
// after the backoff, and so is a recycle, whose old worker serves on. A
// replacement that was lost before run saw it ready is respawned now.
func (v *Service) onReplaced(l *life, ev evReplaced) {
	h := l.slots
	if h == nil || ev.gen != h.gen {
		return // its generation no longer serves; its stop ended the replacement
	}
	s := h.slot(ev.slot)
	s.busy = false
	if ev.recycle && ev.err != nil {
		h.recycling = false
	}
	lost := s.lostPIDs
	s.lostPIDs = nil
	switch {
	case ev.err != nil && l.ending:
	case ev.err != nil:
		v.replaceFailed(l, ev, s, lost)
	default:
		if ev.recycle {
			v.log.Info("worker recycled", "generation", ev.gen.number(), "worker", ev.slot,
				"old_pid", ev.r.OldPID, "new_pid", ev.r.NewPID, "took", since(s.recycled))
			l.stats.Recycles++
			if l.stats.RecyclesBy == nil {
				l.stats.RecyclesBy = map[string]int64{}
			}
			l.stats.RecyclesBy[s.limit]++
			s.recycleFailures = 0
			if time.Since(s.since) >= v.policy.Steady {
				// The recycled worker served steadily, and left at its
				// limit, not lost: the slot's failures are behind it.
				s.failures = 0
			}
			v.awaitRetired(h, ev)
		} else {
			l.stats.Respawns++
			if l.stats.Restarts == nil {
				l.stats.Restarts = map[int]int64{}
			}
			l.stats.Restarts[ev.slot]++
			v.log.Info("worker respawned", "generation", ev.gen.number(), "worker", ev.slot,
				"old_pid", ev.r.OldPID, "new_pid", ev.r.NewPID, "after", since(s.lostAt))
		}
		s.pid, s.since = ev.r.NewPID, time.Now()
		if slices.Contains(lost, ev.r.NewPID) && !l.ending {
			s.lostAt = time.Now()
			v.lostNow(l, ev.slot, s) // lost before run saw it ready
		}
	}
	v.nextRecycle(l)
	v.nextScale(l) // a removal may have waited for this slot
}

// awaitRetired sends evRetired once the old worker of a recycle that
// succeeded has gone, unless the generation stops serving first. Until
// then the recycle still runs, so no other begins: at most N+1 live.
func (v *Service) awaitRetired(h *servingSlots, ev evReplaced) {
	gen, slot, r, ctx := ev.gen, ev.slot, ev.r, h.ctx
	go func() {
		select {
		case <-r.retired:
			v.send(evRetired{gen: gen, slot: slot})
		case <-ctx.Done():
		}
	}()
}

// onRetired ends a recycle: its old worker has gone (or been left
// behind, stuck in the kernel). The next queued recycle may begin.
func (v *Service) onRetired(l *life, ev evRetired) {
	h := l.slots
	if h == nil || ev.gen != h.gen || l.ending {
		return
	}
	h.recycling = false
	v.nextRecycle(l)
}

// replaceFailed answers a replacement that failed before it was ready.
// lost are the slot's workers lost meanwhile: the old worker of a
// recycle among them, the slot needs a respawn.
//
// A failed respawn counts against the budget and backs the slot off. A
// failed recycle whose old worker still serves does neither: the slot
// has lost no serving capacity, so it is no loss, and the budget, which
// guards against losing serving workers, is not spent on it. The old
// worker serves on and the recycle is tried again after a backoff of
// its own, for as long as it fails; /status and the metrics count it.
func (v *Service) replaceFailed(l *life, ev evReplaced, s *slotState, lost []int) {
	h := l.slots
	if ev.recycle && !slices.Contains(lost, s.pid) {
		s.recycleFailures++
		l.stats.RecycleFailures++
		delay := v.backoff(s.recycleFailures)
		v.log.Error("worker recycle failed", "generation", ev.gen.number(), "worker", ev.slot, "pid", s.pid,
			"failures", s.recycleFailures, "retry_in", delay, "err", ev.err)
		gen, slot, pid, limit := ev.gen, ev.slot, s.pid, s.limit
		replaceTimer(&s.retry, time.AfterFunc(delay, func() {
			v.send(evRecycle{gen: gen, slot: slot, pid: pid, limit: limit, why: "the last recycle failed", retry: true})
		}))
		return
	}
	if errors.Is(ev.err, errHostRefused) && h.serving(ev.slot) {
		v.refusedRespawn(l, ev, s)
		return
	}
	if ev.recycle {
		// and its old worker was lost meanwhile
		v.log.Error("worker recycle failed", "generation", ev.gen.number(), "worker", ev.slot, "err", ev.err)
	} else {
		v.log.Error("worker respawn failed", "generation", ev.gen.number(), "worker", ev.slot, "err", ev.err)
	}
	if v.overBudget(l, time.Now(), ev.err) {
		return
	}
	s.failures++
	v.respawnAfter(l, ev.slot, s)
}

// refusedRespawn answers a replacement the host refused to start while
// another worker serves: the host is full (of processes, memory or
// descriptors), which says nothing of the program, so it is tried again
// after the slot's backoff, for as long as that lasts, with a warning
// each time, and the budget is not spent. Once no worker serves, a
// refusal counts as any failure does, and the budget ends a service
// that can serve nothing, for its manager to restart when the host has
// room (the listener goes with it, unless the manager holds it).
func (v *Service) refusedRespawn(l *life, ev evReplaced, s *slotState) {
	l.stats.SpawnRefusals++
	s.failures++
	v.log.Warn("worker respawn refused by the host", "generation", ev.gen.number(), "worker", ev.slot,
		"failures", s.failures, "err", ev.err)
	v.respawnAfter(l, ev.slot, s)
}

// serving reports whether a slot other than except has its worker
// serving: neither lost and waiting for its respawn, nor being replaced.
func (h *servingSlots) serving(except int) bool {
	for i, s := range h.byIndex {
		if i != except && !s.busy {
			return true
		}
	}
	return false
}
