package main

// reliability_test.go stops generations in the ways production does, under
// load and mid-response, and checks what clients and the process table see
// afterwards. bench/soak.sh runs TestGracefulStopUnderLoadTruncatesNothing
// many times under more load (SERVERY_SOAK_CLIENTS, SERVERY_SOAK_DURATION)
// and sums the "soak:" line each run logs.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
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

const (
	soakClientsEnv  = "SERVERY_SOAK_CLIENTS"  // load goroutines; default 16
	soakDurationEnv = "SERVERY_SOAK_DURATION" // load before the stop; default 300ms
)

// outcome is what one HTTP/1.1 exchange on a raw connection came to.
type outcome int

const (
	outComplete       outcome = iota // status line, headers and the whole Content-Length body
	outRefused                       // the dial failed: the listener is closed
	outClosedNoAnswer                // the connection closed before any response byte: the keep-alive race
	outTruncated                     // some response bytes, not all of them
	outOther                         // anything else: a wrong status or body, a stall, a dial error while serving
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"complete", "refused", "closed_before_response", "truncated", "other"}

// loadTally counts outcomes across client goroutines and keeps a few
// examples of the ones that should not happen.
type loadTally struct {
	n     [numOutcomes]atomic.Int64
	late  atomic.Int64 // complete exchanges sent once the stop had begun
	mu    sync.Mutex
	notes []string
}

func (l *loadTally) add(o outcome, note string) {
	l.n[o].Add(1)
	if (o == outTruncated || o == outOther) && note != "" {
		l.mu.Lock()
		if len(l.notes) < 10 {
			l.notes = append(l.notes, outcomeNames[o]+": "+note)
		}
		l.mu.Unlock()
	}
}

func (l *loadTally) get(o outcome) int64 { return l.n[o].Load() }

