package main

// lifecycle.go is the one place where servery decides what happens to its
// generations. One goroutine, run, owns the lifecycle's state: which
// generation serves, which one starts, which one retires, and whether the
// end has begun. Everything else (the front end's signals and the
// program's Control, each generation's start and stop, a lost worker, the
// ticket-key timer) sends it an event and goes on. run handles the events
// one at a time, in the order they arrive, and starts the blocking work a
// decision needs (a generation's start, its stop, pipe writes) in
// goroutines of its own, which report back with another event. No lock
// guards this state, and run blocks on nothing but its next event. What
// it does when a serving worker is lost, or asks to be recycled, is in
// heal.go.
//
// It is the shape of the HTTP/2 server's serverConn.serve in net/http,
// gunicorn's Arbiter.run and nginx's master process cycle. A generation's
// own life stays where it was: barrier.go, drain.go and worker.go for
// worker processes, direct.go for direct mode's in-process handler.
// model/reload.pml models run as one process whose channels are these
// events; DESIGN, "The sequence of generations (reload.pml)", maps one
// onto the other.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// generation is one generation as run drives it: a Supervisor's worker
// processes, or direct mode's in-process handler (directGen).
type generation interface {
	// Start blocks until the generation is ready to serve, or has been
	// rolled back, leaving nothing behind, and returns why. Cancelling
	// ctx rolls it back.
	Start(ctx context.Context) error
	// promote makes a ready generation the one that answers, with the
	// session ticket keys as they are now (nil without TLS; seq orders
	// them, as for sendTicketKeys), unless it lost a worker since its
	// Start returned: it then returns that loss, and nothing serves. It
	// does not block.
	promote(seq uint64, keys [][]byte) error
	// beginStop begins the stop of a generation whose Start succeeded,
	// with cause as its reason (nil: asked for), and returns at once.
	// From then on the generation reports no lost worker.
	beginStop(cause error)
	// Wait blocks until the generation has stopped and returns how.
	Wait() error
	// skipDrain makes the stop or rollback, begun or to come, skip the
	// rest of its drain: the second signal.
	skipDrain()
	// sendTicketKeys hands every worker the rotated keys; it may block
	// for a second, so run calls it in a goroutine. Keys whose seq is not
	// above the last sent are stale and dropped.
	sendTicketKeys(seq uint64, keys [][]byte)
	// replace starts a new worker in slot, through a barrier of its own,
	// and blocks until it serves in place of the old one, which a recycle
	// then retires, or until it failed and is gone (slot.go).
	replace(ctx context.Context, slot int, recycle bool) (replacement, error)
	// grow starts a worker in a new slot past the last, through a
	// barrier of its own, and blocks until it serves or has failed and
	// is gone; shrink retires the last slot's worker, and does not
	// block. count is the number of workers after either (scale.go).
	grow(ctx context.Context, slot, count int) (replacement, error)
	shrink(slot, count int) error
	number() int
	pids() []int
	// workers returns what each of its worker processes is doing now,
	// for the status listener; serving says whether it is the serving
	// generation. It does not block on the loop.
	workers(serving bool) []workerView
	// askStats refreshes the counts with its workers' counters, and
	// blocks until they have answered or deadline has passed.
	askStats(deadline time.Time)
}

