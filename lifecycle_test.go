package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The tests of the lifecycle loop's decisions (lifecycle.go), one per
// defect the single owner removed, each failing on the layered code it
// replaced.

// holdNewGenerationsAtReady makes every worker of a generation started
// from now on hold its ready message, committed and accepting, until the
// returned release removes the gate.
func holdNewGenerationsAtReady(t *testing.T) (gate string) {
	t.Helper()
	gate = filepath.Join(t.TempDir(), "gate")
	t.Setenv(gateEnv, gate)
	t.Setenv(faultEnv, faultHeldReady)
	return gate
}

func closeGate(t *testing.T, gate string) {
	t.Helper()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestStopDuringAReloadsCommitEndsByTheForceDeadline(t *testing.T) {
	skipWithoutWorkers(t)
	for _, signals := range []int{1, 2} {
		t.Run(fmt.Sprintf("signals=%d", signals), func(t *testing.T) {
			gate := holdNewGenerationsAtReady(t)
			ns := newNotifySocket(t)
			s, marks := startProbeServery(t, ns, "-workers", "2", "-slow", "20s",
				"-drain-timeout", "3s", "-force-timeout", "4s")
			go get(s.addr, "/slow") // keeps a worker of generation 1 draining
			waitMark(t, marks, "slow-begun-")
			closeGate(t, gate)
			s.signal(syscall.SIGHUP)
			waitLog(t, s, `msg="holding ready"`) // generation 2 committed, not ready
			began := time.Now()
			s.signal(syscall.SIGTERM)
			// The serving generation is told to drain when the stop begins,
			// not once the reload's rollback is over.
			waitLogWithin(t, s, `msg="worker draining"[^\n]* generation=1`, time.Second)
			if signals == 2 {
				s.signal(syscall.SIGTERM)
				// Every generation's drain is skipped: the rolling-back one's
				// too, whose held workers are terminated at once.
				for _, g := range []string{"1", "2"} {
					waitLogWithin(t, s, `msg="worker outlived deadline" generation=`+g+` [^\n]*action=terminate`, time.Second)
				}
			}
			s.wait(15 * time.Second)
			if took := time.Since(began); took > 5*time.Second {
				t.Errorf("the stop took %v; want it ended within -force-timeout 4s plus a second", took.Round(time.Millisecond))
			}
			s.assertNoWorkersLeft()
		})
	}
}

// waitMark waits until a marker whose name starts with prefix exists.
func waitMark(t *testing.T, marks, prefix string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		matches, _ := filepath.Glob(filepath.Join(marks, prefix+"*"))
		if len(matches) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no mark %s* after 10s", prefix)
		}
	}
}

// waitLogWithin waits up to within for servery's log to match re.
func waitLogWithin(t *testing.T, s *servery, re string, within time.Duration) {
	t.Helper()
	rx := regexp.MustCompile(re)
	for deadline := time.Now().Add(within); !rx.MatchString(s.logs()); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("log did not match %s within %v:\n%s", re, within, s.logs())
		}
	}
}

func TestDirectSignalDuringTheFirstStartIsACleanStop(t *testing.T) {
	marks := t.TempDir()
	cmd := execServery(t, "-marks", marks, "-workers", "1", "-start-fault", "wait", "-startup-timeout", "20s")
	s := spawnServery(t, cmd)
	waitMark(t, marks, "identity-0-of-1-gen-1")
	began := time.Now()
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Errorf("exit status %d after SIGTERM during the App's start; want 0, a clean stop", code)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("the stop took %v; want it prompt, not at -startup-timeout", took.Round(time.Millisecond))
	}
	// The mark's content may be cut short by the exit; it is there.
	if _, err := os.Stat(filepath.Join(marks, "start-cancelled-0")); err != nil {
		t.Errorf("the App's start context was not cancelled: %v", err)
	}
	if !strings.Contains(s.logs(), `msg="stopped during startup"`) {
		t.Errorf("want the stop during startup logged:\n%s", s.logs())
	}
}

// execServery is servery's main serving probeApp with args, unstarted.
func execServery(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", appEnv+"=probe")
	return cmd
}

