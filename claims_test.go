package main

// claims_test.go: claims of the docs that nothing else tested: the
// shutdown delay's notifications and signals, the probes' answers while
// starting and when the loop does not answer, a silent worker's counts,
// the recycle jitter and the ticket keys' rotation period.

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestControlStopRunsTheShutdownDelayAndSaysStoppingOnce(t *testing.T) {
	skipWithoutWorkers(t)
	ns := newNotifySocket(t)
	// The program reloads once through its Control, then stops itself.
	s, _ := startProbeServery(t, ns, "-workers", "2", "-parent-reloads", "1", "-shutdown-delay", "1s")
	if code := s.wait(15 * time.Second); code != exitOK {
		t.Fatalf("exit status %d; want 0", code)
	}
	logs := s.logs()
	stop, delay := strings.Index(logs, `msg="stop requested" by=program`), strings.Index(logs, `msg="shutdown delay: not ready, serving on" delay=1s`)
	if stop < 0 || delay < stop || !strings.Contains(logs, `msg="shutdown delay over"`) {
		t.Errorf("want Control.Stop to begin the shutdown delay, and the delay to run out:\n%s", logs)
	}
	got := ns.until(s)
	stopping := 0
	for i, d := range got {
		if strings.Contains(d, "STOPPING=1") {
			stopping++
			if !strings.Contains(d, "shutdown delay") {
				t.Errorf("notification %d %q: want STOPPING=1 sent as the delay begins, with its STATUS", i, d)
			}
		}
	}
	if stopping != 1 {
		t.Errorf("%d notifications with STOPPING=1 in %q; want exactly one, as the delay begins", stopping, got)
	}
}

func TestThirdSignalSkipsTheDrainAfterTheDelay(t *testing.T) {
	skipWithoutWorkers(t)
	dir, _ := siteWithBigFile(t)
	s := startServery(t, "-dir", dir, "-workers", "2", "-shutdown-delay", "1h", "-drain-timeout", "60s", "-force-timeout", "90s")
	body := startBigDownload(t, s.addr) // keeps a drain waiting
	defer body.Close()
	s.signal(syscall.SIGTERM)
	waitLog(t, s, `msg="shutdown delay: not ready, serving on"`)
	s.signal(syscall.SIGTERM)
	waitLog(t, s, `msg="stop begun"`)
	s.signal(syscall.SIGTERM)
	if code := s.wait(15 * time.Second); code != exitOK {
		t.Fatalf("exit status %d; want 0", code)
	}
	logs := s.logs()
	if !strings.Contains(logs, "skipping the rest of the shutdown delay") || !strings.Contains(logs, "skipping the rest of the drain") {
		t.Errorf("want the second signal to skip the delay and the third the drain:\n%s", logs)
	}
	s.assertNoWorkersLeft()
}

func TestReadyzIsNotReadyWhileStarting(t *testing.T) {
	skipWithoutWorkers(t)
	gate := filepath.Join(t.TempDir(), "gate")
	closeGate(t, gate) // the first generation holds at prepared
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-status-addr", "127.0.0.1:0", "-dir", t.TempDir(), "-workers", "2")
	cmd.Env = append(os.Environ(), mainEnv+"=1", faultEnv+"="+faultHeldPrepared, gateEnv+"="+gate)
	s := spawnServery(t, cmd)
	waitLog(t, s, `msg="holding prepared"`)
	addr := statusRe.FindStringSubmatch(s.logs())[1]
	if resp, body := statusGet(t, addr, "GET", "/readyz"); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
		t.Errorf("/readyz = %s %q while the first generation starts; want 503, starting", resp.Status, body)
	}
	if resp, _ := statusGet(t, addr, "GET", "/livez"); resp.StatusCode != http.StatusOK {
		t.Errorf("/livez = %s while starting; want 200", resp.Status)
	}
	os.Remove(gate)
	waitLog(t, s, `msg=serving`)
	if resp, body := statusGet(t, addr, "GET", "/readyz"); resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz = %s %q once serving; want 200", resp.Status, body)
	}
}

