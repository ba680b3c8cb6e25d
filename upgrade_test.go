//go:build unix

package main

// upgrade_test.go: the parent upgrades itself in place (upgrade.go,
// handover.go): the pid stays, nothing is refused or cut, sessions
// resume, counters go on, and each way it can fail leaves the old code
// serving.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// upgradeTo signals SIGUSR2 and waits until the upgrade's reload has
// made generation n serve.
func upgradeTo(t *testing.T, s *servery, n int) {
	t.Helper()
	s.signal(syscall.SIGUSR2)
	reloaded := regexp.MustCompile(`msg=reloaded generation=` + strconv.Itoa(n) + ` `)
	for deadline := time.Now().Add(time.Minute); !reloaded.MatchString(s.logs()); time.Sleep(5 * time.Millisecond) {
		select {
		case <-s.exited:
			t.Fatalf("servery exited during the upgrade to generation %d", n)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("generation %d did not serve within a minute of SIGUSR2", n)
		}
	}
}

func TestTwentyUpgradesUnderLoadKeepThePidAndFailNothing(t *testing.T) {
	ns := newNotifySocket(t)
	s, _ := startProbeServery(t, ns, "-workers", "2", "-status-addr", "127.0.0.1:0")
	status := statusRe.FindStringSubmatch(s.logs())[1]
	pid := s.cmd.Process.Pid
	w := &counterWatch{t: t, addr: status}
	w.scrape()
	l := startLoad(t, s.addr, "/", 32)
	for i := range 20 {
		waitAnswered(t, l, l.ok.Load()+50)
		upgradeTo(t, s, i+2)
		w.scrape()
	}
	waitAnswered(t, l, l.ok.Load()+50)
	l.stopLoad()
	if l.truncated.Load()+l.refused.Load()+l.other.Load()+l.retried.Load() != 0 {
		first := ""
		if p := l.firstErr.Load(); p != nil {
			first = *p
		}
		t.Errorf("20 upgrades under 32 keep-alive clients: %d complete, %d truncated, %d refused, %d other, %d met a closed keep-alive connection (first: %s); want none",
			l.ok.Load(), l.truncated.Load(), l.refused.Load(), l.other.Load(), l.retried.Load(), first)
	}
	if n := strings.Count(s.logs(), "msg=upgraded "); n != 20 {
		t.Errorf("%d upgraded lines; want 20", n)
	}
	doc := readStatus(t, status)
	if doc.PID != pid || doc.Generation != 21 {
		t.Errorf("/status after 20 upgrades: pid %d, generation %d; want pid %d (the same process), generation 21", doc.PID, doc.Generation, pid)
	}
	scrapeUntilCounted(t, w.scrape, float64(l.ok.Load()))
	s.signal(syscall.SIGTERM)
	if code := s.wait(time.Minute); code != exitOK {
		t.Errorf("exit status %d after the upgrades; want 0", code)
	}
	s.assertNoWorkersLeft()
	for _, d := range ns.until(s) {
		if strings.Contains(d, "MAINPID=") && !strings.Contains(d, "MAINPID="+strconv.Itoa(pid)) {
			t.Errorf("notified %q; the main pid is %d throughout", d, pid)
		}
	}
	t.Logf("%d requests complete across 20 upgrades", l.ok.Load())
}

func TestAHundredUpgradesResumeSessionsAndLeaveNoDescriptorBehind(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc here to count descriptors by")
	}
	s, status := startWithStatus(t, "-dir", t.TempDir(), "-workers", "2", "-tls-self-signed")
	pid := s.cmd.Process.Pid
	cache := &frozenSessionCache{}
	resume(t, s.addr, cache, tls.VersionTLS13, 1) // a full handshake; its ticket is kept
	resumed := 0
	var fds1, threads1, goroutines1 int
	for i := 1; i <= 100; i++ {
		upgradeTo(t, s, i+1)
		// Counted once the generation it replaced has gone, with all it held.
		waitLogWithin(t, s, fmt.Sprintf(`msg="generation retired" generation=%d\b`, i), time.Minute)
		if i == 1 {
			fds1, threads1, goroutines1 = descriptors(t, pid), threads(t, pid), readStatus(t, status).Goroutines
		}
		resumed += resume(t, s.addr, cache, tls.VersionTLS13, 1).resumed
	}
	if resumed < 99 {
		t.Errorf("%d of 100 connections, each after an upgrade, resumed the first session; want at least 99 (the ticket keys are handed over)", resumed)
	}
	fds100, threads100, goroutines100 := descriptors(t, pid), threads(t, pid), readStatus(t, status).Goroutines
	if goroutines100 > goroutines1+2 {
		t.Errorf("the parent runs %d goroutines after 100 upgrades, %d after 1; want about the same", goroutines100, goroutines1)
	}
	if fds100 != fds1 {
		t.Errorf("the parent holds %d descriptors after 100 upgrades, %d after 1; want the same", fds100, fds1)
	}
	// Each image's threads are its own, from its exec on: a leak could
	// only be within one image, which the exec ends.
	if threads100 > threads1+2 {
		t.Errorf("the parent runs %d threads after 100 upgrades, %d after 1; want about the same", threads100, threads1)
	}
	t.Logf("after 1 upgrade: %d descriptors, %d threads, %d goroutines; after 100: %d, %d, %d; %d of 100 sessions resumed",
		fds1, threads1, goroutines1, fds100, threads100, goroutines100, resumed)
}

