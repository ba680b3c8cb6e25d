//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// jsonServingRe finds the address in a JSON log's serving record.
var jsonServingRe = regexp.MustCompile(`"msg":"serving".*"url":"https?://([^/"]+)/"`)

// startJSONServery starts servery with the probe app and -log-format
// json, and waits until it serves.
func startJSONServery(t *testing.T, args ...string) *servery {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-addr", "127.0.0.1:0", "-log-format", "json", "-marks", t.TempDir()}, args...)...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", appEnv+"=probe")
	s := spawnServery(t, cmd)
	deadline := time.Now().Add(10 * time.Second)
	for s.addr == "" {
		if m := jsonServingRe.FindStringSubmatch(s.logs()); m != nil {
			s.addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("servery did not start serving:\n%s", s.logs())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return s
}

// jsonStartedRe finds a started worker's pid in a JSON log.
var jsonStartedRe = regexp.MustCompile(`"msg":"worker started","generation":\d+,"worker":\d+,"pid":(\d+)`)

// jsonWorkerPIDs returns the pids of the workers s started, as its JSON
// log names them.
func jsonWorkerPIDs(s *servery) []int {
	var pids []int
	for _, m := range jsonStartedRe.FindAllStringSubmatch(s.logs(), -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	return pids
}

// jsonRecords parses every line of the log at path as a JSON object,
// failing the test for any line that is not one.
func jsonRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Errorf("a log line that is no JSON object: %.300q: %v", sc.Text(), err)
			continue
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestJSONLogIsOneObjectALineWithPrintsPanicsDumpsAndAReload(t *testing.T) {
	skipWithoutWorkers(t)
	s := startJSONServery(t, "-workers", "2", "-print", "-max-restarts", "10")
	for _, path := range []string{"/", "/panic"} {
		if code, _, err := get(s.addr, path); err != nil {
			t.Fatal(err)
		} else if path == "/panic" && code != http.StatusInternalServerError {
			t.Errorf("GET /panic: %d; want 500", code)
		}
	}
	// Both workers dump their stacks at once, as a hung mount under -dir
	// makes every worker hang.
	pids := jsonWorkerPIDs(s)
	if len(pids) != 2 {
		t.Fatalf("worker pids %v; want 2", pids)
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGQUIT)
	}
	for _, pid := range pids {
		waitLog(t, s, fmt.Sprintf(`"msg":"worker respawned","generation":1,"worker":\d,"old_pid":%d`, pid))
	}
	s.signal(syscall.SIGHUP)
	waitLog(t, s, `"msg":"reloaded"`)
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Fatalf("exit status %d; want 0", code)
	}
	dumped, printed, panicked := map[float64]int{}, false, false
	for _, rec := range jsonRecords(t, s.stderr) {
		switch rec["msg"] {
		case "handler panicked":
			panicked = rec["pid"] != nil && rec["stack"] != nil
		case "worker output":
			pid, ok := rec["pid"].(float64)
			if !ok || rec["worker"] == nil || rec["generation"] == nil || rec["stream"] == nil {
				t.Errorf("an output record that does not name its worker: %v", rec)
			}
			text := []any{rec["line"]}
			if lines, ok := rec["lines"].([]any); ok {
				text = lines // prints that came together
			}
			for _, line := range text {
				if line, _ := line.(string); strings.HasPrefix(line, "got request /") && rec["stream"] == "stdout" {
					printed = true
				}
			}
			// A dump is one record, or a few if the runtime paused
			// for longer than rawBlockWait while it wrote.
			if lines, _ := rec["lines"].([]any); len(lines) > 0 && (lines[0] == "SIGQUIT: quit" || dumped[pid] > 0) {
				dumped[pid] += len(lines)
			}
		}
	}
	for _, pid := range pids {
		if dumped[float64(pid)] < 10 {
			t.Errorf("worker pid %d's stack dump is not in records of its own, as lines (%v):\n%s", pid, dumped, s.logs())
		}
	}
	if !printed || !panicked {
		t.Errorf("a program's print (%v) or its handler's panic (%v) is not in the log as a record of its worker:\n%s", printed, panicked, s.logs())
	}
}