func TestSignalDuringARollbackAfterCommitWithAFailedAppStopExitsOne(t *testing.T) {
	skipWithoutWorkers(t)
	gate := holdNewGenerationsAtReady(t)
	closeGate(t, gate) // the first generation is held at ready too
	cmd := execServery(t, "-marks", t.TempDir(), "-workers", "2", "-stop-fault", "fail",
		"-drain-timeout", "2s", "-force-timeout", "3s")
	s := spawnServery(t, cmd)
	waitLog(t, s, `msg="holding ready"`)
	s.signal(syscall.SIGTERM)
	waitLog(t, s, `msg="startup failed, rolling back"`)
	os.Remove(gate) // the committed workers drain, and their App's stop fails
	if code := s.wait(10 * time.Second); code != exitFailure {
		t.Errorf("exit status %d; want %d: an App's stop step failed", code, exitFailure)
	}
	s.assertNoWorkersLeft()
}

func TestAppStopFailureOfAReplacedGenerationFailsTheExit(t *testing.T) {
	inBothModes(t, func(t *testing.T, workers string) {
		ns := newNotifySocket(t)
		s, _ := startProbeServery(t, ns, "-workers", workers, "-stop-fault", "fail", "-stop-fault-generation", "1")
		s.signal(syscall.SIGHUP)
		waitLog(t, s, `msg="retired generation ended with error" generation=1`)
		s.signal(syscall.SIGTERM)
		if code := s.wait(10 * time.Second); code != exitFailure {
			t.Errorf("exit status %d; want %d: the replaced generation's App stop failed", code, exitFailure)
		}
		status := false
		for _, d := range ns.until(s) {
			status = status || strings.Contains(d, "retired generation 1 failed")
		}
		if !status {
			t.Error("no STATUS= told the service manager that the retired generation failed")
		}
	})
}

func TestServingWorkerLostAsAPromotionSlipsInEndsTheService(t *testing.T) {
	h := newServiceHarness(t, 2, nil)
	h.svc.policy.MaxRestarts = 0 // the fixed generation
	var lostPID atomic.Int64
	// Generation 1 loses a worker as generation 2 starts, and its report
	// is held until generation 2 has been promoted: the loss happened
	// while generation 1 served, and must not be dropped now that it
	// retires.
	base := h.svc.log.Handler()
	h.svc.log = slog.New(onMessage{Handler: onMessage{Handler: base, msg: "generation starting", hook: func() {
		if pid := lostPID.Swap(0); pid != 0 {
			killGroup(int(pid))
		}
	}}, msg: "worker lost", hook: func() {
		// Held until generation 2 serves, and then for as long as
		// generation 1's stop could take to end, were it not to wait for
		// this report: two seconds, or until it is logged as retired.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if strings.Contains(h.readLogs(), "msg=reloaded") {
				break
			}
		}
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if strings.Contains(h.readLogs(), `msg="generation retired" generation=1`) {
				return
			}
		}
	}})
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pid := h.servingPIDs()[0]
	lostPID.Store(int64(pid))
	h.svc.Reload(context.Background())
	select {
	case <-h.svc.done:
	case <-time.After(15 * time.Second):
		t.Fatal("the service never ended after its serving generation lost a worker; the loss was dropped")
	}
	if err := h.svc.err; err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", pid)) {
		t.Errorf("the service ended with %v; want the lost worker (pid %d) named", err, pid)
	}
}

func TestTicketKeyRotationLineNamesTheGeneration(t *testing.T) {
	h := newServiceHarness(t, 1, nil)
	h.shareTicketKeys()
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.svc.rotateTicketKeys()
	if !regexp.MustCompile(`msg="ticket keys rotated" generation=1`).MatchString(h.readLogs()) {
		t.Errorf("the rotation's line does not name the serving generation:\n%s", h.readLogs())
	}
}