// The events run handles, every one of them: run's switch has a case for
// each. A reply channel, where there is one, gets the one answer its
// sender waits for; it is buffered, so run never blocks on an answer.
type (
	evStart struct { // Start: the first generation; ctx cancels its startup
		ctx   context.Context
		reply chan error
	}
	evReload  struct{ reply chan error } // Reload or SIGHUP (reply nil)
	evStarted struct {                   // a generation's Start returned
		gen generation
		err error
	}
	evLost struct { // a ready generation lost a worker, before its stop began
		gen generation
		err error
	}
	evStopped struct { // a generation's stop finished
		gen generation
		err error
	}
	evStop     struct{}                            // stop requested
	evHurry    struct{}                            // second signal: skip the rest of every drain
	evRotate   struct{ done chan struct{} }        // rotate the ticket keys; done, if any, closed after
	evState    struct{ reply chan lifeState }      // what run's state is, for tests and logs
	evLeave    struct{}                            // a stop with a shutdown delay was asked for: not ready, serve on
	evWatchdog struct{}                            // tell the service manager the loop still runs (WATCHDOG=1)
	evStatus   struct{ reply chan statusSnapshot } // what happened so far, for the status listener (status.go, snapshot)

	// Healing's (heal.go):
	evRespawn struct { // a slot's backoff ended: respawn its worker now
		gen  generation
		slot int
	}
	evRecycle struct { // the worker pid in slot asks to be recycled
		gen   generation
		slot  int
		pid   int
		limit string // which: requests, age or memory
		why   string
		retry bool // the retry of a recycle that failed: its timer fired
	}
	evReplaced struct { // a replace returned
		gen     generation
		slot    int
		recycle bool
		r       replacement
		err     error
	}
	evRetired struct { // a recycled worker has gone, its replacement serving since evReplaced
		gen  generation
		slot int
	}

	// Scaling's (scale.go):
	evScale struct { // Scale (n), or SIGTTIN and SIGTTOU (delta 1 or -1, reply nil)
		n, delta int
		reply    chan error
	}
	evGrown struct { // a grow returned
		gen  generation
		slot int
		r    replacement
		err  error
	}

	// Upgrading's (upgrade.go, handover.go):
	evUpgrade        struct{ reply chan error } // Upgrade or SIGUSR2 (reply nil)
	evUpgradeChecked struct {                   // the check of the new executable returned
		path string
		err  error
	}
	evAdopt struct { // the new image's start: adopt what the old one handed over
		h     *handover
		reply chan error
	}
)

// lifeState is a snapshot of run's state: generation numbers, 0 for
// none, and the serving generation's pids.
type lifeState struct {
	Serving, Starting, Retiring int
	Ending                      bool
	ServingPIDs                 []int
}

// life is run's state. Only run touches it.
type life struct {
	started  bool
	numbered int          // generations numbered so far
	serving  generation   // the ready generation that answers; at the end, the last one that did
	starting *startingGen // a generation in its Start: the first, or a reload's
	retiring generation   // a replaced generation while it stops
	stopping map[generation]bool
	ending   bool         // the end has begun
	hurried  bool         // the second signal came
	endErr   error        // what fails the end: a lost serving worker, a stop's error
	cause    error        // the loss that began the end, as the serving generation's stop got it
	retired  error        // what failed in retired generations, which fails the end too
	queued   []chan error // reloads asked for while one ran or a generation retired
	reload   bool         // one more reload is due (queued may hold only SIGHUP's nil)
	keySeq   uint64
	slots    *servingSlots  // the serving generation's slots (heal.go)
	target   int            // how many workers the service runs: -workers, then what scales set (scale.go)
	scales   []chan error   // scales waiting for the target to serve (a signal's is nil)
	losses   []time.Time    // workers lost within the policy's window, for its budget
	leaving  bool           // a stop was asked for with a shutdown delay, which runs: not ready, serving on
	stats    statusSnapshot // what happened so far, for the status listener (its counts only)
	rotateAt time.Time      // when the ticket keys rotate next
	rotateIn time.Duration  // an adopting image's time to its first rotation; 0: the period
	upgrade  bool           // an upgrade is asked for (upgrade.go)
	upgrades []chan error   // its callers (a signal's is nil)
	checking bool           // the new executable's check runs
	// cancelCheck ends the check's context (its child is killed): the
	// upgrade was answered, by the end or its outcome.
	cancelCheck context.CancelFunc
}

// startingGen is a generation in its Start, and who waits for it.
type startingGen struct {
	gen     generation
	cancel  context.CancelFunc
	replies []chan error // Start's caller, or the Reloads this one answers
}

