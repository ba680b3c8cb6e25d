package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
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

// The reload claims: a new generation replaces the serving one through the
// whole barrier without dropping a request; a failed one changes nothing;
// at most two generations live; a stop or a parent's death during a reload
// leaves nothing behind; SIGHUP reloads and never ends servery.

// load is a set of keep-alive clients that GET one path in a loop and
// sort every outcome.
type load struct {
	stop                          chan struct{}
	wg                            sync.WaitGroup
	ok, truncated, refused, other atomic.Int64
	retried                       atomic.Int64 // requests the Transport sent again: a connection closed under them
	mu                            sync.Mutex
	bodies                        map[string]int // complete bodies seen, and how often
	epoch                         int            // under mu: reset's count; a body counts only in its request's epoch
	firstErr                      atomic.Pointer[string]
}

// startLoad runs n clients against http://addr/path until stopLoad.
func startLoad(t *testing.T, addr, path string, n int) *load {
	l := &load{stop: make(chan struct{}), bodies: map[string]int{}}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n}}
	for range n {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				l.one(client, "http://"+addr+path)
			}
		})
	}
	t.Cleanup(func() { l.stopLoad(); client.CloseIdleConnections() })
	return l
}

func (l *load) one(c *http.Client, url string) {
	l.mu.Lock()
	epoch := l.epoch
	l.mu.Unlock()
	var info httptrace.GotConnInfo
	conns := 0
	req, _ := http.NewRequest("GET", url, nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { info = i; conns++ }}))
	resp, err := c.Do(req)
	if conns > 1 {
		l.retried.Add(1) // the keep-alive race: closed before any response byte
	}
	if err != nil {
		local := "none" // refused: no connection
		if info.Conn != nil {
			local = info.Conn.LocalAddr().String()
		}
		err = fmt.Errorf("%w (reused %v, idle %v, local %s)", err, info.Reused, info.WasIdle, local)
		if errors.Is(err, syscall.ECONNREFUSED) {
			l.refused.Add(1)
		} else {
			l.other.Add(1)
		}
		msg := err.Error()
		l.firstErr.CompareAndSwap(nil, &msg)
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || (resp.ContentLength >= 0 && int64(len(body)) != resp.ContentLength) {
		l.truncated.Add(1)
		return
	}
	l.ok.Add(1)
	l.mu.Lock()
	if epoch == l.epoch {
		l.bodies[string(body)]++
	}
	l.mu.Unlock()
}

func (l *load) stopLoad() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

func (l *load) seen() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.bodies))
	for k, v := range l.bodies {
		out[k] = v
	}
	return out
}

// reset forgets the bodies seen so far, and those of requests sent
// before it that are still under way.
func (l *load) reset() {
	l.mu.Lock()
	l.bodies = map[string]int{}
	l.epoch++
	l.mu.Unlock()
}

// liveGenerations counts the generations with a worker still alive.
func (h *serviceHarness) liveGenerations() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, g := range h.gens {
		for _, pid := range g.pids() {
			if !gone(pid) {
				n++
				break
			}
		}
	}
	return n
}