// String is the line bench/soak.sh parses; keep its shape stable.
func (l *loadTally) String() string {
	parts := make([]string, numOutcomes)
	for o := range numOutcomes {
		parts[o] = fmt.Sprintf("%s=%d", outcomeNames[o], l.get(o))
	}
	return "soak: " + strings.Join(parts, " ") + fmt.Sprintf(" complete_after_stop_began=%d", l.late.Load())
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// rawClient is one keep-alive HTTP/1.1 connection, read through a counter
// so an error can be told apart by whether any response byte had arrived.
type rawClient struct {
	conn net.Conn
	cr   *countingReader
	br   *bufio.Reader
}

func dialRaw(addr string) (*rawClient, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	cr := &countingReader{r: conn}
	return &rawClient{conn: conn, cr: cr, br: bufio.NewReader(cr)}, nil
}

// exchange sends GET path and classifies what comes back against want. It
// reports whether the connection may carry another request.
func (c *rawClient) exchange(path string, want []byte) (o outcome, note string, reuse bool) {
	c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if c.br.Buffered() != 0 {
		return outOther, "bytes beyond the previous response", false
	}
	before := c.cr.n
	// A failed write means the server had closed the connection; nothing
	// of a response to this request can have been sent.
	if _, err := io.WriteString(c.conn, "GET "+path+" HTTP/1.1\r\nHost: servery\r\n\r\n"); err != nil {
		return outClosedNoAnswer, "", false
	}
	failed := func(err error) (outcome, string, bool) {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return outOther, fmt.Sprintf("GET %s: stalled after %d bytes: %v", path, c.cr.n-before, err), false
		case c.cr.n == before:
			return outClosedNoAnswer, "", false
		}
		return outTruncated, fmt.Sprintf("GET %s: %d bytes, then %v", path, c.cr.n-before, err), false
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return failed(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return failed(err)
	}
	switch {
	case resp.StatusCode != http.StatusOK:
		return outOther, fmt.Sprintf("GET %s: status %d", path, resp.StatusCode), false
	case resp.ContentLength != int64(len(want)):
		return outOther, fmt.Sprintf("GET %s: Content-Length %d, want %d", path, resp.ContentLength, len(want)), false
	case !bytes.Equal(body, want):
		return outOther, fmt.Sprintf("GET %s: body differs", path), false
	}
	return outComplete, "", !resp.Close
}

// hammer runs one keep-alive client until a dial is refused once the stop
// has begun, or until deadline. Closed and truncated exchanges are not
// retried on the same connection: the next request dials again.
func hammer(addr string, paths []string, want map[string][]byte, stopping *atomic.Bool, deadline time.Time, tally *loadTally) {
	var c *rawClient
	defer func() {
		if c != nil {
			c.conn.Close()
		}
	}()
	for i := 0; ; i++ {
		if time.Now().After(deadline) {
			tally.add(outOther, "client still served past its deadline")
			return
		}
		if c == nil {
			wasStopping := stopping.Load()
			var err error
			if c, err = dialRaw(addr); err != nil {
				if wasStopping {
					tally.add(outRefused, "")
				} else {
					tally.add(outOther, "dial before the stop: "+err.Error())
				}
				return
			}
		}
		path := paths[i%len(paths)]
		late := stopping.Load()
		o, note, reuse := c.exchange(path, want[path])
		tally.add(o, note)
		if o == outComplete && late {
			tally.late.Add(1)
		}
		if !reuse {
			c.conn.Close()
			c = nil
		}
	}
}

// envInt and envDuration read the soak's knobs, with the normal suite's
// defaults.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}

func TestGracefulStopUnderLoadTruncatesNothing(t *testing.T) {
	clients := envInt(t, soakClientsEnv, 16)
	load := envDuration(t, soakDurationEnv, 300*time.Millisecond)
	// A drain long enough for a busy box: what is measured is that
	// nothing in flight is cut, not how fast it finishes.
	h := newHarness(t, 4, nil, func(c *supervisorConfig) {
		c.DrainTimeout, c.ForceTimeout = 30*time.Second, 40*time.Second
		c.Runtime.DrainTimeout = c.DrainTimeout
	})
	want := map[string][]byte{
		"/":         []byte("hello"),
		"/data.bin": bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16),  // cached
		"/big.bin":  bytes.Repeat([]byte("fedcba9876543210"), 256<<10/16), // streamed from disk
	}
	writeFile(t, h.dir, "data.bin", string(want["/data.bin"]))
	writeFile(t, h.dir, "big.bin", string(want["/big.bin"]))
	const hugeSize = 32 << 20 // more than the socket buffers hold
	writeFile(t, h.dir, "huge.bin", strings.Repeat("h", hugeSize))
	paths := []string{"/data.bin", "/", "/data.bin", "/big.bin"}
	h.start()
	// One response is certainly in flight when the stop begins, whatever
	// the load does: its client has read only the first 64 KiB.
	inFlight := startDownload(t, h.addr, "/huge.bin")
	defer inFlight.Close()

	var (
		tally    loadTally
		stopping atomic.Bool
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(load + 30*time.Second)
	for i := range clients {
		rotated := slices.Concat(paths[i%len(paths):], paths[:i%len(paths)])
		wg.Go(func() { hammer(h.addr, rotated, want, &stopping, deadline, &tally) })
	}
	time.Sleep(load)
	// Stop only once requests are being answered, so "complete > 0" does
	// not depend on how fast the machine is.
	for tally.get(outComplete) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stopping.Store(true)
	began := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- h.stop(context.Background()) }()
	time.Sleep(100 * time.Millisecond) // the drain is under way
	if n, err := io.Copy(io.Discard, inFlight); err != nil || n+64<<10 != hugeSize {
		t.Errorf("the response in flight at the stop: %d bytes, %v; want all %d", n+64<<10, err, hugeSize)
	}
	err := <-stopped
	took := time.Since(began)
	wg.Wait()

	t.Log(tally.String())
	t.Logf("stop took %v with %d clients after %v of load", took.Round(time.Millisecond), clients, load)
	if err != nil {
		t.Errorf("Stop() = %v; want nil", err)
	}
	if n := tally.get(outTruncated); n != 0 {
		t.Errorf("%d responses truncated; want none: %q", n, tally.notes)
	}
	if n := tally.get(outOther); n != 0 {
		t.Errorf("%d exchanges neither complete, refused nor closed before a response: %q", n, tally.notes)
	}
	if tally.get(outComplete) == 0 {
		t.Error("no request completed")
	}
	h.assertAllGone()
}