func TestAccessLogFileLogsEveryRequestOnceAcrossRotations(t *testing.T) {
	for _, workers := range []string{"1", "4"} {
		t.Run("workers="+workers, func(t *testing.T) {
			if workers != "1" {
				skipWithoutWorkers(t)
			}
			logsEveryRequestOnceAcrossRotations(t, workers)
		})
	}
}

// logsEveryRequestOnceAcrossRotations sends 3,000 requests from 30
// clients while the access log file is rotated five times, and checks
// that each is logged once, whole, in one of the six files.
func logsEveryRequestOnceAcrossRotations(t *testing.T, workers string) {
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	path := filepath.Join(t.TempDir(), "access.log")
	s := startServery(t, "-dir", site, "-workers", workers, "-access-log", path)
	const requests, rotations, clients = 3000, 5, 30
	var next, answered atomic.Int64
	errs := make(chan error, clients)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for range clients {
		go func() {
			for n := next.Add(1); n <= requests; n = next.Add(1) {
				resp, err := client.Get(fmt.Sprintf("http://%s/index.html?seq=%d", s.addr, n))
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				answered.Add(1)
			}
			errs <- nil
		}()
	}
	// logrotate's way: move the file, then SIGUSR1, after each sixth of
	// the requests, while they run.
	for k := 1; k <= rotations; k++ {
		for answered.Load() < int64(k*requests/(rotations+1)) {
			time.Sleep(time.Millisecond)
		}
		if err := os.Rename(path, fmt.Sprintf("%s.%d", path, k)); err != nil {
			t.Fatal(err)
		}
		s.signal(syscall.SIGUSR1)
		for strings.Count(s.logs(), `msg="access log reopened"`) < k {
			time.Sleep(time.Millisecond)
		}
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Fatalf("exit status %d; want 0", code)
	}
	line := regexp.MustCompile(`^127\.0\.0\.1:\d+ - - \[[^]]+\] "GET /index\.html\?seq=(\d+) HTTP/1\.1" 200 5 "-" "Go-http-client/1\.1" \d+us$`)
	seen := map[int]int{}
	for k := 1; k <= rotations+1; k++ {
		name := fmt.Sprintf("%s.%d", path, k)
		if k > rotations {
			name = path // written since the last rotation
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%v (every rotation should leave a file, the last one at the path)", err)
		}
		if len(b) == 0 {
			// A rotation can fall between two of a worker's flushes
			// (accessFlush); the last file gets at least the lines the
			// stop flushes.
			if k > rotations {
				t.Errorf("%s is empty; want the lines written since the last rotation", name)
			}
			continue
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			m := line.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("%s: a line that is not one whole access line: %q", name, l)
				continue
			}
			n, _ := strconv.Atoi(m[1])
			seen[n]++
		}
	}
	for n := 1; n <= requests; n++ {
		if seen[n] != 1 {
			t.Errorf("request %d logged %d times; want once", n, seen[n])
		}
	}
}

func TestWorkerWhoseParentIsKilledWhileItLogsDrainsAndExits0(t *testing.T) {
	skipWithoutWorkers(t)
	if !adoptOrphans(t) {
		t.Skip("only a subreaper learns how an orphan exited (Linux)")
	}
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	s := startServery(t, "-dir", site, "-workers", "2", "-access-log", "-", "-drain-timeout", "5s")
	pids := s.workerPIDs()
	if len(pids) != 2 {
		t.Fatalf("worker pids %v; want 2", pids)
	}
	// Requests keep coming, so the workers write access lines, then
	// their drain's records, into pipes no one reads any more.
	stop := make(chan struct{})
	defer close(stop)
	for range 4 {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
					get(s.addr, "/")
				}
			}
		}()
	}
	waitLog(t, s, `"GET / HTTP/1.1" 200`)
	s.signal(syscall.SIGKILL)
	s.wait(5 * time.Second)
	for _, pid := range pids {
		ws, err := orphanExit(pid, 20*time.Second)
		switch {
		case err != nil:
			t.Errorf("worker %d after its parent was killed: %v", pid, err)
		case !ws.Exited() || ws.ExitStatus() != 0:
			t.Errorf("worker %d ended %v (signal %v); want exit status 0: it drained on its parent's death, though the pipes its output went to broke", pid, ws, ws.Signal())
		}
	}
}

