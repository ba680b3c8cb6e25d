package main

// heal_test.go: a serving generation that loses a worker replaces it in
// its slot, backs a failing slot off, gives up past its budget, and
// recycles workers at their limits, replacement first.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// testHeal is a policy with backoffs short enough for tests.
var testHeal = healPolicy{MaxRestarts: 5, Window: time.Minute,
	Backoff: 20 * time.Millisecond, BackoffCap: 200 * time.Millisecond, Steady: 10 * time.Second}

// newHealHarness is a started service of workers under policy.
func newHealHarness(t *testing.T, workers int, faults map[int]string, policy healPolicy, edit ...func(*supervisorConfig)) *serviceHarness {
	t.Helper()
	h := newServiceHarness(t, workers, faults, edit...)
	h.svc.policy = policy
	return h
}

// waitLog waits until the logs match re, at most 15 s, and returns the
// first match's submatches.
func (h *harness) waitLog(re string) []string {
	h.t.Helper()
	rx := regexp.MustCompile(re)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if m := rx.FindStringSubmatch(h.readLogs()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no log line matching %s within 15s", re)
		}
	}
}

// start starts the service or fails the test.
func (h *serviceHarness) start() {
	h.t.Helper()
	if err := h.svc.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

func TestLostWorkerIsRespawnedInItsSlot(t *testing.T) {
	policy := testHeal
	policy.Steady = 300 * time.Millisecond
	h := newHealHarness(t, 3, nil, policy)
	h.start()
	before := h.servingPIDs()
	l := startLoad(t, h.addr, "/", 16)
	time.Sleep(2 * policy.Steady) // worker 1 has served steadily: no backoff
	kill(before[1])
	m := h.waitLog(fmt.Sprintf(`msg="worker respawned" generation=1 worker=1 old_pid=%d new_pid=(\d+) after=\S+`, before[1]))
	time.Sleep(100 * time.Millisecond)
	l.stopLoad()
	after := h.servingPIDs()
	newPID, _ := strconv.Atoi(m[1])
	if after[0] != before[0] || after[2] != before[2] || after[1] != newPID || newPID == before[1] {
		t.Errorf("pids %v after the respawn, %v before; want slot 1 alone replaced, by pid %d", after, before, newPID)
	}
	logs := h.readLogs()
	for _, re := range []string{
		fmt.Sprintf(`level=ERROR msg="worker lost" generation=1 worker=1 pid=%d reason="exited: signal: killed"`, before[1]),
		`msg="worker respawning" generation=1 worker=1 delay=0s failures=0`,
		fmt.Sprintf(`msg="worker started" generation=1 worker=1 pid=%d`, newPID),
		fmt.Sprintf(`msg=ready generation=1 worker=1 pid=%d`, newPID),
	} {
		if !regexp.MustCompile(re).MatchString(logs) {
			t.Errorf("no log line matching %s", re)
		}
	}
	if l.refused.Load() != 0 || l.ok.Load() == 0 {
		t.Errorf("under load across the respawn: %d answered, %d refused; want none refused", l.ok.Load(), l.refused.Load())
	}
	if st := h.svc.state(); st.Ending || st.Serving != 1 {
		t.Errorf("state %+v after the respawn; want generation 1 serving", st)
	}
	if err := h.svc.Stop(context.Background()); err != nil {
		t.Errorf("Stop after a respawn = %v; want a clean stop", err)
	}
}

func TestRespawnWaitsUntilTheLostWorkerHasExited(t *testing.T) {
	h := newHealHarness(t, 2, map[int]string{1: faultBadAfterReady}, testHeal, func(c *supervisorConfig) {
		c.DrainTimeout, c.ForceTimeout = 300*time.Millisecond, 800*time.Millisecond
		c.Runtime.DrainTimeout = c.DrainTimeout
	})
	h.start()
	bad := h.servingPIDs()[1]
	h.waitLog(fmt.Sprintf(`msg="worker lost" generation=1 worker=1 pid=%d reason=".*not the protocol`, bad))
	h.waitLog(`msg="worker started" generation=1 worker=1 pid=\d+(?s:.*)msg="worker started" generation=1 worker=1 pid=\d+`)
	// Seen after the replacement started: the lost worker, which ignored
	// its drain and SIGTERM, must have been killed and reaped before.
	if !gone(bad) {
		t.Errorf("the replacement started while the lost worker, pid %d, still ran: three live workers in two slots", bad)
	}
	h.waitLog(fmt.Sprintf(`msg="worker respawned" generation=1 worker=1 old_pid=%d`, bad))
}

func TestReplacementAcceptsOnlyAfterItsCommit(t *testing.T) {
	h := newHealHarness(t, 2, nil, testHeal)
	var armed atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	// The parent logs a worker's prepared before it commits it: while
	// this hook holds the log line, the replacement is prepared and not
	// committed.
	h.svc.log = slog.New(onMessage{Handler: h.svc.log.Handler(), msg: "prepared", hook: func() {
		if armed.CompareAndSwap(true, false) {
			close(held)
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
		}
	}})
	h.start()
	pids := h.servingPIDs()
	pause(pids[0]) // the sibling accepts nothing meanwhile
	defer unpause(pids[0])
	armed.Store(true)
	kill(pids[1])
	<-held
	answered := make(chan error, 1)
	go func() {
		code, _, err := get(h.addr, "/")
		if err == nil && code != 200 {
			err = fmt.Errorf("status %d", code)
		}
		answered <- err
	}()
	select {
	case err := <-answered:
		t.Fatalf("a request was answered (%v) while the replacement was prepared but not committed", err)
	case <-time.After(500 * time.Millisecond):
	}
	close(release)
	if err := <-answered; err != nil {
		t.Errorf("GET after the replacement's commit: %v", err)
	}
}

func TestCrashLoopBacksOffAndGivesUp(t *testing.T) {
	policy := testHeal
	policy.MaxRestarts = 4
	h := newHealHarness(t, 2, map[int]string{1: faultCrashLater}, policy)
	h.start()
	kill(h.servingPIDs()[1])
	select {
	case <-h.svc.done:
	case <-time.After(15 * time.Second):
		t.Fatal("the service did not give up on a slot whose every replacement crashes")
	}
	want := "giving up: 5 workers lost within 1m0s (-max-restarts 4)"
	if err := h.svc.err; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("the service ended with %v; want %q", err, want)
	}
	// The first loss came within Steady of the generation's start, so
	// every one backs off, doubling: 20, 40, 80, 160 ms, each within
	// 0.8 to 1.2 times that.
	delays := regexp.MustCompile(`msg="worker respawning" generation=1 worker=1 delay=(\S+) failures=(\d+)`).FindAllStringSubmatch(h.readLogs(), -1)
	if len(delays) != 4 {
		t.Fatalf("%d respawns logged; want 4 before the budget ran out", len(delays))
	}
	for i, m := range delays {
		d, _ := time.ParseDuration(m[1])
		nominal := policy.Backoff << i
		if m[2] != strconv.Itoa(i+1) || d < nominal*8/10 || d > nominal*12/10 {
			t.Errorf("respawn %d: delay %v after %s failures; want %d failures and %v±20%%", i+1, d, m[2], i+1, nominal)
		}
	}
	for _, pid := range h.startedPIDs() {
		if !waitGone(pid, time.Second) {
			t.Errorf("worker pid %d outlived the end", pid)
		}
	}
}