func TestNotificationsStayOneAssignmentPerLine(t *testing.T) {
	inBothModes(t, func(t *testing.T, workers string) {
		ns := newNotifySocket(t)
		// The reload fails with an error of two lines (errors.Join).
		s, _ := startProbeServery(t, ns, "-workers", workers, "-start-fault", "fail-lines", "-fault-generation", "2")
		s.signal(syscall.SIGHUP)
		waitLog(t, s, `msg="reload failed, still serving"`)
		s.signal(syscall.SIGTERM)
		s.wait(10 * time.Second)
		assignment := regexp.MustCompile(`^(READY|RELOADING|STOPPING|STATUS|MONOTONIC_USEC)=`)
		sawStatus := false
		for _, d := range ns.until(s) {
			for _, line := range strings.Split(strings.TrimSuffix(d, "\n"), "\n") {
				if !assignment.MatchString(line) {
					t.Errorf("notification %q has a line %q that is no assignment", d, line)
				}
				// README's wording: STATUS=reload failed, generation N still serving: ...
				sawStatus = sawStatus || strings.HasPrefix(line, "STATUS=reload failed, generation 1 still serving: ") &&
					strings.Contains(line, "no database") && strings.Contains(line, "no cache")
			}
		}
		if !sawStatus {
			t.Error("no STATUS=reload failed, generation 1 still serving: carried both lines of the reload's error")
		}
	})
}

// heldStart is a generation whose Start, once it has succeeded, waits
// for hold before it reports: run learns that it is ready only then.
type heldStart struct {
	generation
	hold chan struct{}
}

func (g *heldStart) Start(ctx context.Context) error {
	err := g.generation.Start(ctx)
	<-g.hold
	return err
}

func TestDirectGenerationReadyAsTheEndBeganStopsByTheForceDeadline(t *testing.T) {
	// Generation 2's App.Start succeeds, and the stop begins before run
	// sees it ready; its App.Stop never returns. The stop must still end
	// by the force deadline, and the failed stop step fail the service.
	app := App{
		Start: func(_ context.Context, w Worker) (http.Handler, error) {
			if w.Generation == 2 {
				return stopHangs{}, nil
			}
			return http.NotFoundHandler(), nil
		},
		Stop: func(_ context.Context, h http.Handler) error {
			if _, ok := h.(stopHangs); ok {
				select {} // ignores ctx
			}
			return nil
		},
	}
	rt, ln, log := directTestRuntime(t, app, 500*time.Millisecond, time.Second)
	hold := make(chan struct{})
	svc := newService(ln, log, 1, func(n, _ int, keys [][]byte, r reports) generation {
		gen := rt.generation(n, 1, keys, r)
		if n == 2 {
			return &heldStart{generation: gen, hold: hold}
		}
		return gen
	})
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	go svc.Reload(context.Background())
	for svc.state().Starting != 2 {
		time.Sleep(time.Millisecond)
	}
	stopped := make(chan error, 1)
	began := time.Now()
	go func() { stopped <- svc.Stop(context.Background()) }()
	for !svc.state().Ending {
		time.Sleep(time.Millisecond)
	}
	close(hold)
	select {
	case err := <-stopped:
		if took := time.Since(began); took > 2*time.Second || !errors.Is(err, errAppStop) {
			t.Errorf("Stop = %v after %v; want the App stop failure, within the force deadline (1s) and a second", err, took.Round(time.Millisecond))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stop never ended: the never-served generation's App stop held it")
	}
}

func TestDirectServerLostAsAReloadPromotesEndsTheService(t *testing.T) {
	// The server fails as generation 2 is promoted: its loss reaches the
	// loop as generation 1's, which is retiring (its App.Stop held).
	release := make(chan struct{})
	app := App{
		Start: func(context.Context, Worker) (http.Handler, error) { return http.NotFoundHandler(), nil },
		Stop: func(_ context.Context, h http.Handler) error {
			<-release
			return nil
		},
	}
	rt, ln, log := directTestRuntime(t, app, 5*time.Second, 10*time.Second)
	var first reports
	svc := newService(ln, log, 1, func(n, _ int, keys [][]byte, r reports) generation {
		if n == 1 {
			first = r
		}
		return rt.generation(n, 1, keys, r)
	})
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := svc.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := svc.state(); st.Serving != 2 || st.Retiring != 1 {
		t.Fatalf("state %+v; want generation 2 serving and 1 retiring", st)
	}
	lost := errors.New("accept tcp: permanent failure")
	first.lost(lost)
	for deadline := time.Now().Add(5 * time.Second); !svc.state().Ending; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("direct mode's server was lost and the service went on: nothing accepts")
		}
	}
	release <- struct{}{} // generation 1's stop step, then generation 2's
	release <- struct{}{}
	<-svc.done
	if !errors.Is(svc.err, lost) {
		t.Errorf("the service ended with %v; want the lost server's error", svc.err)
	}
}

