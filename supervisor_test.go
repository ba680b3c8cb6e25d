package main

import (
	"bufio"
	"bytes"
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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// harness runs one Supervisor over test-binary workers and guarantees, in
// t.Cleanup, that none of its processes outlives the test.
type harness struct {
	t       *testing.T
	sup     *Supervisor
	ln      net.Listener // the parent's copy, which the harness owns as a Service would
	addr    string
	dir     string
	logs    *os.File // the supervisor's and the workers' stderr
	pidFile string   // the grandchild fault's pid
	starts  string   // a directory where each slot's workers count their starts (startNumber)
}

// testConfig is a generation with deadlines short enough for tests.
func testConfig(dir string, workers int) supervisorConfig {
	return supervisorConfig{
		Workers:        workers,
		StartupTimeout: 10 * time.Second,
		DrainTimeout:   2 * time.Second,
		ForceTimeout:   4 * time.Second,
		Runtime: runtimeConfig{
			HeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, DrainTimeout: 2 * time.Second,
		},
		Args: []string{"-dir", dir, "-cache-bytes", "1MiB"},
	}
}

// alone makes s a generation run on its own, with no Service above it,
// as the design record's fixed generation is: a lost worker stops the
// whole generation, and a request to be recycled is logged, not acted on.
func alone(s *Supervisor) *Supervisor {
	s.onLost = func(err error) { s.stopWith(fmt.Errorf("generation lost %w", err), s.cfg.DrainTimeout) }
	s.onRecycle = func(int, int, string, string) {}
	return s
}

// newHarness prepares (but does not start) a generation of workers; faults
// maps a worker index to the fault it injects.
func newHarness(t *testing.T, workers int, faults map[int]string, edit ...func(*supervisorConfig)) *harness {
	t.Helper()
	skipWithoutWorkers(t)
	h := &harness{t: t, dir: t.TempDir()}
	writeFile(t, h.dir, "index.html", "hello")
	h.pidFile = filepath.Join(t.TempDir(), "grandchild.pid")
	h.starts = t.TempDir()
	logs, err := os.Create(filepath.Join(t.TempDir(), "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	h.logs = logs
	cfg := testConfig(h.dir, workers)
	for _, e := range edit {
		e(&cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	h.sup = alone(newSupervisor(cfg, ln, slog.New(slog.NewTextHandler(logs, nil)), reports{}))
	h.ln = ln
	h.sup.seam.command = func(i int, args []string) (*exec.Cmd, error) {
		return h.worker(i, args, faults[i]), nil
	}
	t.Cleanup(h.cleanup)
	return h
}

// worker is the test-binary worker for slot i, with fault.
func (h *harness) worker(i int, args []string, fault string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), faultEnv+"="+fault, pidFileEnv+"="+h.pidFile,
		startsEnv+"="+filepath.Join(h.starts, "slot-"+strconv.Itoa(i)))
	cmd.Stderr = h.logs
	return cmd
}

// startedPIDs returns the pid of every worker started so far, of every
// generation, replacements included, as the log names them.
func (h *harness) startedPIDs() []int {
	var pids []int
	for _, m := range startedRE.FindAllStringSubmatch(h.readLogs(), -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	return pids
}

var startedRE = regexp.MustCompile(`msg="worker started" generation=\d+ worker=\d+ pid=(\d+)`)

// cleanupBound is how long a cleanup waits for a stop: far past any
// test's force deadline.
const cleanupBound = 20 * time.Second

// cleanup stops the generation in a hurry and kills anything left, even
// after a failed test; on failure it shows the processes' logs.
func (h *harness) cleanup() {
	hurry, cancel := context.WithCancel(context.Background())
	cancel()
	// Bounded, so a stop that hangs is a failure with logs, not a hung suite.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		h.stop(hurry)
	}()
	select {
	case <-stopped:
	case <-time.After(cleanupBound):
		h.t.Errorf("Stop in cleanup did not return within %v; killing the workers", cleanupBound)
	}
	for _, pid := range h.startedPIDs() {
		killGroup(pid)
	}
	if pid := h.grandchild(); pid > 0 {
		kill(pid)
	}
	assertNoRaceReports(h.t, h.logs.Name())
	switch b, _ := os.ReadFile(h.logs.Name()); {
	case h.t.Failed():
		h.t.Logf("logs:\n%s", b)
	case testing.Verbose(): // to read what happened
		h.t.Logf("logs:\n%s", verboseTail(b))
	}
	h.ln.Close()
	h.logs.Close()
}

// verboseTail is a passing test's log as -v shows it: the last 64 KiB,
// so a test that replaced thousands of workers does not print them all.
func verboseTail(b []byte) []byte {
	const most = 64 << 10
	if len(b) <= most {
		return b
	}
	return append([]byte(fmt.Sprintf("[%d bytes before]\n", len(b)-most)), b[len(b)-most:]...)
}

// assertNoRaceReports fails the test if the log at path, which child
// processes wrote their stderr to, holds a race report. A race in a worker
// changes only its exit status, which no stop path checks.
func assertNoRaceReports(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.Index(b, []byte("WARNING: DATA RACE")); i >= 0 {
		t.Errorf("a child process reported a data race:\n%s", b[i:min(len(b), i+4000)])
	}
}

// stop stops the generation as the Service does: the parent's copy of
// the listener closes first, so the kernel refuses what no worker will
// accept.
func (h *harness) stop(ctx context.Context) error {
	h.ln.Close()
	return h.sup.Stop(ctx)
}

// start starts the generation and fails the test if it does not start.
func (h *harness) start() {
	h.t.Helper()
	if err := h.sup.Start(context.Background()); err != nil {
		h.t.Fatalf("Start() = %v; want nil", err)
	}
}

// grandchild returns the grandchild fault's pid, or 0.
func (h *harness) grandchild() int {
	b, err := os.ReadFile(h.pidFile)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(string(b))
	return pid
}

// assertAllGone fails the test unless every worker (and the grandchild) is
// gone and the port refuses connections.
func (h *harness) assertAllGone() {
	h.t.Helper()
	for i, pid := range h.sup.pids() {
		if !gone(pid) {
			h.t.Errorf("worker %d (pid %d) still alive", i, pid)
		}
	}
	if pid := h.grandchild(); pid > 0 && !waitGone(pid, 2*time.Second) {
		h.t.Errorf("grandchild (pid %d) still alive", pid)
	}
	// The generation never closes the shared listener; with the parent's
	// copy closed, the port refuses only if no worker holds a copy.
	h.ln.Close()
	if !portRefusesWithin(h.addr, 2*time.Second) {
		h.t.Errorf("port %s still accepts connections: a worker holds the listener", h.addr)
	}
}

// portRefusesWithin polls until addr refuses connections. The last holder
// of a listener may be a killed process whose threads are still tearing
// down when it is already reaped or a zombie, so allow the kernel a moment.
func portRefusesWithin(addr string, within time.Duration) bool {
	began := time.Now()
	for portAccepts(addr) {
		if time.Since(began) > within {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// portAccepts reports whether something listens on addr. A dial to a
// closed port in the ephemeral range can connect to itself (TCP
// simultaneous open, when the kernel picks the same port as source), which
// is no listener.
func portAccepts(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	return c.LocalAddr().String() != c.RemoteAddr().String()
}

// counters returns each worker's reported counters, after a stop.
func (h *harness) counters() []*workerStats {
	var st []*workerStats
	for _, p := range h.sup.procs {
		st = append(st, p.getStats())
	}
	return st
}

// gone reports whether pid no longer runs: it does not exist, or it is a
// zombie waiting for a parent (such as a non-reaping init) to collect it
// and holds no descriptors. The leader of a multi-threaded process shows
// as a zombie while its other threads still tear down, files included.
func gone(pid int) bool {
	if !exists(pid) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || len(s) < i+3 || s[i+2] != 'Z' {
		return false
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(fds) == 0
}

// waitGone polls until pid is gone or within passes.
func waitGone(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for !gone(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// get fetches path over a new connection.
func get(addr, path string) (int, string, error) {
	return fetch(&http.Transport{DisableKeepAlives: true}, "http://"+addr+path)
}

// fetch GETs url through tr, within 10 s, and returns the status and body.
func fetch(tr *http.Transport, url string) (int, string, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func skipWithoutWorkers(t *testing.T) {
	if !multiWorker {
		t.Skip("worker processes need Unix")
	}
}

func TestWorkersShareOnePort(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("workers=%d", n), func(t *testing.T) {
			// Which worker takes a connection is the kernel's choice, and
			// it guarantees no spread. One connection per worker
			// (-max-conns 1), each held by an answer its client does not
			// read, makes every worker take one: a full worker accepts
			// no more, so the next connection is another's.
			h := newHarness(t, n, nil, func(c *supervisorConfig) { c.Runtime.MaxConns = 1 })
			writeFile(t, h.dir, "big.bin", strings.Repeat("b", 16<<20))
			h.start()
			for i := range n {
				c, err := net.Dial("tcp", h.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				io.WriteString(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
				if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
					t.Fatalf("connection %d of %d, each worker holding one: %v, %v; want 200", i+1, n, resp, err)
				}
			}
			// The held answers are cut at the drain deadline: not what
			// this test is about.
			h.stop(context.Background())
			for i, st := range h.counters() {
				if st == nil || st.Accepted != 1 {
					t.Errorf("worker %d: counters %+v; want one connection accepted by each", i, st)
				}
			}
			h.assertAllGone()
		})
	}
}

func TestBarrierDelaysEveryAnswerUntilAllPrepared(t *testing.T) {
	const delay = 700 * time.Millisecond
	h := newHarness(t, 3, map[int]string{2: faultSlowPrepared})
	t.Setenv(delayEnv, delay.String())
	began := time.Now()
	started := make(chan error, 1)
	go func() { started <- h.sup.Start(context.Background()) }()
	// The parent's listener is bound, so this connects at once and waits
	// in the accept queue until some worker is allowed to accept.
	code, _, err := get(h.addr, "/")
	answered := time.Since(began)
	if err := <-started; err != nil {
		t.Fatalf("Start() = %v; want nil", err)
	}
	if err != nil || code != 200 {
		t.Fatalf("GET / = %d, %v; want 200", code, err)
	}
	if answered < delay {
		t.Errorf("first answer after %v; want no answer before the slow worker's prepared (%v)", answered, delay)
	}
}

func TestRollbackWhenOneWorkerFailsBeforeReady(t *testing.T) {
	for fault, want := range map[string]string{
		faultFail:    "injected failure",
		faultExit:    "exit status 3",
		faultGarbage: "malformed protocol line",
	} {
		t.Run(fault, func(t *testing.T) {
			h := newHarness(t, 4, map[int]string{2: fault})
			err := h.sup.Start(context.Background())
			pid := h.sup.pids()[2]
			for _, part := range []string{"worker 2", fmt.Sprintf("pid %d", pid), want} {
				if err == nil || !strings.Contains(err.Error(), part) {
					t.Errorf("Start() = %v; want an error containing %q", err, part)
				}
			}
			h.assertAllGone()
		})
	}
}

func TestRollbackOnStartupTimeout(t *testing.T) {
	h := newHarness(t, 3, map[int]string{1: faultHang}, func(c *supervisorConfig) {
		c.StartupTimeout = 500 * time.Millisecond
	})
	err := h.sup.Start(context.Background())
	if !errors.Is(err, errStartupTimeout) || !strings.Contains(err.Error(), "worker 1") {
		t.Fatalf("Start() = %v; want a startup timeout naming worker 1", err)
	}
	h.assertAllGone()
}

func TestRollbackAfterCommitDrainsInFlightRequests(t *testing.T) {
	// Worker 1 is committed and serving but reports ready after the
	// startup timeout, so the rollback comes after commit.
	t.Setenv(delayEnv, "5s")
	h := newHarness(t, 2, map[int]string{1: faultSlowReady}, func(c *supervisorConfig) {
		c.StartupTimeout = 1500 * time.Millisecond
		c.DrainTimeout, c.ForceTimeout = 3*time.Second, 5*time.Second
		c.Runtime.DrainTimeout = c.DrainTimeout
	})
	const size = 32 << 20
	writeFile(t, h.dir, "big.bin", strings.Repeat("x", size))
	started := make(chan error, 1)
	go func() { started <- h.sup.Start(context.Background()) }()
	body := startBigDownload(t, h.addr) // answered once the workers are committed
	defer body.Close()
	for !strings.Contains(h.readLogs(), "startup failed") {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the rollback is under way
	// The download may be on either worker, and worker 1 answers SIGTERM
	// only after its late ready, so the body alone cannot tell a drain
	// from an immediate terminate: the rollback must say it drains.
	if logs := h.readLogs(); !strings.Contains(logs, "drain=3s") {
		t.Errorf("rollback after commit without the drain timeout:\n%s", logs)
	}
	n, err := io.Copy(io.Discard, body)
	if err != nil || n+64<<10 != size {
		t.Errorf("in-flight response: %d bytes, %v; want all %d (a rollback after commit drains)", n+64<<10, err, size)
	}
	if err := <-started; !errors.Is(err, errStartupTimeout) {
		t.Fatalf("Start() = %v; want the startup timeout", err)
	}
	h.assertAllGone()
}

// readLogs returns what the supervisor and its workers have logged so far.
func (h *harness) readLogs() string {
	b, _ := os.ReadFile(h.logs.Name())
	return string(b)
}

func TestCancelDuringBarrierRollsBack(t *testing.T) {
	h := newHarness(t, 3, map[int]string{0: faultHang})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := h.sup.Start(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "worker 0") {
		t.Fatalf("Start() = %v; want the context's error naming worker 0", err)
	}
	h.assertAllGone()
}

func TestEOFAfterReadyDrainsInFlightRequest(t *testing.T) {
	h := newHarness(t, 2, nil)
	const size = 32 << 20
	writeFile(t, h.dir, "big.bin", strings.Repeat("x", size))
	h.start()
	resp, err := http.Get("http://" + h.addr + "/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadFull(resp.Body, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	// What a dying parent does: its write ends close. The real ones, not
	// made-up descriptor numbers.
	for _, p := range h.sup.procs {
		p.stdin.Close()
	}
	time.Sleep(100 * time.Millisecond) // let the drain begin under the client
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n+64<<10 != size {
		t.Fatalf("read %d bytes, %v; want the whole in-flight response", n+64<<10, err)
	}
	for i, pid := range h.sup.pids() {
		if !waitGone(pid, 3*time.Second) {
			t.Errorf("worker %d (pid %d) did not exit after its stdin closed", i, pid)
		}
	}
}

func TestTerminateAtDrainDeadlineStopsWorkerThatIgnoresEOF(t *testing.T) {
	const drain, force = 300 * time.Millisecond, 3 * time.Second
	h := newHarness(t, 2, map[int]string{1: faultDeaf}, func(c *supervisorConfig) {
		c.DrainTimeout, c.ForceTimeout = drain, force
	})
	h.start()
	began := time.Now()
	if err := h.stop(context.Background()); err != nil {
		t.Fatalf("Stop() = %v; want nil (the worker was terminated and reaped)", err)
	}
	// Without the SIGTERM stage the deaf worker would last until the kill.
	if took := time.Since(began); took < drain || took >= force {
		t.Errorf("Stop took %v; want it to end after the drain deadline (%v), by terminate, well before the kill (%v)", took, drain, force)
	}
	if logs := h.readLogs(); !strings.Contains(logs, "action=terminate") || strings.Contains(logs, "action=kill") {
		t.Errorf("want the deaf worker terminated and nothing killed:\n%s", logs)
	}
	h.assertAllGone()
}

func TestSignalToAWorkerAlreadyGoneIsNoFailure(t *testing.T) {
	h := newHarness(t, 2, map[int]string{1: faultDeaf}, func(c *supervisorConfig) {
		c.DrainTimeout, c.ForceTimeout = 300*time.Millisecond, 3*time.Second
	})
	// The worker exits, and is reaped, between the stop's look at who
	// survives and its signal: the signal finds no such process.
	h.sup.seam.signal = func(p *workerProc, sig os.Signal) error {
		if sig != syscall.SIGTERM {
			return signalWorkerGroup(p, sig) // the reaper's sweep, which exited waits for
		}
		signalWorkerGroup(p, sig)
		<-p.exited
		return signalWorkerGroup(p, sig)
	}
	h.start()
	if err := h.stop(context.Background()); err != nil {
		t.Fatalf("Stop() = %v; want nil", err)
	}
	if logs := h.readLogs(); strings.Contains(logs, "signal failed") {
		t.Errorf("a signal to a worker already gone was logged as a failure:\n%s", logs)
	}
}

func TestStopIsNotHeldBehindAKeySend(t *testing.T) {
	h := newHarness(t, 2, nil)
	h.start()
	// A ticket-key send holds keyMu across its pipe writes, up to a
	// second for a worker that does not read; a recycle begins meanwhile.
	h.sup.keyMu.Lock()
	locked := true
	defer func() {
		if locked {
			h.sup.keyMu.Unlock()
		}
	}()
	go h.sup.replace(context.Background(), 0, true)
	time.Sleep(50 * time.Millisecond)
	stopped := make(chan error, 1)
	go func() { stopped <- h.sup.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Stop() = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the stop waited for a key send: the recycle's spawn held spawnMu while it waited for keyMu")
		h.sup.keyMu.Unlock()
		locked = false
		<-stopped
	}
}

func TestForceKillsWorkerThatIgnoresTerm(t *testing.T) {
	h := newHarness(t, 2, map[int]string{1: faultStubborn}, func(c *supervisorConfig) {
		c.DrainTimeout, c.ForceTimeout = 200*time.Millisecond, 600*time.Millisecond
	})
	h.start()
	began := time.Now()
	if err := h.stop(context.Background()); err != nil {
		t.Fatalf("Stop() = %v; want nil (the worker was killed and reaped)", err)
	}
	if took := time.Since(began); took < 600*time.Millisecond || took > 600*time.Millisecond+finalGrace {
		t.Errorf("Stop took %v; want it to end at the force deadline (600ms)", took)
	}
	h.assertAllGone()
}

func TestKillReachesWorkersGrandchild(t *testing.T) {
	h := newHarness(t, 2, map[int]string{0: faultGrandchild}, func(c *supervisorConfig) {
		c.DrainTimeout, c.ForceTimeout = 200*time.Millisecond, 500*time.Millisecond
	})
	h.start()
	if h.grandchild() == 0 {
		t.Fatal("the worker recorded no grandchild")
	}
	if err := h.stop(context.Background()); err != nil {
		t.Fatalf("Stop() = %v; want nil", err)
	}
	h.assertAllGone()
}

func TestSurvivorsAreReportedAsError(t *testing.T) {
	h := newHarness(t, 3, map[int]string{1: faultStubborn, 2: faultStubborn}, func(c *supervisorConfig) {
		c.DrainTimeout, c.ForceTimeout = 100*time.Millisecond, 300*time.Millisecond
	})
	// A kill that never lands stands in for a process the kernel cannot
	// tear down (stuck in uninterruptible sleep, say). Two of them, so
	// the stop must not wait on either survivor's pipes.
	h.sup.seam.signal = func(p *workerProc, sig os.Signal) error {
		if p.index == 1 || p.index == 2 {
			return nil
		}
		return signalWorkerGroup(p, sig)
	}
	h.start()
	pids := h.sup.pids()
	stopped := make(chan error, 1)
	go func() { stopped <- h.stop(context.Background()) }()
	var err error
	select {
	case err = <-stopped:
	case <-time.After(300*time.Millisecond + finalGrace + 5*time.Second):
		t.Fatal("Stop() still blocked long after the final deadline")
	}
	for _, i := range []int{1, 2} {
		want := fmt.Sprintf("worker %d (pid %d)", i, pids[i])
		if !errors.Is(err, errSurvived) || !strings.Contains(err.Error(), want) {
			t.Errorf("Stop() = %v; want errSurvived naming %q", err, want)
		}
	}
	if err2 := h.sup.Wait(); err2 != err {
		t.Errorf("Wait() = %v; want Stop's error %v", err2, err)
	}
}

func TestRollbackSurvivorIsReportedByStart(t *testing.T) {
	h := newHarness(t, 2, map[int]string{1: faultHang}, func(c *supervisorConfig) {
		c.StartupTimeout = 300 * time.Millisecond
		c.DrainTimeout, c.ForceTimeout = 100*time.Millisecond, 300*time.Millisecond
	})
	h.sup.seam.signal = func(p *workerProc, sig os.Signal) error {
		if p.index == 1 {
			return nil // this kill never lands
		}
		return signalWorkerGroup(p, sig)
	}
	err := h.sup.Start(context.Background())
	if !errors.Is(err, errStartupTimeout) || !strings.Contains(err.Error(), "survived the kill deadline") {
		t.Fatalf("Start() = %v; want the startup timeout and the survivor of the rollback", err)
	}
}

func TestStopBeforeStartClosesListenerAndRefusesStart(t *testing.T) {
	h := newHarness(t, 2, nil)
	if err := h.stop(context.Background()); err != nil {
		t.Fatalf("Stop() before Start = %v; want nil", err)
	}
	if err := h.sup.Start(context.Background()); err == nil {
		t.Fatal("Start() after Stop = nil; want an error")
	}
	if len(h.sup.pids()) != 0 {
		t.Errorf("workers %v started after Stop; want none", h.sup.pids())
	}
	h.assertAllGone()
}

func TestStopAndWaitAreIdempotent(t *testing.T) {
	h := newHarness(t, 2, nil)
	h.start()
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 3 {
		wg.Go(func() { errs <- h.stop(context.Background()) })
		wg.Go(func() { errs <- h.sup.Wait() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Stop()/Wait() = %v; want nil", err)
		}
	}
	if err := h.stop(context.Background()); err != nil {
		t.Errorf("Stop() again = %v; want nil", err)
	}
	h.assertAllGone()
}

func TestLostWorkerFailsGeneration(t *testing.T) {
	h := newHarness(t, 3, nil)
	h.start()
	lost := h.sup.pids()[1]
	kill(lost)
	err := h.sup.Wait()
	want := fmt.Sprintf("worker 1 (pid %d)", lost)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Wait() = %v; want an error naming %q", err, want)
	}
	h.assertAllGone()
}

func TestHandlesReleasedAfterReap(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc")
	}
	cycle := func() {
		h := newHarness(t, 2, nil)
		h.start()
		if err := h.stop(context.Background()); err != nil {
			t.Fatalf("Stop() = %v", err)
		}
		h.logs.Close() // the harness's own file, not the supervisor's
	}
	cycle() // the runtime opens its poller and friends once
	before := openFDs(t)
	cycle()
	if after := openFDs(t); after != before {
		t.Errorf("open descriptors: %d before a generation, %d after; want equal", before, after)
	}
}

func openFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func TestSharedListenerStaysNonBlockingWhileWorkersStart(t *testing.T) {
	if _, err := os.Stat("/proc/self/fdinfo"); err != nil {
		t.Skip("needs /proc")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := listenerFile(ln)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Fd() // what exec.Cmd.Start does with every ExtraFiles entry
	// The flags belong to the open file description, which the copy, the
	// listener and every worker share.
	raw, err := ln.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	raw.Control(func(f uintptr) { fd = f })
	if flags := fdFlags(t, int(fd)); flags&syscall.O_NONBLOCK == 0 {
		t.Errorf("listener flags %o after Fd: O_NONBLOCK clear; an accept in a running worker could block a thread", flags)
	}
}

// fdFlags returns the open file description flags of this process's fd.
func fdFlags(t *testing.T, fd int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if err != nil {
		t.Fatal(err)
	}
	var flags int64
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, _ = strconv.ParseInt(strings.TrimSpace(v), 8, 64)
		}
	}
	return flags
}

// BenchmarkGenerationStartStop measures a whole idle generation of four
// workers: spawn, barrier, ready, then stop and reap.
func BenchmarkGenerationStartStop(b *testing.B) {
	if !multiWorker {
		b.Skip("worker processes need Unix")
	}
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("hello"), 0o644); err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devNull.Close()
	var start, stop time.Duration
	for b.Loop() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		sup := alone(newSupervisor(testConfig(dir, 4), ln, log, reports{}))
		sup.seam.command = func(_ int, args []string) (*exec.Cmd, error) {
			cmd := exec.Command(os.Args[0], args...)
			cmd.Stderr = devNull // the workers' logs would interleave with the results
			return cmd, nil
		}
		t0 := time.Now()
		if err := sup.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := sup.Stop(context.Background()); err != nil {
			b.Fatal(err)
		}
		ln.Close()
		start += t1.Sub(t0)
		stop += time.Since(t1)
	}
	b.ReportMetric(float64(start.Microseconds())/float64(b.N)/1000, "ms-to-ready")
	b.ReportMetric(float64(stop.Microseconds())/float64(b.N)/1000, "ms-to-stop")
}

func TestWorkerEnvironmentSharesCPUsAndDropsParentOnlyVariables(t *testing.T) {
	for _, tc := range []struct{ procs, workers, want int }{
		{8, 4, 2}, {2, 4, 1}, {1, 1, 1}, {16, 3, 5},
	} {
		if got := workerProcs(tc.procs, tc.workers); got != tc.want {
			t.Errorf("workerProcs(%d, %d) = %d; want %d", tc.procs, tc.workers, got, tc.want)
		}
	}
	s := newSupervisor(supervisorConfig{Workers: 2, Generation: 3}, nil, slog.New(slog.DiscardHandler), reports{})
	// 10 processors: 5 for each of 2 workers, 2 for each of 5.
	procs := runtime.GOMAXPROCS(10)
	t.Cleanup(func() { runtime.GOMAXPROCS(procs) })
	t.Setenv("GOMAXPROCS", "")
	env := s.workerEnviron([]string{"PATH=/bin", "NOTIFY_SOCKET=/run/n", "LISTEN_PID=1", "LISTEN_FDS=1",
		"LISTEN_FDNAMES=web", "WATCHDOG_USEC=20000000", "WATCHDOG_PID=1", workerEnv + "=99", workerNameEnv + "=1 0"}, 1)
	want := []string{"PATH=/bin", workerEnv + "=" + strconv.Itoa(protocolVersion), workerNameEnv + "=3 1",
		"GOMAXPROCS=" + strconv.Itoa(workerProcs(runtime.GOMAXPROCS(0), 2))}
	if !slices.Equal(env, want) {
		t.Errorf("workerEnviron = %q; want %q", env, want)
	}
	t.Setenv("GOMAXPROCS", "3") // the user's choice passes through unchanged
	want = []string{"GOMAXPROCS=3", workerEnv + "=" + strconv.Itoa(protocolVersion), workerNameEnv + "=3 0"}
	if env := s.workerEnviron([]string{"GOMAXPROCS=3"}, 0); !slices.Equal(env, want) {
		t.Errorf("workerEnviron with GOMAXPROCS set = %q; want %q", env, want)
	}
	t.Setenv("GOMAXPROCS", "")
	s.count.Store(5) // scaled to 5 (scale.go): a new worker gets a fifth
	want = []string{workerEnv + "=" + strconv.Itoa(protocolVersion), workerNameEnv + "=3 4", "GOMAXPROCS=2"}
	if env := s.workerEnviron(nil, 4); !slices.Equal(env, want) {
		t.Errorf("workerEnviron after a scale to 5 = %q; want %q", env, want)
	}
}

// TestWorkersGetAMemoryLimitUnlessTheEnvironmentSetsOne: under
// -max-worker-memory each worker gets GOMEMLIMIT a tenth below the bound,
// but a GOMEMLIMIT the environment sets passes through unchanged.
func TestWorkersGetAMemoryLimitUnlessTheEnvironmentSetsOne(t *testing.T) {
	s := newSupervisor(supervisorConfig{Workers: 2, Generation: 1, MaxMemory: 100 << 20}, nil, slog.New(slog.DiscardHandler), reports{})
	t.Setenv("GOMAXPROCS", "1")
	t.Setenv("GOMEMLIMIT", "")
	want := []string{"GOMAXPROCS=1", workerEnv + "=" + strconv.Itoa(protocolVersion), workerNameEnv + "=1 0", "GOMEMLIMIT=94371840B"}
	if env := s.workerEnviron([]string{"GOMAXPROCS=1"}, 0); !slices.Equal(env, want) {
		t.Errorf("workerEnviron = %q; want %q", env, want)
	}
	t.Setenv("GOMEMLIMIT", "50MiB")
	want = []string{"GOMAXPROCS=1", "GOMEMLIMIT=50MiB", workerEnv + "=" + strconv.Itoa(protocolVersion), workerNameEnv + "=1 0"}
	if env := s.workerEnviron([]string{"GOMAXPROCS=1", "GOMEMLIMIT=50MiB"}, 0); !slices.Equal(env, want) {
		t.Errorf("workerEnviron with GOMEMLIMIT set = %q; want %q", env, want)
	}
}