func TestWorkerCrashingOnEverySecondStartIsRespawned(t *testing.T) {
	h := newHealHarness(t, 2, map[int]string{1: faultCrashEverySecond}, testHeal)
	h.start()
	kill(h.servingPIDs()[1])
	// Start 2 crashes once ready, start 3 serves.
	third := h.waitLog(`msg="worker started" generation=1 worker=1 pid=\d+(?s:.*)msg="worker started" generation=1 worker=1 pid=\d+(?s:.*)msg="worker started" generation=1 worker=1 pid=(\d+)`)
	h.waitLog(`msg="worker respawned" generation=1 worker=1 old_pid=\d+ new_pid=` + third[1])
	pid, _ := strconv.Atoi(third[1])
	time.Sleep(200 * time.Millisecond)
	if got := h.servingPIDs()[1]; got != pid || gone(pid) {
		t.Errorf("slot 1 is pid %d (third start gone: %v); want the third start, pid %d, serving", got, gone(pid), pid)
	}
	if n := strings.Count(h.readLogs(), `msg="worker started" generation=1 worker=1`); n != 3 {
		t.Errorf("slot 1 started %d workers; want 3", n)
	}
	if code, _, err := get(h.addr, "/"); err != nil || code != 200 {
		t.Errorf("GET / = %d, %v; want 200", code, err)
	}
}