func TestShutdownDelayCutsAReloadShortAndRefusesTheQueued(t *testing.T) {
	skipWithoutWorkers(t)
	gate := filepath.Join(t.TempDir(), "gate")
	t.Setenv(gateEnv, gate)
	h := newServiceHarness(t, 2, nil)
	h.later = map[int]map[int]string{2: {0: faultHeldPrepared, 1: faultHeldPrepared}}
	var mu sync.Mutex
	var sent []string
	h.svc.notify = func(states ...string) {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, strings.Join(states, " "))
	}
	h.start()
	closeGate(t, gate) // generation 2 holds at prepared
	running, queued := make(chan error, 1), make(chan error, 1)
	go func() { running <- h.svc.Reload(context.Background()) }()
	for h.svc.state().Starting != 2 {
		time.Sleep(time.Millisecond)
	}
	go func() { queued <- h.svc.Reload(context.Background()) }()
	time.Sleep(50 * time.Millisecond) // queued behind the one running
	h.svc.leave()
	select {
	case err := <-queued:
		if !errors.Is(err, errNotServing) {
			t.Errorf("the queued reload = %v; want %v", err, errNotServing)
		}
	case <-time.After(2 * time.Second):
		t.Error("the queued reload's caller still waits once the shutdown delay began")
	}
	// The reload under way is rolled back at once: its workers, held at
	// prepared and deaf to SIGTERM, are killed at the force deadline
	// (4 s), not left to the startup timeout (10 s).
	select {
	case err := <-running:
		if err == nil {
			t.Error("the reload under way as the shutdown delay began served")
		}
	case <-time.After(7 * time.Second):
		t.Error("the reload under way as the shutdown delay began was not cut short")
		os.Remove(gate)
		<-running
	}
	os.Remove(gate)
	mu.Lock()
	defer mu.Unlock()
	stopping := slices.IndexFunc(sent, func(s string) bool { return strings.Contains(s, "STOPPING=1") })
	if stopping < 0 {
		t.Fatalf("no STOPPING=1 among %q", sent)
	}
	for _, s := range sent[stopping:] {
		if strings.Contains(s, "READY=1") {
			t.Errorf("READY=1 after STOPPING=1: %q", sent)
		}
	}
}

// loopHeldAtReady is a generation whose Start, once it has succeeded,
// holds the lifecycle loop (an evState whose answer nobody reads until
// the test does) before it returns: run then takes its return first and
// whatever comes after it later, in order.
type loopHeldAtReady struct {
	generation
	svc  *Service
	hold chan lifeState
}

func (g *loopHeldAtReady) Start(ctx context.Context) error {
	err := g.generation.Start(ctx)
	g.svc.inbox <- evState{reply: g.hold}
	return err
}

func TestWorkerLostAfterStartBeforePromotionFailsTheReload(t *testing.T) {
	skipWithoutWorkers(t)
	// The fixed generation: a serving worker's loss would end the service.
	h := newServiceHarness(t, 2, nil)
	h.svc.policy.MaxRestarts = 0
	// Generation 2's worker 0 breaks the protocol a second after its
	// ready, once the whole generation is surely ready.
	h.later = map[int]map[int]string{2: {0: faultBadAfterReady}}
	hold := make(chan lifeState)
	h.wrap = func(gen *Supervisor, r reports) generation {
		if gen.number() == 2 {
			return &loopHeldAtReady{generation: gen, svc: h.svc, hold: hold}
		}
		return gen
	}
	h.start()
	reloaded := make(chan error, 1)
	go func() { reloaded <- h.svc.Reload(context.Background()) }()
	// Generation 2's Start has returned, and run waits to take it; its
	// worker 0 is lost meanwhile, and that report waits behind it.
	h.waitLog(`msg="worker lost" generation=2 worker=0`)
	time.Sleep(50 * time.Millisecond)
	<-hold
	if err := <-reloaded; err == nil || !strings.Contains(err.Error(), "lost a worker before serving") {
		t.Errorf("Reload = %v; want the reload failed: its worker was lost before it served", err)
	}
	if st := h.svc.state(); st.Ending || st.Serving != 1 {
		t.Errorf("state %+v; want generation 1 serving on, the service not ending", st)
	}
}