// run is the lifecycle's owner: it handles every event in order until the
// service has ended and nothing of any generation is left.
func (v *Service) run() {
	l := &life{stopping: map[generation]bool{}}
	for !(l.ending && l.starting == nil && l.retiring == nil && len(l.stopping) == 0) {
		switch ev := (<-v.inbox).(type) {
		case evStart:
			v.onStart(l, ev)
		case evReload:
			v.onReload(l, ev)
		case evStarted:
			v.onStarted(l, ev)
		case evLost:
			v.onLost(l, ev)
		case evStopped:
			v.onStopped(l, ev)
		case evStop:
			v.end(l, nil)
		case evHurry:
			v.hurry(l)
		case evRotate:
			v.rotate(l)
			if ev.done != nil {
				close(ev.done)
			}
		case evState:
			ev.reply <- l.state()
		case evStatus:
			ev.reply <- v.snapshot(l)
		case evWatchdog:
			v.notify("WATCHDOG=1")
		case evLeave:
			v.onLeave(l)
		case evRespawn:
			v.onRespawn(l, ev)
		case evRecycle:
			v.onRecycle(l, ev)
		case evReplaced:
			v.onReplaced(l, ev)
		case evRetired:
			v.onRetired(l, ev)
		case evScale:
			v.onScale(l, ev)
		case evGrown:
			v.onGrown(l, ev)
		case evUpgrade:
			v.onUpgrade(l, ev)
		case evUpgradeChecked:
			v.onUpgradeChecked(l, ev)
		case evAdopt:
			v.onAdopt(l, ev)
		}
		v.nextUpgrade(l) // an upgrade waits until nothing else is under way
	}
	v.ln.Close()
	v.err = errors.Join(l.endErr, l.retired)
	v.final = l.state()
	close(v.done)
}

// onStart begins the first generation, unless the end came first.
func (v *Service) onStart(l *life, ev evStart) {
	switch {
	case l.started:
		ev.reply <- errStartedTwice
	case l.ending:
		ev.reply <- errStoppedFirst
	default:
		l.started, l.target = true, v.workers
		v.begin(l, ev.ctx, []chan error{ev.reply})
	}
}

// onReload begins a reload now, or queues it behind the one running or
// the generation retiring; requests queued meanwhile coalesce into that
// one more reload.
func (v *Service) onReload(l *life, ev evReload) {
	if l.ending || l.leaving || l.serving == nil {
		switch {
		case ev.reply != nil:
		case l.ending || l.leaving:
			v.log.Info("reload ignored: the service is stopping", "generation", l.number(l.serving))
		default:
			v.log.Warn("reload ignored: not serving yet", "generation", l.numbered)
		}
		reply(ev.reply, errNotServing)
		return
	}
	l.reload = true
	l.queued = append(l.queued, ev.reply)
	if l.starting == nil && l.retiring != nil {
		v.log.Info("reload waits for the retiring generation", "generation", l.retiring.number())
	}
	v.next(l)
}

// next begins the queued reload once no generation starts or stops (a
// retiring one, or one that lost a worker before it served), so at most
// two generations are ever live.
func (v *Service) next(l *life) {
	if !l.reload || l.ending || l.leaving || l.starting != nil || len(l.stopping) > 0 {
		return
	}
	replies := l.queued
	l.reload, l.queued = false, nil
	v.notify("RELOADING=1", monotonicUsec())
	v.log.Info("reloading", "generation", l.numbered+1, "serving", l.serving.number())
	v.begin(l, context.Background(), replies)
}

// begin numbers and builds the next generation and runs its Start in a
// goroutine of its own, which reports evStarted. Cancelling ctx, or the
// end, rolls it back.
func (v *Service) begin(l *life, ctx context.Context, replies []chan error) {
	l.numbered++
	var keys [][]byte
	if v.keys != nil {
		keys = v.keys.current()
	}
	var gen generation
	gen = v.build(l.numbered, l.target, keys, v.reportsOf(&gen))
	ctx, cancel := context.WithCancel(ctx)
	l.starting = &startingGen{gen: gen, cancel: cancel, replies: replies}
	if l.hurried {
		gen.skipDrain()
	}
	go func() { v.send(evStarted{gen, gen.Start(ctx)}) }()
}

// reportsOf is how the generation *gen, once built, reports to run.
func (v *Service) reportsOf(gen *generation) reports {
	return reports{
		lost: func(err error) { v.send(evLost{*gen, err}) },
		recycle: func(slot, pid int, limit, why string) {
			v.send(evRecycle{gen: *gen, slot: slot, pid: pid, limit: limit, why: why})
		},
		counts: v.counts,
	}
}

// onStarted answers the callers of a generation whose Start returned,
// with what it became (started), and begins what waited for it.
func (v *Service) onStarted(l *life, ev evStarted) {
	s := l.starting
	l.starting = nil
	s.cancel()
	first := l.serving == nil
	err := v.started(l, ev, first)
	if err != nil && !first {
		err = fmt.Errorf("reload: %w", err)
	}
	for _, r := range s.replies {
		reply(r, err)
	}
	v.next(l)
	v.nextRecycle(l) // a recycle may have waited for this reload
	v.nextScale(l)   // and a scale
}