// lostFirst is a generation whose first replacement is reported only
// once the lifecycle loop has taken the loss of the new worker: the loss
// reaches the loop while the slot's replacement still runs.
type lostFirst struct {
	*Supervisor
	calls atomic.Int32
	mu    sync.Mutex
	taken map[int]bool // pids whose loss the loop has taken
}

func (g *lostFirst) replace(ctx context.Context, slot int, recycle bool) (replacement, error) {
	r, err := g.Supervisor.replace(ctx, slot, recycle)
	if err == nil && g.calls.Add(1) == 1 {
		for deadline := time.Now().Add(10 * time.Second); !g.lostTaken(r.NewPID) && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return r, err
}

func (g *lostFirst) lostTaken(pid int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.taken[pid]
}

func TestReplacementLostBeforeItsReadyIsSeenIsRespawned(t *testing.T) {
	h := newHealHarness(t, 2, map[int]string{1: faultCrashEverySecond}, testHeal)
	h.wrap = func(sup *Supervisor, r reports) generation {
		g := &lostFirst{Supervisor: sup, taken: map[int]bool{}}
		sup.onLost = func(err error) {
			r.lost(err) // returns once the loop has taken it
			var we *workerError
			if errors.As(err, &we) {
				g.mu.Lock()
				g.taken[we.PID] = true
				g.mu.Unlock()
			}
		}
		return g
	}
	h.start()
	kill(h.servingPIDs()[1])
	// Start 2 crashes once ready, and its loss comes first; start 3 serves.
	third := h.waitLog(`msg="worker started" generation=1 worker=1 pid=\d+(?s:.*)msg="worker started" generation=1 worker=1 pid=\d+(?s:.*)msg="worker started" generation=1 worker=1 pid=(\d+)`)
	h.waitLog(`msg="worker respawned" generation=1 worker=1 old_pid=\d+ new_pid=` + third[1])
}

func TestFailedReplacementNeverStopsItsSiblings(t *testing.T) {
	policy := testHeal
	policy.MaxRestarts = 10
	h := newHealHarness(t, 2, map[int]string{1: faultFailLater}, policy)
	h.start()
	sibling := h.servingPIDs()[0]
	kill(h.servingPIDs()[1])
	h.waitLog(`(?s:msg="worker respawn failed" generation=1 worker=1.*){3}`)
	if gone(sibling) || h.servingPIDs()[0] != sibling {
		t.Errorf("worker 0 (pid %d) left its slot while slot 1's replacements failed", sibling)
	}
	if code, _, err := get(h.addr, "/"); err != nil || code != 200 {
		t.Errorf("GET / = %d, %v while slot 1's replacements fail; want 200 from worker 0", code, err)
	}
	if err := h.svc.Stop(context.Background()); err != nil {
		t.Errorf("Stop = %v; want a clean stop", err)
	}
}

func TestStopDuringABackoffEndsPromptly(t *testing.T) {
	policy := testHeal
	policy.Backoff, policy.BackoffCap = 30*time.Second, time.Minute
	h := newHealHarness(t, 2, nil, policy)
	h.start()
	kill(h.servingPIDs()[1])
	h.waitLog(`msg="worker respawning" generation=1 worker=1 delay=[23]\d\.\d+s`)
	stopped := make(chan error, 1)
	go func() { stopped <- h.svc.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Stop during a backoff = %v; want a clean stop (exit 0)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop during a 30s backoff did not return within 10s")
	}
	if strings.Contains(h.readLogs(), `msg="worker respawned"`) {
		t.Error("a respawn ran after the stop")
	}
}

func TestReloadCancelsThePendingRespawns(t *testing.T) {
	policy := testHeal
	policy.Backoff, policy.BackoffCap = 5*time.Second, time.Minute
	h := newHealHarness(t, 2, nil, policy)
	h.start()
	kill(h.servingPIDs()[1])
	h.waitLog(`msg="worker respawning" generation=1 worker=1 delay=\d+`)
	if err := h.svc.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.waitRetired()
	if n := strings.Count(h.readLogs(), `msg="worker started" generation=1 worker=1`); n != 1 {
		t.Errorf("generation 1 started %d workers in slot 1; want its first only: the reload cancels its respawn", n)
	}
	if strings.Contains(h.readLogs(), `msg="worker respawn failed" generation=1`) {
		t.Error("generation 1 tried a respawn after the reload retired it")
	}
	// The new generation heals its own slots (after the same backoff:
	// the decision is what counts here).
	kill(h.svc.state().ServingPIDs[0])
	h.waitLog(`msg="worker respawning" generation=2 worker=0`)
}

func TestLossDuringAReloadIsHealedInTheServingGeneration(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	t.Setenv(gateEnv, gate)
	h := newHealHarness(t, 2, nil, testHeal)
	h.later = map[int]map[int]string{2: {0: faultHeldPrepared, 1: faultHeldPrepared}}
	h.start()
	before := h.servingPIDs()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	reloaded := make(chan error, 1)
	go func() { reloaded <- h.svc.Reload(context.Background()) }()
	h.waitLog(`msg="holding prepared"`)
	kill(before[1])
	h.waitLog(fmt.Sprintf(`msg="worker respawned" generation=1 worker=1 old_pid=%d`, before[1]))
	os.Remove(gate)
	if err := <-reloaded; err != nil {
		t.Errorf("Reload = %v; want generation 2 serving", err)
	}
	if st := h.svc.state(); st.Serving != 2 {
		t.Errorf("serving generation %d; want 2", st.Serving)
	}
}

func TestRecycleStartsTheReplacementFirst(t *testing.T) {
	policy := testHeal
	policy.MaxRestarts = 1 // recycles do not count against it
	h := newHealHarness(t, 2, nil, policy, func(c *supervisorConfig) { c.MaxRequests = 40 })
	h.start()
	l := startLoad(t, h.addr, "/", 8)
	h.waitLog(`(?s:msg="worker recycled".*){4}`)
	l.stopLoad()
	if l.refused.Load()+l.truncated.Load()+l.other.Load()+l.retried.Load() != 0 {
		t.Errorf("under load across recycles: %d answered, %d refused, %d truncated, %d other, %d keep-alive races; want none lost",
			l.ok.Load(), l.refused.Load(), l.truncated.Load(), l.other.Load(), l.retried.Load())
	}
	recycled := regexp.MustCompile(`msg="worker recycled" generation=1 worker=\d old_pid=(\d+) new_pid=(\d+)`).FindAllStringSubmatch(h.readLogs(), -1)
	for _, m := range recycled {
		h.waitLog(`msg="worker draining" .*pid=` + m[1] + `\b`)
	}
	logs := h.readLogs()
	for _, m := range recycled {
		newReady := regexp.MustCompile(`msg=ready generation=1 worker=\d pid=` + m[2] + `\b`).FindStringIndex(logs)
		oldDrains := regexp.MustCompile(`msg="worker draining" .*pid=` + m[1] + `\b`).FindStringIndex(logs)
		if newReady == nil || oldDrains == nil || newReady[0] > oldDrains[0] {
			t.Errorf("pid %s began to drain before its replacement, pid %s, was ready", m[1], m[2])
		}
	}
	// One recycle at a time: each recycling line is followed by its
	// recycled line before the next begins.
	seq := regexp.MustCompile(`msg="worker (recycling|recycled)"`).FindAllStringSubmatch(logs, -1)
	for i, m := range seq {
		if want := []string{"recycling", "recycled"}[i%2]; m[1] != want {
			t.Fatalf("recycle log %d is %q; want %q: two recycles ran at once", i, m[1], want)
		}
	}
	if strings.Contains(logs, `msg="worker lost"`) || h.svc.state().Ending {
		t.Error("a recycle counted as a loss")
	}
}

func TestRecycledWorkerThatIgnoresSIGTERMIsKilledAtTheForceDeadline(t *testing.T) {
	h := newHealHarness(t, 2, map[int]string{0: faultStubborn}, testHeal, func(c *supervisorConfig) {
		c.MaxRequests = 10
		c.DrainTimeout, c.ForceTimeout = 500*time.Millisecond, time.Second
		c.Runtime.DrainTimeout = c.DrainTimeout
	})
	h.start()
	old := h.servingPIDs()[0]
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(h.readLogs(), `msg="worker recycled" generation=1 worker=0`); {
		if time.Now().After(deadline) {
			t.Fatal("worker 0 was not recycled after 15s of requests")
		}
		get(h.addr, "/")
	}
	h.waitLog(fmt.Sprintf(`msg="worker outlived deadline" generation=1 worker=0 pid=%d action=kill`, old))
	if !waitGone(old, 2*time.Second) {
		t.Errorf("recycled worker pid %d still alive after the force deadline", old)
	}
	if strings.Contains(h.readLogs(), `msg="worker lost"`) {
		t.Error("the recycled worker's exit was taken for a loss")
	}
	if code, _, err := get(h.addr, "/"); err != nil || code != 200 {
		t.Errorf("GET / = %d, %v after the recycle; want 200", code, err)
	}
}

func TestRecyclesKeepAtMostNPlusOneWorkersAlive(t *testing.T) {
	// Workers that ignore their drain and SIGTERM live until the force
	// deadline after their recycle: the next recycle must wait for that.
	h := newHealHarness(t, 2, map[int]string{0: faultStubborn, 1: faultStubborn}, testHeal, func(c *supervisorConfig) {
		c.MaxRequests = 10
		c.DrainTimeout, c.ForceTimeout = 200*time.Millisecond, 500*time.Millisecond
		c.Runtime.DrainTimeout = c.DrainTimeout
	})
	h.start()
	most := 0
	for deadline := time.Now().Add(15 * time.Second); strings.Count(h.readLogs(), `msg="worker recycled"`) < 3; {
		if time.Now().After(deadline) {
			t.Fatal("fewer than 3 recycles in 15s")
		}
		get(h.addr, "/")
		alive := 0
		for _, pid := range h.startedPIDs() {
			if !gone(pid) {
				alive++
			}
		}
		most = max(most, alive)
	}
	if most > 3 {
		t.Errorf("%d workers alive at once during recycles of 2; want at most 3", most)
	}
}

func TestRecycleRequestDuringTheBarrierWaitsUntilTheGenerationServes(t *testing.T) {
	// Worker 0 reaches its age while worker 1 is still to report ready.
	h := newHealHarness(t, 2, map[int]string{1: faultSlowReady}, testHeal, func(c *supervisorConfig) {
		c.MaxAge = 50 * time.Millisecond
	})
	h.start()
	h.waitLog(`msg="worker recycled" generation=1 worker=0`)
}

// respawnFailures returns the failures each "worker respawning" line of
// slot logged, in order.
func respawnFailures(logs string, slot int) []string {
	var fs []string
	re := regexp.MustCompile(fmt.Sprintf(`msg="worker respawning" generation=1 worker=%d delay=\S+ failures=(\d+)`, slot))
	for _, m := range re.FindAllStringSubmatch(logs, -1) {
		fs = append(fs, m[1])
	}
	return fs
}

func TestLossOfASteadyWorkerStartsTheBackoffOver(t *testing.T) {
	policy := testHeal
	policy.Steady = 300 * time.Millisecond
	h := newHealHarness(t, 2, map[int]string{1: faultCrashEverySecond}, policy)
	h.start()
	kill(h.servingPIDs()[1]) // start 1, lost at once: a failure; start 2 crashes once ready: another
	third := h.waitLog(`msg="worker started" generation=1 worker=1 pid=\d+(?s:.*)msg="worker started" generation=1 worker=1 pid=\d+(?s:.*)msg="worker started" generation=1 worker=1 pid=(\d+)`)
	h.waitLog(`msg="worker respawned" generation=1 worker=1 old_pid=\d+ new_pid=` + third[1])
	time.Sleep(2 * policy.Steady) // start 3 serves steadily
	pid, _ := strconv.Atoi(third[1])
	kill(pid)
	h.waitLog(`msg="worker respawning" generation=1 worker=1(?s:.*)msg="worker respawning" generation=1 worker=1(?s:.*)msg="worker respawning" generation=1 worker=1 delay=0s failures=0`)
	if got := respawnFailures(h.readLogs(), 1); !slices.Equal(got[:3], []string{"1", "2", "0"}) {
		t.Errorf("respawns after %v failures; want 1, 2, then 0 once a worker served steadily", got)
	}
}

func TestRecycleOfASteadyWorkerStartsTheBackoffOver(t *testing.T) {
	policy := testHeal
	policy.Steady = 300 * time.Millisecond
	h := newHealHarness(t, 2, map[int]string{1: faultCrashEverySecond}, policy, func(c *supervisorConfig) { c.MaxAge = 700 * time.Millisecond })
	h.start()
	kill(h.servingPIDs()[1]) // two failures: start 1 lost at once, start 2 crashes once ready
	// Start 3 serves steadily until it is recycled; its replacement,
	// start 4, crashes once ready: the slot's first failure since.
	m := h.waitLog(`msg="worker recycled" generation=1 worker=1 (?s:.*?)msg="worker respawning" generation=1 worker=1 delay=\S+ failures=(\d+)`)
	if m[1] != "1" {
		t.Errorf("the recycled worker's replacement crashed and the slot backs off after %s failures; want 1: a recycle of a steady worker starts the count over", m[1])
	}
}

func TestLossesOutsideTheWindowAreForgiven(t *testing.T) {
	policy := testHeal
	policy.MaxRestarts, policy.Window, policy.Steady = 2, time.Second, 50*time.Millisecond
	h := newHealHarness(t, 3, nil, policy)
	h.start()
	lose := func(slots ...int) {
		pids := h.servingPIDs()
		for _, i := range slots {
			kill(pids[i])
		}
		for _, i := range slots {
			h.waitLog(fmt.Sprintf(`msg="worker respawned" generation=1 worker=%d old_pid=%d`, i, pids[i]))
		}
	}
	time.Sleep(2 * policy.Steady)
	lose(0, 1) // the whole budget
	time.Sleep(policy.Window + 200*time.Millisecond)
	lose(1, 2) // the first two losses are out of the window
	if st := h.svc.state(); st.Ending {
		t.Fatalf("the service ends after 2 losses, a window, and 2 more, with -max-restarts 2: %v", h.svc.err)
	}
	kill(h.servingPIDs()[0]) // the third within the window: over the budget
	h.waitLog(`msg="giving up" generation=1 lost=3`)
}

func TestBackoffDoublesUpToItsCap(t *testing.T) {
	v := &Service{policy: healPolicy{Backoff: 100 * time.Millisecond, BackoffCap: time.Second}}
	for failures := range 70 {
		nominal := time.Duration(0)
		if failures > 0 {
			nominal = min(time.Second, 100*time.Millisecond<<min(failures-1, 20))
		}
		for range 20 {
			if d := v.backoff(failures); d < nominal*8/10 || d > nominal*12/10 {
				t.Fatalf("backoff(%d) = %v; want %v±20%%", failures, d, nominal)
			}
		}
	}
}

func TestFailedRecyclesLeaveTheOldWorkerServing(t *testing.T) {
	policy := testHeal
	policy.MaxRestarts = 2
	h := newHealHarness(t, 2, map[int]string{1: faultFailLater}, policy, func(c *supervisorConfig) { c.MaxAge = 100 * time.Millisecond })
	h.start()
	old := h.servingPIDs()[1]
	// Every replacement of slot 1 fails its App's start. Six failed
	// recycles are twice the budget that losses would have had.
	h.waitLog(strings.Repeat(`msg="worker recycle failed" generation=1 worker=1 (?s:.*)`, 5) +
		fmt.Sprintf(`msg="worker recycle failed" generation=1 worker=1 pid=%d failures=6 retry_in=\S+ err=`, old))
	if st := h.svc.state(); st.Ending || st.ServingPIDs[1] != old || gone(old) {
		t.Fatalf("after six failed recycles: state %+v; want slot 1's worker, pid %d, serving on: %v", st, old, h.svc.err)
	}
	getN(t, h.addr, 4)
	snap, err := h.svc.status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if snap.RecycleFailures < 6 || snap.RecycleFailing[1] < 6 || snap.Lost != 0 {
		t.Errorf("status: %d recycle failures, slot 1 failing %d in a row, %d lost; want at least 6, 6 and none lost",
			snap.RecycleFailures, snap.RecycleFailing[1], snap.Lost)
	}
	if strings.Contains(h.readLogs(), "giving up") {
		t.Error("the service gave up over failed recycles")
	}
}

// refuseSpawns makes the host refuse every new worker process while the
// returned flag is set, as fork does at ulimit -u (EAGAIN). Call it
// before the start.
func (h *serviceHarness) refuseSpawns() *atomic.Bool {
	refusing := new(atomic.Bool)
	command := h.sup.seam.command
	h.sup.seam.command = func(i int, args []string) (*exec.Cmd, error) {
		if refusing.Load() {
			return nil, &os.SyscallError{Syscall: "fork", Err: syscall.EAGAIN}
		}
		return command(i, args)
	}
	return refusing
}

func TestRefusedSpawnsKeepAServingServiceServingUntilTheHostHasRoom(t *testing.T) {
	policy := testHeal
	policy.MaxRestarts = 2
	h := newHealHarness(t, 2, nil, policy)
	refusing := h.refuseSpawns()
	h.start()
	refusing.Store(true)
	lost := h.servingPIDs()[1]
	kill(lost)
	// 30 s of refusals, far more than the budget allows, each a warning
	// (the test's backoff caps at 200 ms), while the worker left serves.
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if h.svc.state().Ending {
			t.Fatalf("the service ended while the host refused respawns:\n%s", h.readLogs())
		}
		if code, _, err := get(h.addr, "/"); err != nil || code != 200 {
			t.Fatalf("GET / = %d, %v while the host refused respawns; want 200 from the worker left", code, err)
		}
	}
	if n := strings.Count(h.readLogs(), `msg="worker respawn refused by the host"`); n < 5*policy.MaxRestarts {
		t.Fatalf("%d refusals in 30 s; want many more than the budget (%d)", n, policy.MaxRestarts)
	}
	refusing.Store(false)
	h.waitLog(fmt.Sprintf(`msg="worker respawned" generation=1 worker=1 old_pid=%d`, lost))
	if st := h.svc.state(); st.Ending {
		t.Errorf("state %+v after the host had room; want serving", st)
	}
	if snap, _ := h.svc.status(context.Background()); snap.SpawnRefusals < int64(5*policy.MaxRestarts) {
		t.Errorf("status counts %d refusals; want at least %d", snap.SpawnRefusals, 5*policy.MaxRestarts)
	}
	if strings.Contains(h.readLogs(), `msg="giving up"`) {
		t.Error("the refusals spent the budget")
	}
}