func TestParentSIGKILLDrainsWorkers(t *testing.T) {
	skipWithoutWorkers(t)
	const drain = time.Second
	dir, _ := siteWithBigFile(t)
	s := startServery(t, "-dir", dir, "-workers", "3", "-drain-timeout", drain.String(), "-force-timeout", "2s")
	pids := s.workerPIDs()
	if len(pids) != 3 {
		t.Fatalf("logged worker pids %v; want 3", pids)
	}
	// In flight and never read further: its worker cannot finish draining
	// and must give up at its own drain timeout, with no parent to push it.
	body := startBigDownload(t, s.addr)
	defer body.Close()
	// Their log went through the parent, so only their exits can say
	// that each drained on the EOF of its fd 4 rather than dying some
	// other way: its own status, 1 for the drain the download cut.
	adopted := adoptOrphans(t)
	killed := time.Now()
	s.signal(syscall.SIGKILL)
	s.wait(5 * time.Second)
	for _, pid := range pids {
		within := drain + 2*time.Second - time.Since(killed)
		if !adopted {
			if !waitGone(pid, within) {
				t.Errorf("worker pid %d still running %v after the parent was killed; want gone within the drain timeout (%v) + 2s",
					pid, time.Since(killed).Round(time.Millisecond), drain)
			}
			continue
		}
		ws, err := orphanExit(pid, within)
		switch {
		case err != nil:
			t.Errorf("worker pid %d %v %v after the parent was killed; want gone within the drain timeout (%v) + 2s",
				pid, err, time.Since(killed).Round(time.Millisecond), drain)
		case !ws.Exited():
			t.Errorf("worker pid %d ended by %v; want its own exit, after its drain", pid, ws.Signal())
		}
	}
	if !portRefusesWithin(s.addr, 2*time.Second) {
		t.Errorf("port %s still accepts connections after every worker exited", s.addr)
	}
}

func TestWorkerKilledAfterReadyStopsGenerationCleanly(t *testing.T) {
	skipWithoutWorkers(t)
	s := startServery(t, "-dir", t.TempDir(), "-workers", "3", "-drain-timeout", "2s", "-force-timeout", "4s", "-max-restarts", "0")
	pids := s.workerPIDs()
	if len(pids) != 3 {
		t.Fatalf("logged worker pids %v; want 3", pids)
	}
	lost := pids[1] // workers start, and log, in index order
	if !strings.Contains(s.logs(), fmt.Sprintf(`msg="worker started" generation=1 worker=1 pid=%d`, lost)) {
		t.Fatalf("pid %d is not worker 1 in the log", lost)
	}
	kill(lost)
	if code := s.wait(10 * time.Second); code != exitFailure {
		t.Errorf("exit status %d; want %d", code, exitFailure)
	}
	s.assertNoWorkersLeft()
	if !portRefusesWithin(s.addr, 2*time.Second) {
		t.Errorf("port %s still accepts connections after servery exited", s.addr)
	}
	logs := s.logs()
	for _, re := range []string{
		fmt.Sprintf(`level=ERROR msg="worker lost" generation=1 worker=1 pid=%d reason="exited: signal: killed"`, lost),
		fmt.Sprintf(`level=ERROR msg="stopped with error" generation=1 err="generation lost worker 1 \(pid %d\)`, lost),
	} {
		if !regexp.MustCompile(re).MatchString(logs) {
			t.Errorf("no log line matching %s", re)
		}
	}
	// The survivors were drained, not killed.
	if n := strings.Count(logs, `msg="worker drained"`); n != len(pids)-1 {
		t.Errorf("%d workers logged a drain; want the %d survivors", n, len(pids)-1)
	}
}

func TestUnfinishableDrainEndsByForceDeadline(t *testing.T) {
	const drain, force = 300 * time.Millisecond, 800 * time.Millisecond
	h := newHarness(t, 2, nil, func(c *supervisorConfig) {
		c.DrainTimeout, c.ForceTimeout = drain, force
		// The workers' own drain would outlast both deadlines.
		c.Runtime.DrainTimeout = 10 * time.Second
	})
	const size = 32 << 20
	writeFile(t, h.dir, "big.bin", strings.Repeat("z", size))
	h.start()

	c, err := dialRaw(h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.conn.Close()
	if _, err := io.WriteString(c.conn, "GET /big.bin HTTP/1.1\r\nHost: servery\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c.br, make([]byte, 1<<10)); err != nil {
		t.Fatal(err)
	}
	// A client reading 1 KiB every 50 ms would need about half an hour.
	stopReading := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		buf := make([]byte, 1<<10)
		for {
			select {
			case <-stopReading:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := c.br.Read(buf); err != nil {
				return
			}
		}
	})
	defer reader.Wait()
	defer close(stopReading)

	began := time.Now()
	err = h.stop(context.Background())
	took := time.Since(began)
	if err != nil {
		t.Errorf("Stop() = %v; want nil (every worker reaped)", err)
	}
	if took < drain || took > force+finalGrace {
		t.Errorf("Stop took %v; want at least the drain timeout (%v), at most the force deadline + grace (%v)", took, drain, force+finalGrace)
	}
	logs, _ := os.ReadFile(h.logs.Name())
	if !strings.Contains(string(logs), `msg="worker outlived deadline"`) {
		t.Errorf("no worker outlived the drain deadline; want the one with the slow client escalated:\n%s", logs)
	}
	h.assertAllGone()
}