// started decides what a generation whose Start returned becomes, and
// returns what its callers get. It fails if its Start failed, or if it
// lost a worker before it could serve: before run saw it ready, or before
// promote handed it the listener's traffic (then the first generation
// ends the service, a reload's leaves the serving one be). Ready in the
// instant the end, or its shutdown delay, began, it never serves.
// Otherwise it is promoted.
func (v *Service) started(l *life, ev evStarted, first bool) error {
	err := ev.err
	if err == nil && !l.ending && !(l.leaving && !first) {
		lost := v.promote(l, ev.gen)
		if lost == nil {
			return nil
		}
		err = fmt.Errorf("lost a worker before serving: %w", lost)
		v.stop(l, ev.gen, err)
	}
	switch {
	case err != nil && first:
		l.ending, l.endErr = true, err // Start's caller reports it
	case err != nil:
		v.reloadFailed(l, ev.gen.number(), err)
		if errors.Is(ev.err, errAppStop) || errors.Is(ev.err, errSurvived) {
			// Rolled back, but not cleanly: that fails the exit status
			// of the service, as in any generation.
			l.retired = errors.Join(l.retired, fmt.Errorf("generation %d: %w", ev.gen.number(), ev.err))
		}
	default:
		// Ready in the instant the end, or its shutdown delay, began:
		// it never serves.
		v.stop(l, ev.gen, nil)
		err = errNotServing
		if first {
			l.serving, err = ev.gen, nil
		}
	}
	return err
}

// promote makes gen the serving generation and retires the one it
// replaces, unless gen lost a worker since its Start returned: then it
// returns that loss and changes nothing.
func (v *Service) promote(l *life, gen generation) error {
	var keys [][]byte
	if v.keys != nil {
		keys = v.keys.current()
	}
	if err := gen.promote(l.keySeq, keys); err != nil {
		return err
	}
	old := l.serving
	l.serving = gen
	v.serving(gen.number())
	if l.slots != nil {
		l.slots.end() // a reload cancels the respawns and recycles of the one it replaces
	}
	l.slots = newServingSlots(gen)
	if old == nil {
		v.notify("READY=1", fmt.Sprintf("STATUS=%d workers ready", l.target))
		if v.keys != nil {
			first := cmp.Or(l.rotateIn, ticketKeyRotation)
			l.rotateAt = time.Now().Add(first)
			go v.rotateEvery(first, ticketKeyRotation)
		}
		return nil
	}
	v.log.Info("reloaded", "generation", gen.number(), "retiring", old.number(), "pids", fmt.Sprint(gen.pids()))
	workers := max(len(gen.pids()), 1) // direct mode's one has no pid
	l.stats.ReloadsOK++
	l.stats.LastReload = &reloadResult{Generation: gen.number(), Result: "ok", At: time.Now()}
	v.notify("READY=1", fmt.Sprintf("STATUS=generation %d serving with %d workers", gen.number(), workers))
	l.retiring = old
	v.stop(l, old, nil)
	return nil
}

// reloadFailed logs a reload that did not come to serve and tells the
// service manager the serving generation goes on, unless the end cut it
// short, which is no failure of its own.
func (v *Service) reloadFailed(l *life, n int, err error) {
	if l.ending || l.leaving {
		v.log.Info("reload cut short by the stop, rolled back", "generation", n, "serving", l.serving.number(), "err", err)
		return
	}
	v.log.Error("reload failed, still serving", "generation", n, "serving", l.serving.number(), "err", err)
	l.stats.ReloadsFailed++
	l.stats.LastReload = &reloadResult{Generation: n, Result: "failed", At: time.Now(), Error: err.Error()}
	v.notify("READY=1", oneLine(fmt.Sprintf("STATUS=reload failed, generation %d still serving: %v", l.serving.number(), err)))
}