func TestRefusedSpawnsWithNoWorkerServingSpendTheBudget(t *testing.T) {
	policy := testHeal
	policy.MaxRestarts = 2
	h := newHealHarness(t, 1, nil, policy)
	refusing := h.refuseSpawns()
	h.start()
	refusing.Store(true)
	kill(h.servingPIDs()[0])
	h.waitLog(`msg="giving up"`)
}

func TestLossOfARecyclesReplacementIsRespawnedWhileTheOldWorkerDrains(t *testing.T) {
	// Worker 0 ignores its drain and SIGTERM: once recycled it lives
	// until the force deadline, 8 s on. Its replacement is lost at once;
	// the slot must not wait for the old one to go.
	h := newHealHarness(t, 2, map[int]string{0: faultStubborn}, testHeal, func(c *supervisorConfig) {
		c.MaxRequests = 10
		c.DrainTimeout, c.ForceTimeout = 5*time.Second, 8*time.Second
		c.Runtime.DrainTimeout = c.DrainTimeout
	})
	h.start()
	old := h.servingPIDs()[0]
	rx := regexp.MustCompile(fmt.Sprintf(`msg="worker recycling" generation=1 worker=0 pid=%d(?s:.*)msg=ready generation=1 worker=0 pid=(\d+)`, old))
	var m []string
	for deadline := time.Now().Add(30 * time.Second); m == nil; m = rx.FindStringSubmatch(h.readLogs()) {
		if time.Now().After(deadline) {
			t.Fatalf("worker 0 was not recycled after 30s of requests:\n%s", h.readLogs())
		}
		get(h.addr, "/")
	}
	replacement, _ := strconv.Atoi(m[1])
	for deadline := time.Now().Add(15 * time.Second); h.servingPIDs()[0] != replacement; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the replacement, pid %d, never took slot 0", replacement)
		}
	}
	kill(replacement)
	h.waitLog(fmt.Sprintf(`msg="worker respawned" generation=1 worker=0 old_pid=%d`, replacement))
	if gone(old) {
		t.Errorf("the old worker, pid %d, had gone before the respawn; the test proves nothing", old)
	}
}