// descriptors counts the open descriptors of process pid.
func descriptors(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// threads counts the threads of process pid.
func threads(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Threads:\s+(\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no Threads line in /proc/%d/status", pid)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func TestUpgradeWhoseCheckFailsLeavesTheOldCodeServing(t *testing.T) {
	t.Setenv(checkFaultEnv, "1") // the executable answers another handover version
	ns := newNotifySocket(t)
	s, _ := startProbeServery(t, ns, "-workers", "2")
	s.signal(syscall.SIGUSR2)
	waitLog(t, s, `level=ERROR msg="upgrade failed, still serving" generation=1 err="upgrade: check .*handover 99`)
	if code, _, err := get(s.addr, "/"); err != nil || code == 0 {
		t.Errorf("GET / after the failed upgrade: %d, %v; want an answer", code, err)
	}
	if strings.Contains(s.logs(), "upgrading: exec") {
		t.Errorf("the executable failed its check, yet the old image execed it")
	}
	// The old image goes on deciding: a reload still works.
	s.signal(syscall.SIGHUP)
	waitLog(t, s, `msg=reloaded generation=2 `)
	s.signal(syscall.SIGTERM)
	s.wait(time.Minute)
	status := false
	for _, d := range ns.until(s) {
		status = status || strings.Contains(d, "STATUS=upgrade failed, generation 1 still serving: upgrade: check ")
	}
	if !status {
		t.Errorf("no STATUS=upgrade failed, generation 1 still serving: ... was sent to the service manager")
	}
}

func TestUpgradeWhoseExecFailsLeavesTheOldCodeServing(t *testing.T) {
	// The worker timeout bounds the health check that gates a stats
	// answer: without one, no question is answered.
	h := newServiceHarness(t, 2, nil, func(c *supervisorConfig) { c.WorkerTimeout = time.Minute })
	h.svc.upgrades = &upgrader{args: []string{"-workers", "2", "-dir", t.TempDir()}, exec: func(string, *handover, handoverFiles) error {
		return errors.New("injected exec failure")
	}}
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.svc.Upgrade(ctx); err == nil || !strings.Contains(err.Error(), "injected exec failure") {
		t.Fatalf("Upgrade with an exec that fails = %v; want its error", err)
	}
	// The workers write again: each answers a stats question, and
	// drains and says done at the stop, which is then clean.
	sup := h.gens[0]
	sup.askStats(time.Now().Add(30 * time.Second))
	for _, p := range sup.procs {
		if p.askedAt.Load() != 0 {
			t.Errorf("worker %d did not answer a stats question after the failed upgrade: its lines are still held", p.index)
		}
	}
	if err := h.svc.Reload(ctx); err != nil {
		t.Errorf("Reload after the failed upgrade: %v", err)
	}
	if err := h.svc.Stop(ctx); err != nil {
		t.Errorf("Stop after the failed upgrade: %v; want a clean stop", err)
	}
}

func TestUpgradeWhoseNewGenerationFailsLeavesTheAdoptedOneServing(t *testing.T) {
	ns := newNotifySocket(t)
	s, _ := startProbeServery(t, ns, "-workers", "2", "-start-fault", "fail", "-fault-generation", "2")
	pid := s.cmd.Process.Pid
	s.signal(syscall.SIGUSR2)
	waitLog(t, s, `msg=upgraded generation=1 pid=`+strconv.Itoa(pid)+` `)
	waitLog(t, s, `level=ERROR msg="reload failed, still serving" generation=2 serving=1 `)
	if code, body, err := get(s.addr, "/"); err != nil || code != 200 {
		t.Errorf("GET / after the upgrade's reload failed: %d %q, %v; want an answer from generation 1, adopted", code, body, err)
	}
	s.signal(syscall.SIGTERM)
	if code := s.wait(time.Minute); code != exitOK {
		t.Errorf("exit status %d; want 0", code)
	}
	s.assertNoWorkersLeft()
}

func TestSIGTERMDuringAnUpgradeExitsZeroLeavingNothing(t *testing.T) {
	s := startServery(t, "-dir", t.TempDir(), "-workers", "2")
	s.signal(syscall.SIGUSR2)
	// The new image has taken over and its reload runs: SIGTERM rolls
	// the reload back and stops the adopted generation.
	waitLog(t, s, `msg=upgraded generation=1 `)
	s.signal(syscall.SIGTERM)
	if code := s.wait(time.Minute); code != exitOK {
		t.Errorf("exit status %d after SIGTERM during the upgrade; want 0", code)
	}
	s.assertNoWorkersLeft()
}

func TestSIGTERMWhileTheNewExecutableIsCheckedExitsZeroWithoutExec(t *testing.T) {
	t.Setenv(checkFaultEnv, "slow") // the check takes 3 s
	s := startServery(t, "-dir", t.TempDir(), "-workers", "2")
	s.signal(syscall.SIGUSR2)
	waitLog(t, s, `msg="upgrade requested" generation=1`)
	s.signal(syscall.SIGTERM)
	if code := s.wait(time.Minute); code != exitOK {
		t.Errorf("exit status %d after SIGTERM during the check; want 0", code)
	}
	s.assertNoWorkersLeft()
	if strings.Contains(s.logs(), "upgrading: exec") {
		t.Errorf("the stop came first, yet the upgrade execed")
	}
}

func TestUpgradesAskedForDuringAnUpgradeOrAReloadAreOne(t *testing.T) {
	t.Setenv(checkFaultEnv, "slow") // each check takes 3 s: the signals land during it
	s := startServery(t, "-dir", t.TempDir(), "-workers", "2")
	s.signal(syscall.SIGUSR2)
	waitLog(t, s, `msg="upgrade requested" generation=1`)
	s.signal(syscall.SIGUSR2)
	s.signal(syscall.SIGHUP) // a reload meanwhile: the exec waits until it has served
	waitLog(t, s, `msg=reloaded generation=2 `)
	upgraded := regexp.MustCompile(`msg=upgraded generation=2 `)
	for deadline := time.Now().Add(time.Minute); !upgraded.MatchString(s.logs()); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no upgrade of generation 2 within a minute")
		}
	}
	waitLog(t, s, `msg=reloaded generation=3 `)
	if n := strings.Count(s.logs(), "msg=upgraded "); n != 1 {
		t.Errorf("%d upgrades for two SIGUSR2s and a SIGHUP during the first; want 1", n)
	}
	if n := strings.Count(s.logs(), `msg="upgrade requested"`); n != 1 {
		t.Errorf("%d upgrade requested lines; want 1: the second signal joins the first", n)
	}
}