// waitRetired waits until the service has no retiring generation.
func (h *serviceHarness) waitRetired() {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		old := h.svc.state().Retiring
		if old == 0 {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("generation %d still retiring after 10s", old)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *serviceHarness) servingPIDs() []int { return h.svc.pids() }

func TestReloadUnderLoadDropsNothing(t *testing.T) {
	h := newServiceHarness(t, 2, nil)
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := startLoad(t, h.addr, "/", 64)
	time.Sleep(100 * time.Millisecond)
	for i := range 10 {
		if err := h.svc.Reload(context.Background()); err != nil {
			t.Fatalf("reload %d: %v", i+1, err)
		}
		if n := h.liveGenerations(); n > 2 {
			t.Errorf("after reload %d: %d generations with live workers; want at most 2", i+1, n)
		}
		time.Sleep(30 * time.Millisecond)
	}
	h.waitRetired()
	time.Sleep(50 * time.Millisecond)
	l.stopLoad()
	if n := l.retried.Load(); n != 0 {
		t.Errorf("%d requests met a keep-alive connection closed under them (the Transport retried them); want 0: retiring workers answer Connection: close first", n)
	}
	if l.truncated.Load()+l.refused.Load()+l.other.Load() != 0 || l.ok.Load() == 0 {
		first := ""
		if p := l.firstErr.Load(); p != nil {
			first = *p
		}
		t.Errorf("across 10 reloads under 64 keep-alive clients: %d complete, %d truncated, %d refused, %d other (first: %s); want none lost",
			l.ok.Load(), l.truncated.Load(), l.refused.Load(), l.other.Load(), first)
	}
	if n := h.liveGenerations(); n != 1 {
		t.Errorf("%d generations alive after the last retirement; want 1", n)
	}
	t.Logf("%d requests complete across 10 reloads", l.ok.Load())
}

func TestFailedReloadChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  string // of worker 1 of the new generation
		breaks func(h *serviceHarness, current string)
		want   string // in Reload's error
	}{
		{name: "worker fails to prepare", fault: faultFail, want: "worker 1"},
		{name: "reload timeout", fault: faultHang, want: "startup timeout"},
		{name: "missing directory", breaks: func(h *serviceHarness, current string) {
			pointAt(h.t, current, "gone")
		}, want: "no such file"},
		{name: "bad certificate", breaks: func(h *serviceHarness, _ string) {
			h.readTLS = func() (*tlsIdentity, error) {
				return loadTLSIdentity(filepath.Join(h.dir, "index.html"), filepath.Join(h.dir, "index.html"))
			}
		}, want: "reload tls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			current := twoReleases(t)
			h := newServiceHarness(t, 2, nil, func(c *supervisorConfig) {
				c.StartupTimeout = 1500 * time.Millisecond
				c.Args = []string{"-dir", current, "-cache-bytes", "1MiB"}
			})
			if err := h.svc.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			before := h.servingPIDs()
			// A keep-alive connection to the serving generation, which a
			// failed reload must leave open.
			conn, err := net.Dial("tcp", h.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			r := bufio.NewReader(conn)
			askOn(t, conn, r, "one")
			if tc.fault != "" {
				h.mu.Lock()
				h.later = map[int]map[int]string{2: {1: tc.fault}}
				h.mu.Unlock()
			}
			if tc.breaks != nil {
				tc.breaks(h, current)
			}
			err = h.svc.Reload(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Reload() = %v; want an error containing %q", err, tc.want)
			}
			if after := h.servingPIDs(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("serving pids %v after a failed reload; want %v unchanged", after, before)
			}
			askOn(t, conn, r, "one") // the same connection still answers
			if code, body, err := get(h.addr, "/"); err != nil || code != 200 || body != "one" {
				t.Errorf("GET / after a failed reload = %d %q %v; want 200 one", code, body, err)
			}
			if n := h.liveGenerations(); n != 1 {
				t.Errorf("%d generations alive after a failed reload; want only the serving one", n)
			}
			if oldDrained.MatchString(h.readLogs()) {
				t.Errorf("the serving generation was told to drain by a failed reload:\n%s", h.readLogs())
			}
		})
	}
}

var oldDrained = regexp.MustCompile(`msg="worker draining" worker=\d+ pid=\d+ generation=1\b`)