func TestWorkerOverItsMemoryBoundAsItStartsBacksOff(t *testing.T) {
	policy := testHeal
	policy.Backoff, policy.BackoffCap = time.Second, 2*time.Second
	// 1 MiB, below what any worker needs: each is over it as it starts.
	h := newHealHarness(t, 1, nil, policy, func(c *supervisorConfig) { c.MaxMemory = 1 << 20 })
	h.start()
	h.waitLog(`msg="worker over -max-worker-memory as it started`)
	began := time.Now()
	h.waitLog(`msg="worker recycled"`)
	// Without the backoff a recycle follows each worker's start: a
	// dozen in the 4 s below. With it: one after 1 s, one 2 s later.
	time.Sleep(4 * time.Second)
	logs := h.readLogs()
	if n := strings.Count(logs, `msg="worker recycled"`); n > 3 {
		t.Errorf("%d recycles in %v of a bound below any worker's size; want the backoff between them", n, time.Since(began).Round(time.Millisecond))
	}
	if n := strings.Count(logs, `msg="worker over -max-worker-memory as it started`); n != 1 {
		t.Errorf("%d warnings; want one", n)
	}
}

func TestHungWorkerThatOutlivesItsKillIsRespawnedBesideIt(t *testing.T) {
	// SIGSTOPped, and its SIGKILL lost, as a process in uninterruptible
	// sleep (a hard NFS mount) cannot take it: it is never reaped.
	h := newHealHarness(t, 2, nil, testHeal, func(c *supervisorConfig) { c.WorkerTimeout = time.Second })
	var unkillable atomic.Int64
	h.signal = func(p *workerProc, sig os.Signal) error {
		if sig == syscall.SIGKILL && int64(p.pid) == unkillable.Load() {
			return nil
		}
		return signalWorkerGroup(p, sig)
	}
	h.start()
	stuck := h.servingPIDs()[0]
	unkillable.Store(int64(stuck))
	t.Cleanup(func() { kill(stuck) })
	pause(stuck)
	h.waitLog(fmt.Sprintf(`msg="worker outlived SIGKILL: stuck in the kernel; its slot is respawned beside it" generation=1 worker=0 pid=%d`, stuck))
	h.waitLog(fmt.Sprintf(`msg="worker respawned" generation=1 worker=0 old_pid=%d`, stuck))
	if gone(stuck) {
		t.Error("the stuck worker was reaped; the test proves nothing")
	}
}

func TestProbeAgesAreMeasuredOnTheMonotonicClock(t *testing.T) {
	// A wall-clock step (NTP, a resumed VM) must neither hide a hang nor
	// make one up: the probe's stamps are monotonic offsets from this
	// process's start, not Unix times.
	if now := monoNow(); now < 0 || now > int64(time.Since(monoBase))+int64(time.Second) {
		t.Fatalf("monoNow() = %d; want the time since the process began", now)
	}
	h := newHarness(t, 1, nil, func(c *supervisorConfig) { c.WorkerTimeout = time.Second })
	h.start()
	h.sup.askStats(time.Now().Add(-time.Second)) // a question no one waits for
	h.sup.mu.Lock()
	all := slices.Clone(h.sup.all)
	h.sup.mu.Unlock()
	for _, p := range all {
		if asked := p.askedAt.Load(); asked > int64(time.Since(monoBase)) {
			t.Errorf("askedAt = %d; want a monotonic offset no later than now (%d), not a Unix time", asked, int64(time.Since(monoBase)))
		}
	}
}