// onLost decides what a lost worker means, by the role of its generation
// when run learns of it. A generation reports a loss only before its
// stop began, so one from the serving generation, or from the one a
// promotion retired meanwhile, was lost while it served: the serving
// generation replaces the worker in its slot (heal.go), and a retiring
// one needs none. Under the fixed generation (-max-restarts 0), or in
// direct mode, the service ends instead, with exit status 1. A loss in a
// generation still starting fails that start when run sees it return:
// the generation refuses its promotion (Supervisor.promote).
func (v *Service) onLost(l *life, ev evLost) {
	if ev.gen == l.serving || ev.gen == l.retiring {
		l.stats.Lost++
	}
	switch {
	case l.starting != nil && ev.gen == l.starting.gen:
		// Lost before it served: its promote fails with this loss, and
		// with it the start or the reload (started).
	case v.heals(l, ev):
		v.onWorkerLost(l, ev)
	case ev.gen == l.retiring && v.policy.MaxRestarts > 0 && workerLoss(ev.err):
		v.log.Warn("worker lost by the retiring generation: not replaced", "generation", ev.gen.number(), "err", ev.err)
	case ev.gen == l.serving || ev.gen == l.retiring:
		v.log.Error("serving worker lost: ending the service", "generation", ev.gen.number(), "err", ev.err)
		v.end(l, ev.err)
	default:
		v.log.Warn("worker lost by a generation already stopping", "generation", ev.gen.number(), "err", ev.err)
	}
}

// workerLoss reports whether err is the loss of a worker process, which
// one slot's replacement can heal; direct mode's lost server is the whole
// service's, whichever generation's handler it served when it failed.
func workerLoss(err error) bool {
	var we *workerError
	return errors.As(err, &we)
}

// end begins the end of the service, once: STOPPING=1 (with the lost
// worker as STATUS, if one began it), the listener closed, a starting
// generation cancelled (it rolls back), the serving one stopped, and
// nothing new begun after. A loss that comes later still counts: its
// worker was lost while it served.
func (v *Service) end(l *life, lost error) {
	cause := lost
	if lost != nil && !errors.Is(lost, errGaveUp) {
		cause = fmt.Errorf("generation lost %w", lost)
	}
	if cause != nil {
		l.endErr = errors.Join(l.endErr, cause)
	}
	if l.ending {
		return
	}
	l.ending, l.cause = true, cause
	status := ""
	if lost != nil {
		status = oneLine("STATUS=" + lost.Error())
	}
	if !l.leaving || status != "" {
		v.notify(status, "STOPPING=1") // a shutdown delay said STOPPING=1 already
	}
	// The parent's copy first: once every worker has closed its own, the
	// kernel refuses new connections instead of queueing them for a
	// listener nobody will accept on.
	v.ln.Close()
	if l.starting != nil {
		l.starting.cancel()
	}
	if l.slots != nil {
		l.slots.end() // every backoff ends at once
	}
	if l.serving != nil {
		v.stop(l, l.serving, cause)
	}
	for _, r := range l.queued {
		reply(r, errNotServing)
	}
	l.queued, l.reload = nil, false
	v.answerScales(l, fmt.Errorf("scale: %w", errNotServing))
	v.answerUpgrades(l, fmt.Errorf("upgrade: %w", errNotServing))
}

// onLeave begins a shutdown delay (-shutdown-delay): from now on /readyz
// answers 503 and the service manager has STOPPING=1, so load balancers
// and Kubernetes take the service out of rotation, while every
// generation serves on as before: workers accept, respawn and recycle.
// Reloads are refused from now on: a reload under way is cut short (it
// rolls back), and those queued are answered at once, so no READY=1
// follows STOPPING=1 and no caller waits through the delay and the drain
// for a reload that would never serve. The front end asks for the stop
// itself when the delay is over.
func (v *Service) onLeave(l *life) {
	if l.ending || l.leaving {
		return
	}
	l.leaving = true
	v.notify("STATUS=shutdown delay: not ready, serving on", "STOPPING=1")
	if l.starting != nil && l.serving != nil {
		l.starting.cancel()
	}
	for _, r := range l.queued {
		reply(r, errNotServing)
	}
	l.queued, l.reload = nil, false
	v.answerScales(l, fmt.Errorf("scale: %w", errNotServing))
	v.answerUpgrades(l, fmt.Errorf("upgrade: %w", errNotServing))
}

// stop begins gen's stop and waits for it in a goroutine, which reports
// evStopped.
func (v *Service) stop(l *life, gen generation, cause error) {
	if l.stopping[gen] {
		return
	}
	l.stopping[gen] = true
	gen.beginStop(cause)
	if l.hurried {
		gen.skipDrain()
	}
	go func() { v.send(evStopped{gen, gen.Wait()}) }()
}