// askOn sends one GET / on an open connection and wants body back.
func askOn(t *testing.T, c net.Conn, r *bufio.Reader, body string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("keep-alive request: %v; want the connection to stay open", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != body {
		t.Fatalf("keep-alive request: %q %v; want %q", b, err, body)
	}
}

// twoReleases makes releases r1 and r2, whose index pages say "one" and
// "two", and a symlink "current" to r1, which it returns.
func twoReleases(t *testing.T) string {
	t.Helper()
	releases := t.TempDir()
	for name, body := range map[string]string{"r1": "one", "r2": "two"} {
		if err := os.Mkdir(filepath.Join(releases, name), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(releases, name), "index.html", body)
	}
	current := filepath.Join(releases, "current")
	pointAt(t, current, "r1")
	return current
}

// pointAt switches the symlink link to target atomically, as a deploy
// does: a new link renamed over the old.
func pointAt(t *testing.T, link, target string) {
	t.Helper()
	if err := os.Symlink(target, link+".new"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(link+".new", link); err != nil {
		t.Fatal(err)
	}
}

func TestReloadAfterASymlinkSwitchServesOneReleaseAtATime(t *testing.T) {
	current := twoReleases(t)
	h := newServiceHarness(t, 2, nil, func(c *supervisorConfig) {
		c.Args = []string{"-dir", current, "-cache-bytes", "1MiB"}
	})
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := startLoad(t, h.addr, "/", 16)
	time.Sleep(50 * time.Millisecond)
	pointAt(t, current, "r2") // the deploy, then the reload
	if err := h.svc.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	during := l.seen()
	h.waitRetired()
	l.reset()
	time.Sleep(100 * time.Millisecond)
	after := l.seen()
	l.stopLoad()
	for body := range during {
		if body != "one" && body != "two" {
			t.Errorf("during the reload a response was %q; want only one release's page", body)
		}
	}
	if after["one"] != 0 || after["two"] == 0 {
		t.Errorf("after the old generation retired: %v; want only the new release", after)
	}
	if l.truncated.Load()+l.refused.Load()+l.other.Load() != 0 {
		t.Errorf("%d truncated, %d refused, %d other; want none", l.truncated.Load(), l.refused.Load(), l.other.Load())
	}
}

func TestStopDuringReloadLeavesNothing(t *testing.T) {
	h := newServiceHarness(t, 2, nil)
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.later = map[int]map[int]string{2: {0: faultHang, 1: faultHang}}
	h.mu.Unlock()
	reloaded := make(chan error, 1)
	go func() { reloaded <- h.svc.Reload(context.Background()) }()
	for !strings.Contains(h.readLogs(), `msg="worker started" generation=2 worker=1`) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := h.svc.Stop(context.Background()); err != nil {
		t.Errorf("Stop during a reload = %v; want a clean stop", err)
	}
	// Stop returned: nothing of either generation may be left, the new
	// one's hung workers included.
	for _, pid := range h.startedPIDs() {
		if !waitGone(pid, time.Second) {
			t.Errorf("worker pid %d outlived the stop", pid)
		}
	}
	select {
	case err := <-reloaded:
		if err == nil {
			t.Error("Reload cut by a stop returned nil")
		}
	case <-time.After(time.Second):
		t.Error("Reload still running after the stop returned")
	}
	if !portRefusesWithin(h.addr, 2*time.Second) {
		t.Errorf("port still accepts after the stop")
	}
}

func TestWorkerOfARetiringGenerationIsNotLost(t *testing.T) {
	h := newServiceHarness(t, 2, nil, func(c *supervisorConfig) {
		c.DrainTimeout, c.ForceTimeout = 5*time.Second, 8*time.Second
		c.Runtime.DrainTimeout = c.DrainTimeout
	})
	h.svc.policy.MaxRestarts = 0 // the fixed generation: a serving worker's loss ends it
	writeFile(t, h.dir, "big.bin", strings.Repeat("x", 32<<20))
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	old := h.servingPIDs()
	body := startBigDownload(t, h.addr) // keeps one old worker draining
	defer body.Close()
	if err := h.svc.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, pid := range old {
		killGroup(pid)
	}
	h.waitRetired()
	select {
	case <-h.svc.done:
		t.Fatalf("the service ended when a retiring generation's worker died: %v", h.svc.err)
	case <-time.After(100 * time.Millisecond):
	}
	if code, _, err := get(h.addr, "/"); err != nil || code != 200 {
		t.Errorf("GET / = %d %v; want the new generation serving", code, err)
	}
	// A worker of the serving generation is lost as before.
	killGroup(h.servingPIDs()[0])
	select {
	case <-h.svc.done:
		if h.svc.err == nil {
			t.Error("service ended cleanly after a serving worker was lost; want an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the service went on after a serving worker was lost")
	}
}

func TestReloadRequestsCoalesceIntoOneMore(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	t.Setenv(gateEnv, gate)
	h := newServiceHarness(t, 2, nil)
	h.later = map[int]map[int]string{2: {0: faultHeldPrepared, 1: faultHeldPrepared}}
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.svc.requestReload()
	for !strings.Contains(h.readLogs(), `msg="holding prepared"`) {
		time.Sleep(5 * time.Millisecond)
	}
	for range 5 {
		h.svc.requestReload() // five more arrive during the first
	}
	os.Remove(gate)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if st := h.svc.state(); st.Serving == 3 && st.Starting == 0 && st.Retiring == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("generation 3 never served alone: %+v", h.svc.state())
		}
	}
	time.Sleep(200 * time.Millisecond) // time for a third reload to begin, were one due
	if n := strings.Count(h.readLogs(), "msg=reloading "); n != 2 {
		t.Errorf("%d reloads for 1 + 5 requests during it; want 2, the five coalesced into one", n)
	}
}

func TestSIGHUPReloadsAndNeverEndsServery(t *testing.T) {
	for _, workers := range []string{"1", "3"} {
		t.Run("workers="+workers, func(t *testing.T) {
			current := twoReleases(t)
			s := startServery(t, "-dir", current, "-workers", workers)
			if _, body, _ := get(s.addr, "/"); body != "one" {
				t.Fatalf("GET / = %q; want one", body)
			}
			pointAt(t, current, "r2")
			s.signal(syscall.SIGHUP)
			waitLog(t, s, `msg="generation retired" generation=1`)
			if _, body, _ := get(s.addr, "/"); body != "two" {
				t.Errorf("GET / after the switch and SIGHUP = %q; want two", body)
			}
			// A reload that fails keeps the serving one.
			pointAt(t, current, "missing")
			s.signal(syscall.SIGHUP)
			waitLog(t, s, `msg="reload failed, still serving" generation=3`)
			if _, body, _ := get(s.addr, "/"); body != "two" {
				t.Errorf("GET / after a failed reload = %q; want two", body)
			}
			s.signal(syscall.SIGTERM)
			if code := s.wait(10 * time.Second); code != exitOK {
				t.Errorf("exit %d after SIGHUPs and SIGTERM; want 0", code)
			}
			s.assertNoWorkersLeft()
		})
	}
}

// waitLog waits until servery's log matches re.
func waitLog(t *testing.T, s *servery, re string) {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(10 * time.Second)
	for !rx.MatchString(s.logs()) {
		if time.Now().After(deadline) {
			t.Fatalf("log never matched %s:\n%s", re, s.logs())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReloadTellsTheServiceManager(t *testing.T) {
	ns := newNotifySocket(t)
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-dir", t.TempDir(), "-workers", "2")
	cmd.Env = append(os.Environ(), mainEnv+"=1", "NOTIFY_SOCKET="+ns.path)
	s := launchServery(t, cmd)
	ns.next(t) // READY=1
	s.signal(syscall.SIGHUP)
	d := ns.next(t)
	m := regexp.MustCompile(`^RELOADING=1\nMONOTONIC_USEC=(\d+)\n$`).FindStringSubmatch(d.text)
	if m == nil {
		t.Fatalf("notification at a reload %q; want RELOADING=1 and MONOTONIC_USEC in one datagram", d.text)
	}
	us, _ := strconv.ParseInt(m[1], 10, 64)
	now, _ := strconv.ParseInt(strings.TrimPrefix(monotonicUsec(), "MONOTONIC_USEC="), 10, 64)
	if now-us < 0 || now-us > 10e6 {
		t.Errorf("MONOTONIC_USEC=%d, CLOCK_MONOTONIC now %d µs; want a reading from the last 10 s", us, now)
	}
	if d := ns.next(t); !strings.Contains(d.text, "READY=1") || !strings.Contains(d.text, "STATUS=generation 2 serving") {
		t.Errorf("notification after the reload %q; want READY=1 and a STATUS naming generation 2", d.text)
	}
	s.signal(syscall.SIGTERM)
	s.wait(10 * time.Second)
}

func TestParentSIGKILLDuringReloadLeavesNoOrphan(t *testing.T) {
	skipWithoutWorkers(t)
	gate := filepath.Join(t.TempDir(), "gate")
	s := startHeldServery(t, gate, "-dir", t.TempDir(), "-workers", "2", "-drain-timeout", "1s", "-force-timeout", "2s")
	serving := generationPIDs(s, 1)
	if len(serving) != 2 {
		t.Fatalf("generation 1 workers %v; want 2", serving)
	}
	// The new generation's workers are slow to prepare: the reload stays
	// in its barrier until the gate opens.
	starting := holdNextGeneration(t, s, gate, 2, 2)
	for _, pid := range append(slices.Clone(serving), starting...) {
		if gone(pid) {
			t.Fatalf("worker pid %d is gone before the kill; want both generations alive:\n%s", pid, s.logs())
		}
	}
	s.cmd.Process.Kill()
	<-s.exited
	if logs := s.logs(); !strings.Contains(logs, `msg="generation starting" generation=2`) ||
		strings.Contains(logs, `msg=committing generation=2`) || strings.Contains(logs, `msg=reloaded generation=2`) {
		t.Fatalf("the kill did not land in the middle of the reload:\n%s", logs)
	}
	// The serving generation's workers see EOF on stdin and drain on
	// their own.
	for _, pid := range serving {
		if !waitGone(pid, 10*time.Second) {
			t.Errorf("serving worker pid %d outlived its parent's SIGKILL during a reload", pid)
		}
	}
	// The new generation's start step ends: its prepared message finds no
	// parent, and its workers leave without ever accepting.
	os.Remove(gate)
	for _, pid := range starting {
		if !waitGone(pid, 10*time.Second) {
			t.Errorf("starting worker pid %d outlived its parent's SIGKILL during a reload", pid)
		}
	}
	if !portRefusesWithin(s.addr, 2*time.Second) {
		t.Errorf("port %s still accepts: a worker of either generation holds the listener", s.addr)
	}
}