func TestAccessLogInJSONSkipsPathsAndCapsLongFields(t *testing.T) {
	skipWithoutWorkers(t)
	s := startJSONServery(t, "-workers", "2", "-access-log", "-", "-access-log-skip", "/livez,/healthz")
	long := strings.Repeat("q", 3*maxAccessField)
	for _, path := range []string{"/livez", "/healthz", "/a?" + long, "/b"} {
		req, _ := http.NewRequest("GET", "http://"+s.addr+path, nil)
		req.Header.Set("User-Agent", long)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	waitLog(t, s, `"msg":"access".*"uri":"/b"`)
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Fatalf("exit status %d; want 0", code)
	}
	var access []map[string]any
	for _, rec := range jsonRecords(t, s.stderr) {
		if rec["msg"] == "access" {
			access = append(access, rec)
		}
	}
	if len(access) != 2 {
		t.Fatalf("%d access records; want 2, /livez and /healthz left out: %v", len(access), access)
	}
	a := access[0]
	if a["uri"] == "/b" {
		a = access[1]
	}
	uri, _ := a["uri"].(string)
	ua, _ := a["user_agent"].(string)
	if a["method"] != "GET" || a["status"] != float64(200) || a["proto"] != "HTTP/1.1" || a["remote"] == nil || a["duration_us"] == nil ||
		!strings.HasSuffix(uri, accessCutMark) || len(uri) != maxAccessField+len(accessCutMark) || !strings.HasSuffix(ua, accessCutMark) {
		t.Errorf("access record %.400v; want GET, 200, HTTP/1.1, remote, duration_us, and the URI and User-Agent cut at %d bytes with %q", a, maxAccessField, accessCutMark)
	}
}

// gatedLog copies a pipe into a log file while it is not paused: a test
// pauses it to make servery's log output as slow as a stuck terminal or
// a full disk. A read under way when it pauses finishes first.
type gatedLog struct {
	mu     sync.Mutex
	resume *sync.Cond
	paused bool
}

func newGatedLog() *gatedLog {
	g := &gatedLog{}
	g.resume = sync.NewCond(&g.mu)
	return g
}

func (g *gatedLog) pause(p bool) {
	g.mu.Lock()
	g.paused = p
	g.mu.Unlock()
	g.resume.Broadcast()
}

func (g *gatedLog) copy(r io.Reader, w io.Writer) {
	buf := make([]byte, 32<<10)
	for {
		g.mu.Lock()
		for g.paused {
			g.resume.Wait()
		}
		g.mu.Unlock()
		n, err := r.Read(buf)
		w.Write(buf[:n])
		if err != nil {
			return
		}
	}
}

func TestASlowLogDropsWorkerLinesAndCountsThemWithoutSlowingRequests(t *testing.T) {
	skipWithoutWorkers(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-workers", "2", "-print", "-status-addr", "127.0.0.1:0", "-marks", t.TempDir())
	cmd.Env = append(os.Environ(), mainEnv+"=1", appEnv+"=probe")
	s := &servery{t: t, cmd: cmd, stderr: filepath.Join(t.TempDir(), "stderr.log"), exited: make(chan struct{})}
	logf, err := os.Create(s.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	go func() { s.status = cmd.Wait(); close(s.exited) }()
	t.Cleanup(s.kill)
	g := newGatedLog()
	go g.copy(r, logf)
	waitLog(t, s, `msg=serving `)
	s.addr = servingRe.FindStringSubmatch(s.logs())[1]
	status := statusRe.FindStringSubmatch(s.logs())
	if status == nil {
		t.Fatalf("no status listener in the log:\n%s", s.logs())
	}
	// The log stops moving. Each request prints 8 KiB: 12 MiB in all,
	// more than a pipe, the parent's queue's bytes and its batches hold;
	// every request must still be answered.
	g.pause(true)
	defer g.pause(false)
	path := "/" + strings.Repeat("x", 8<<10)
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range 1500 {
		resp, err := client.Get("http://" + s.addr + path)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // not the 8 KiB URL
			}
			t.Fatalf("request %d with the log stuck: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	doc := readStatus(t, status[1])
	g.pause(false)
	if doc.LogLinesDropped == 0 {
		t.Errorf("log_lines_dropped = 0 after 12 MiB of prints into a stuck log; want the lines dropped counted")
	}
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Fatalf("exit status %d; want 0", code)
	}
}