// directTestRuntime is direct mode's runtime for app on a fresh
// listener, with the given drain and force timeouts and a silent log.
func directTestRuntime(t *testing.T, app App, drain, force time.Duration) (*directRuntime, net.Listener, *slog.Logger) {
	t.Helper()
	cfg := &config{Workers: 1, StartupTimeout: 5 * time.Second, ForceTimeout: force,
		Runtime: runtimeConfig{HeaderTimeout: time.Second, IdleTimeout: time.Second, DrainTimeout: drain}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := newDirectRuntime(cfg, app, ln, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rt, ln, log
}

// stopHangs is a handler whose App.Stop never returns.
type stopHangs struct{ http.Handler }

func TestReloadRolledBackWithAFailedAppStopFailsTheExit(t *testing.T) {
	skipWithoutWorkers(t)
	gate := holdNewGenerationsAtReady(t)
	ns := newNotifySocket(t)
	s, _ := startProbeServery(t, ns, "-workers", "2", "-startup-timeout", "1s",
		"-stop-fault", "fail", "-stop-fault-generation", "2")
	closeGate(t, gate)
	s.signal(syscall.SIGHUP)
	waitLog(t, s, `msg="startup failed, rolling back" generation=2`) // held at ready past the timeout
	os.Remove(gate)                                                  // its committed workers drain, and their App's stop fails
	waitLog(t, s, `msg="reload failed, still serving" generation=2`)
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitFailure {
		t.Errorf("exit status %d; want %d: the rolled-back generation's App stop failed", code, exitFailure)
	}
	s.assertNoWorkersLeft()
}

// inBothModes runs test as a subtest in direct mode (-workers 1) and with
// two workers, where workers can be started.
func inBothModes(t *testing.T, test func(t *testing.T, workers string)) {
	for _, workers := range []string{"1", "2"} {
		t.Run("workers="+workers, func(t *testing.T) {
			if workers != "1" {
				skipWithoutWorkers(t)
			}
			test(t, workers)
		})
	}
}

func TestReloadWaitsForARetiringGenerationSoAtMostTwoLive(t *testing.T) {
	// Generation 1 retires with a slow request still in flight; a second
	// reload asked for meanwhile must wait until generation 1 is gone.
	t.Setenv(appEnv, "probe")
	marks := t.TempDir()
	h := newServiceHarness(t, 2, nil, func(c *supervisorConfig) {
		c.Args = []string{"-marks", marks, "-slow", "1500ms"}
		c.DrainTimeout, c.ForceTimeout = 5*time.Second, 8*time.Second
		c.Runtime.DrainTimeout = c.DrainTimeout
	})
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	go get(h.addr, "/slow")
	waitMark(t, marks, "slow-begun-")
	if err := h.svc.Reload(context.Background()); err != nil {
		t.Fatalf("first Reload = %v", err)
	}
	second := make(chan error, 1)
	go func() { second <- h.svc.Reload(context.Background()) }()
	most := 0
	for done := false; !done; {
		select {
		case err := <-second:
			if err != nil {
				t.Fatalf("second Reload = %v", err)
			}
			done = true
		case <-time.After(5 * time.Millisecond):
		}
		most = max(most, h.liveGenerations())
	}
	if most > 2 {
		t.Errorf("%d generations had live workers at once; want at most 2", most)
	}
	if !strings.Contains(h.readLogs(), `msg="reload waits for the retiring generation" generation=1`) {
		t.Errorf("the second reload did not wait for generation 1:\n%s", h.readLogs())
	}
}