func TestScaledCountHoldsAcrossAnUpgrade(t *testing.T) {
	s, status := startWithStatus(t, "-dir", t.TempDir(), "-workers", "2")
	s.signal(sigMore)
	waitLog(t, s, `msg="worker added" generation=1 `)
	upgradeTo(t, s, 2)
	waitLog(t, s, `msg="generation starting" generation=2 workers=3 `)
	if doc := readStatus(t, status); doc.Workers != 3 || doc.WorkersTarget != 3 || len(doc.Slots) != 3 {
		t.Errorf("/status after scaling to 3 and an upgrade: workers %d, target %d, %d slots; want 3, 3, 3", doc.Workers, doc.WorkersTarget, len(doc.Slots))
	}
}

func TestSIGUSR2InDirectModeSaysItCannotAndServesOn(t *testing.T) {
	s := startServery(t, "-dir", t.TempDir(), "-workers", "1")
	s.signal(syscall.SIGUSR2) // nginx's and gunicorn's upgrade
	waitLog(t, s, `level=WARN msg="upgrade ignored" generation=1 err="upgrade: direct mode \(-workers 1\) serves its connections in this process`)
	if code, _, err := get(s.addr, "/"); err != nil || code == 0 {
		t.Errorf("GET / after SIGUSR2: %d, %v; want an answer", code, err)
	}
}
