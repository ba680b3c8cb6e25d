package main

// watch_test.go: a worker that hangs is found, its stacks logged, killed
// and respawned; a healthy one never is; one over its memory is recycled.

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startProbeWithStatus starts servery serving probeApp with args and its
// status listener, and returns it with the status listener's address.
func startProbeWithStatus(t *testing.T, args ...string) (*servery, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-addr", "127.0.0.1:0", "-status-addr", "127.0.0.1:0", "-marks", t.TempDir()}, args...)...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", appEnv+"=probe")
	s := launchServery(t, cmd)
	return s, statusRe.FindStringSubmatch(s.logs())[1]
}

func TestWorkerWhoseHealthCheckHangsIsKilledWithItsStacksAndRespawned(t *testing.T) {
	skipWithoutWorkers(t)
	s, addr := startProbeWithStatus(t, "-workers", "2", "-worker-timeout", "1s", "-health-fault", "hang-once", "-fault-worker", "1")
	m := regexp.MustCompile(`level=ERROR msg="worker hung" generation=1 worker=1 pid=(\d+) silent_for=\S+ timeout=1s inflight=\d+ memory=\d+`)
	var pid string
	for deadline := time.Now().Add(15 * time.Second); pid == ""; time.Sleep(10 * time.Millisecond) {
		if got := m.FindStringSubmatch(s.logs()); got != nil {
			pid = got[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no worker found hung within 15s:\n%s", s.logs())
		}
	}
	// SIGQUIT: the Go runtime writes every goroutine's stack, the stuck
	// health check's among them, and exits.
	waitLog(t, s, `SIGQUIT: quit(?s:.*)goroutine \d+ .*\[select \(no cases\)\]`)
	waitLog(t, s, `msg="worker respawned" generation=1 worker=1 old_pid=`+pid)
	getN(t, s.addr, 4)
	if n := scrape(t, addr)[`servery_worker_hangs_total{slot="1"}`]; n != 1 {
		t.Errorf("servery_worker_hangs_total{slot=\"1\"} = %v; want 1", n)
	}
	if strings.Contains(s.logs(), `msg="worker hung" generation=1 worker=0`) {
		t.Error("the healthy worker 0 was found hung")
	}
}

func TestStoppedWorkerIsFoundHungAndRespawned(t *testing.T) {
	skipWithoutWorkers(t)
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	s := startServery(t, "-dir", site, "-workers", "2", "-worker-timeout", "1s")
	pid := s.workerPIDs()[0]
	pause(pid) // stuck in the kernel, as far as anyone can tell
	waitLog(t, s, fmt.Sprintf(`msg="worker hung" generation=1 worker=0 pid=%d`, pid))
	// A stopped process takes no SIGQUIT: the kill after the grace ends it.
	waitLog(t, s, fmt.Sprintf(`msg="worker respawned" generation=1 worker=0 old_pid=%d`, pid))
	if !waitGone(pid, 5*time.Second) {
		t.Errorf("the hung worker, pid %d, still runs", pid)
	}
	getN(t, s.addr, 4)
}

func TestHealthyWorkersUnderLoadAreNeverFoundHung(t *testing.T) {
	skipWithoutWorkers(t)
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	s := startServery(t, "-dir", site, "-workers", "2", "-worker-timeout", "400ms")
	l := startLoad(t, s.addr, "/", 32)
	time.Sleep(3 * time.Second) // some thirty probes each, every 100 ms
	l.stopLoad()
	if strings.Contains(s.logs(), "worker hung") || l.ok.Load() == 0 {
		t.Errorf("%d requests answered; a healthy worker under load was found hung:\n%s", l.ok.Load(), s.logs())
	}
}

func TestWorkerOverItsMemoryIsRecycled(t *testing.T) {
	skipWithoutWorkers(t)
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	// Every worker is over 1 MiB from its start: recycled, one at a time,
	// for as long as it runs.
	s, addr := startWithStatus(t, "-dir", site, "-workers", "2", "-max-worker-memory", "1MiB")
	waitLog(t, s, `msg="worker recycled" generation=1`)
	logs := s.logs()
	if !regexp.MustCompile(`msg="worker at its limit, asking to be recycled" .*reason="resident memory \d+ MiB, over its -max-worker-memory 1 MiB"`).MatchString(logs) {
		t.Errorf("no recycle at the memory limit in the log:\n%s", logs)
	}
	if n := scrape(t, addr)[`servery_worker_recycles_total{limit="memory"}`]; n < 1 {
		t.Errorf(`servery_worker_recycles_total{limit="memory"} = %v; want at least 1`, n)
	}
	// Each worker runs with a Go memory limit a tenth below the bound.
	env, err := os.ReadFile("/proc/" + strconv.Itoa(s.workerPIDs()[0]) + "/environ")
	if err == nil && !strings.Contains(string(env), "GOMEMLIMIT=943719B") {
		t.Errorf("worker environment lacks GOMEMLIMIT=943719B: %q", env)
	}
	getN(t, s.addr, 4)
}