func TestLivezFailsWhenTheLoopDoesNotAnswer(t *testing.T) {
	h := newServiceHarness(t, 2, nil)
	h.start()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st := serveStatus(ln, h.svc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer st.close()
	addr := ln.Addr().String()
	if resp, _ := statusGet(t, addr, "GET", "/livez"); resp.StatusCode != http.StatusOK {
		t.Fatalf("/livez = %s; want 200", resp.Status)
	}
	// The loop takes an event and blocks on its answer: stuck.
	hold := make(chan lifeState)
	h.svc.inbox <- evState{reply: hold}
	defer func() { <-hold }()
	began := time.Now()
	resp, body := statusGet(t, addr, "GET", "/livez")
	if resp.StatusCode != http.StatusServiceUnavailable || time.Since(began) > 5*time.Second {
		t.Errorf("/livez = %s %q after %v with the loop stuck; want 503 within about a second", resp.Status, body, time.Since(began).Round(time.Millisecond))
	}
	if resp, _ := statusGet(t, addr, "GET", "/readyz"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %s with the loop stuck; want 503", resp.Status)
	}
}

func TestScrapeShowsASilentWorkersLastCounts(t *testing.T) {
	skipWithoutWorkers(t)
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	s, addr := startWithStatus(t, "-dir", site, "-workers", "2")
	getN(t, s.addr, 20)
	before := requestsTotal(scrapeUntilCounted(t, func() map[string]float64 { return scrape(t, addr) }, 20))
	pids := s.workerPIDs()
	for _, pid := range pids {
		pause(pid) // neither answers the scrape's question now
	}
	defer func() {
		for _, pid := range pids {
			unpause(pid)
		}
	}()
	began := time.Now()
	after := requestsTotal(scrape(t, addr))
	if after != before || before < 20 {
		t.Errorf("requests %v with every worker silent, %v before; want the same, at least 20: the counts they last reported", after, before)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the scrape took %v with its workers silent; want about a second", took)
	}
}

func TestRecycleLimitsDrawWithinATenthAbove(t *testing.T) {
	var requests []int64
	var ages []time.Duration
	for range 2000 {
		r, a := recycleLimits(1000, 10*time.Second)
		requests, ages = append(requests, r), append(ages, a)
		if r < 1000 || r > 1100 || a < 10*time.Second || a > 11*time.Second {
			t.Fatalf("recycleLimits(1000, 10s) = %d, %v; want 1000 to 1100 and 10s to 11s", r, a)
		}
	}
	if r, a := recycleLimits(0, 0); r != 0 || a != 0 {
		t.Errorf("recycleLimits(0, 0) = %d, %v; want 0, 0: never", r, a)
	}
	// Drawn, not fixed: the workers started together spread out.
	if lo, hi := slices.Min(requests), slices.Max(requests); lo > 1010 || hi < 1090 {
		t.Errorf("2000 draws of -max-requests 1000 spanned %d to %d; want about 1000 to 1100", lo, hi)
	}
	if lo, hi := slices.Min(ages), slices.Max(ages); lo > 10100*time.Millisecond || hi < 10900*time.Millisecond {
		t.Errorf("2000 draws of -max-worker-age 10s spanned %v to %v; want about 10s to 11s", lo, hi)
	}
}

func TestTicketKeysRotateDaily(t *testing.T) {
	if ticketKeyRotation != 24*time.Hour {
		t.Errorf("ticket keys rotate every %v; README and DESIGN.md say every 24 hours", ticketKeyRotation)
	}
}

func TestStatusListenerBoundsEachClient(t *testing.T) {
	h := newServiceHarness(t, 1, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st := serveStatus(ln, h.svc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer st.close()
	// What DESIGN.md promises a status client: 2 s to send its request,
	// 5 s to take the answer, 30 s idle. net/http enforces each; a test
	// that waits them out would cost the suite 30 s.
	if got := st.http; got.ReadHeaderTimeout != 2*time.Second || got.ReadTimeout != 2*time.Second ||
		got.WriteTimeout != 5*time.Second || got.IdleTimeout != 30*time.Second {
		t.Errorf("status server timeouts: header %v, read %v, write %v, idle %v; want 2s, 2s, 5s, 30s",
			got.ReadHeaderTimeout, got.ReadTimeout, got.WriteTimeout, got.IdleTimeout)
	}
}