// onStopped records how a generation's stop ended. A retired generation
// that did not stop cleanly (an App stop step that failed, a survivor)
// fails the service's exit status; the serving one's stop is the end's.
func (v *Service) onStopped(l *life, ev evStopped) {
	delete(l.stopping, ev.gen)
	switch ev.gen {
	case l.retiring:
		l.retiring = nil
		if ev.err != nil {
			v.log.Error("retired generation ended with error", "generation", ev.gen.number(), "err", ev.err)
			l.retired = errors.Join(l.retired, fmt.Errorf("generation %d: %w", ev.gen.number(), ev.err))
			if !l.ending {
				v.notify(oneLine(fmt.Sprintf("STATUS=generation %d serving; retired generation %d failed: %v", l.serving.number(), ev.gen.number(), ev.err)))
			}
		} else {
			v.log.Info("generation retired", "generation", ev.gen.number())
		}
	case l.serving:
		if ev.err != nil && (l.cause == nil || !errors.Is(ev.err, l.cause)) {
			l.endErr = errors.Join(l.endErr, ev.err)
		}
	default:
		// One that never served: it lost a worker before run saw it
		// ready, or became ready as the end began. Its loss is its
		// reload's failure; an App stop step that failed, or a survivor,
		// fails the service as anywhere else.
		if errors.Is(ev.err, errAppStop) || errors.Is(ev.err, errSurvived) {
			v.log.Error("generation that never served ended with error", "generation", ev.gen.number(), "err", ev.err)
			l.retired = errors.Join(l.retired, fmt.Errorf("generation %d: %w", ev.gen.number(), ev.err))
		}
	}
	v.next(l) // a reload may have waited for this generation
}

// hurry skips the rest of every drain: of the generations stopping, of
// one rolling back, and of any stop still to come.
func (v *Service) hurry(l *life) {
	l.hurried = true
	for gen := range l.stopping {
		gen.skipDrain()
	}
	if l.starting != nil {
		l.starting.gen.skipDrain()
	}
}

// rotate puts a fresh ticket key first, keeps the previous one for
// resumption, and sends both to the serving generation. A generation
// starting meanwhile gets them when it begins to serve (promote).
func (v *Service) rotate(l *life) {
	if v.keys == nil || l.ending {
		return
	}
	if err := v.keys.rotate(); err != nil {
		v.log.Error("ticket key rotation", "generation", l.number(l.serving), "err", err)
		return
	}
	l.keySeq++
	l.rotateAt = time.Now().Add(ticketKeyRotation)
	if l.serving != nil {
		gen, seq, keys := l.serving, l.keySeq, v.keys.current()
		go gen.sendTicketKeys(seq, keys)
	}
	v.log.Info("ticket keys rotated", "generation", l.number(l.serving))
}

// rotateEvery asks run to rotate the ticket keys after first, then
// every period, until the service ends.
func (v *Service) rotateEvery(first, period time.Duration) {
	t := time.NewTimer(first)
	select {
	case <-t.C:
		v.send(evRotate{})
	case <-v.done:
		t.Stop()
		return
	}
	v.every(period, evRotate{})
}

// every sends run ev every period until the service ends.
func (v *Service) every(period time.Duration, ev any) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			v.send(ev)
		case <-v.done:
			return
		}
	}
}

func (l *life) state() lifeState {
	s := lifeState{Serving: l.number(l.serving), Retiring: l.number(l.retiring), Ending: l.ending}
	if l.serving != nil {
		s.ServingPIDs = l.serving.pids()
	}
	if l.starting != nil {
		s.Starting = l.starting.gen.number()
	}
	return s
}

// number is gen's number, or 0 for none.
func (l *life) number(gen generation) int {
	if gen == nil {
		return 0
	}
	return gen.number()
}

// send hands ev to run, unless the service has ended.
func (v *Service) send(ev any) bool {
	select {
	case v.inbox <- ev:
		return true
	case <-v.done:
		return false
	}
}

// reply answers a waiting sender, if there is one.
func reply(r chan error, err error) {
	if r != nil {
		r <- err
	}
}

// oneLine joins a multi-line text (errors.Join's, an App's own error) into
// one line, for an sd_notify assignment, where a newline would begin
// another.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
