package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

// serviceHarness runs a Service over test-binary workers, each generation
// built like the harness's one, and guarantees in t.Cleanup that no
// process of any generation outlives the test.
type serviceHarness struct {
	*harness
	svc *Service

	mu   sync.Mutex
	gens []*Supervisor
	// later holds the faults of generations after the first, by
	// generation and then worker index.
	later map[int]map[int]string
	// readTLS is what a reload's generation reads its TLS identity with;
	// nil: the first generation's.
	readTLS func() (*tlsIdentity, error)
	// wrap, when set, wraps each generation as the Service sees it.
	wrap func(gen *Supervisor, r reports) generation
	// signal, when set before the start, is how every generation signals
	// its workers.
	signal func(p *workerProc, sig os.Signal) error
}

func newServiceHarness(t *testing.T, workers int, faults map[int]string, edit ...func(*supervisorConfig)) *serviceHarness {
	t.Helper()
	h := &serviceHarness{harness: newHarness(t, workers, faults, edit...)}
	h.svc = newService(h.ln, slog.New(slog.NewTextHandler(h.logs, nil)), workers, h.build)
	t.Cleanup(h.cleanupService)
	return h
}

// build makes generation n as workerGenerations does, with the harness's
// test-binary workers and faults, and the Service's logger as it is now,
// so a test can hook it.
func (h *serviceHarness) build(n, workers int, keys [][]byte, r reports) generation {
	h.mu.Lock()
	readTLS, wrap := h.readTLS, h.wrap
	h.mu.Unlock()
	sup := workerGenerations(h.sup.cfg, h.ln, h.svc.log, readTLS)(n, workers, keys, r).(*Supervisor)
	h.record(sup)
	if wrap != nil {
		return wrap(sup, r)
	}
	return sup
}

// record sets the seam of a generation's workers and keeps the generation,
// so cleanup can find every worker.
func (h *serviceHarness) record(sup *Supervisor) {
	cfg := sup.cfg
	sup.seam.command = h.sup.seam.command
	if h.signal != nil {
		sup.seam.signal = h.signal
	}
	h.mu.Lock()
	if faults := h.later[cfg.Generation]; faults != nil {
		sup.seam.command = func(i int, args []string) (*exec.Cmd, error) {
			return h.worker(i, args, faults[i]), nil
		}
	}
	h.gens = append(h.gens, sup)
	h.mu.Unlock()
}

// cleanupService stops the service in a hurry, bounded, and kills every
// worker of every generation that is left.
func (h *serviceHarness) cleanupService() {
	hurry, cancel := context.WithCancel(context.Background())
	cancel()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		h.svc.Stop(hurry)
	}()
	select {
	case <-stopped:
	case <-time.After(cleanupBound):
		h.t.Errorf("Service.Stop in cleanup did not return within %v; killing the workers", cleanupBound)
	}
	for _, pid := range h.startedPIDs() {
		killGroup(pid)
	}
}

// shareTicketKeys gives the service a ticket keyring, as runSupervised
// does with TLS, and its generations the keys.
func (h *serviceHarness) shareTicketKeys() {
	keys, err := newTicketKeys()
	if err != nil {
		h.t.Fatal(err)
	}
	h.svc.keys = keys
}

// frozenSessionCache keeps the first session ticket it is given and offers
// it for every later connection, so a test can try one ticket again and
// again.
type frozenSessionCache struct {
	mu sync.Mutex
	cs *tls.ClientSessionState
}

func (c *frozenSessionCache) Get(string) (*tls.ClientSessionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cs, c.cs != nil
}

func (c *frozenSessionCache) Put(_ string, cs *tls.ClientSessionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cs == nil && cs != nil {
		c.cs = cs
	}
}

// resumption is what n connections saw: how many resumed a TLS session,
// and the answers they got (the probe app's answers name the worker).
type resumption struct {
	resumed int
	answers map[string]int
}

// resume opens n connections with cache, one after another, and keeps
// each open until all are done: a worker holding open connections paces
// its accepts, so the connections spread across workers. Each asks for /
// and reads the answer, which also delivers a TLS 1.3 ticket.
func resume(t *testing.T, addr string, cache tls.ClientSessionCache, version uint16, n int) resumption {
	t.Helper()
	r := resumption{answers: map[string]int{}}
	cfg := &tls.Config{InsecureSkipVerify: true, ClientSessionCache: cache, MinVersion: version, MaxVersion: version}
	for range n {
		conn, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: servery\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 100))
		resp.Body.Close()
		r.answers[string(body)]++
		if conn.ConnectionState().DidResume {
			r.resumed++
		}
	}
	return r
}

func TestTicketKeyRotationKeepsThePreviousKeyThenDropsIt(t *testing.T) {
	id, err := selfSignedIdentity("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(appEnv, "probe") // answers name the worker
	h := newServiceHarness(t, 3, nil, func(c *supervisorConfig) {
		c.Runtime.TLS = id
		c.Args = []string{"-marks", t.TempDir()}
	})
	h.shareTicketKeys()
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pids := h.servingPIDs()
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		old := &frozenSessionCache{}
		resume(t, h.addr, old, version, 1) // a full handshake; its ticket is kept
		h.svc.rotateTicketKeys()
		// The previous key still decrypts, in every worker. The rotation
		// reaches workers asynchronously, which cannot matter here: both
		// the old and the new keyring hold the old key. Each worker is
		// asked alone, its siblings paused, so the check does not rest
		// on how the kernel spreads connections.
		for i := range pids {
			r := resumeAlone(t, h.addr, pids, i, old, version, 4)
			if r.resumed != 4 || len(r.answers) != 1 {
				t.Errorf("TLS %x, worker %d alone: %d of 4 resumed after one rotation, answered by %v; want all, by that worker (the previous key stays valid)", version, i, r.resumed, r.answers)
			}
		}
		h.svc.rotateTicketKeys()
		// Now the old key is gone from every worker's keyring, once each
		// has read the message.
		for i := range pids {
			deadline := time.Now().Add(10 * time.Second)
			for resumeAlone(t, h.addr, pids, i, old, version, 4).resumed != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("TLS %x, worker %d alone: a ticket two rotations old still resumes; want its key dropped", version, i)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// resumeAlone is resume with only the worker pids[i] accepting
// (onlyWorker).
func resumeAlone(t *testing.T, addr string, pids []int, i int, cache tls.ClientSessionCache, version uint16, n int) (r resumption) {
	t.Helper()
	onlyWorker(pids, i, func() { r = resume(t, addr, cache, version, n) })
	return r
}

// onlyWorker runs fn with every worker but pids[i] paused, so that one
// accepts every connection fn makes, and continues the others after,
// even if fn ends the test.
func onlyWorker(pids []int, i int, fn func()) {
	for j, pid := range pids {
		if j != i {
			pause(pid)
			defer unpause(pid)
		}
	}
	fn()
}

func TestSessionsResumeWhicheverWorkerAnswers(t *testing.T) {
	skipWithoutWorkers(t)
	// Through the real binary: the keyring is the one makeIdentity makes.
	s := startServery(t, "-dir", t.TempDir(), "-tls-self-signed", "-workers", "4")
	pids := s.workerPIDs()
	if len(pids) != 4 {
		t.Fatalf("%d workers ready (%v); want 4:\n%s", len(pids), pids, s.logs())
	}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cache := &frozenSessionCache{}
		resume(t, s.addr, cache, version, 1)
		// Each worker is asked alone, so every one of them is checked
		// whatever the kernel's spread.
		for i := range pids {
			if r := resumeAlone(t, s.addr, pids, i, cache, version, 10); r.resumed < 9 {
				t.Errorf("TLS %x, worker %d alone: %d of 10 reconnections resumed; want at least 9", version, i, r.resumed)
			}
		}
	}
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Fatalf("exit status %d; want 0", code)
	}
	answering := 0
	for _, m := range countersRe.FindAllStringSubmatch(s.logs(), -1) {
		if m[1] != "0" {
			answering++
		}
	}
	if answering != len(pids) {
		t.Errorf("%d workers accepted connections; want all %d, each asked alone:\n%s", answering, len(pids), s.logs())
	}
}

// onMessage is a slog handler that runs hook, in the logging goroutine,
// when a record with the message msg is logged.
type onMessage struct {
	slog.Handler
	msg  string
	hook func()
}

func (h onMessage) WithAttrs(as []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(as)
	return h
}

func (h onMessage) WithGroup(name string) slog.Handler {
	h.Handler = h.Handler.WithGroup(name)
	return h
}

func (h onMessage) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.hook()
	}
	return h.Handler.Handle(ctx, r)
}

func TestReadyIsNeverNotifiedAfterStopping(t *testing.T) {
	h := newServiceHarness(t, 2, nil)
	var mu sync.Mutex
	var states []string
	h.svc.notify = func(s ...string) {
		mu.Lock()
		states = append(states, s...)
		mu.Unlock()
	}
	stopping := make(chan struct{})
	// A stop that begins in the instant between the generation becoming
	// ready and Start returning, as a signal can: the generation's own
	// "generation ready" line runs it, and holds Start until STOPPING=1.
	h.svc.log = slog.New(onMessage{Handler: h.svc.log.Handler(), msg: "generation ready", hook: func() {
		go func() {
			h.svc.Stop(context.Background())
		}()
		for {
			mu.Lock()
			sent := slices.Contains(states, "STOPPING=1")
			mu.Unlock()
			if sent {
				close(stopping)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}})
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatalf("Start = %v", err)
	}
	<-stopping
	if err := h.svc.Stop(context.Background()); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if i := slices.Index(states, "READY=1"); i >= 0 && i > slices.Index(states, "STOPPING=1") {
		t.Errorf("notifications %q: READY=1 after STOPPING=1", states)
	}
}

func TestServingWorkerLostAsAReloadBecomesReadyEndsTheService(t *testing.T) {
	h := newServiceHarness(t, 2, nil)
	h.svc.policy.MaxRestarts = 0 // the fixed generation
	var armed atomic.Bool
	var lostPID int
	// The serving generation loses a worker in the instant between the
	// new generation's last ready and the reload promoting it, and the
	// service begins to end before the reload looks: the new generation
	// must be stopped with the rest, and the service must end.
	h.svc.log = slog.New(onMessage{Handler: h.svc.log.Handler(), msg: "generation ready", hook: func() {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		killGroup(lostPID)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if h.svc.state().Ending {
				return
			}
		}
		t.Error("the service did not begin to end after its serving worker was lost")
	}})
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	lostPID = h.servingPIDs()[0]
	armed.Store(true)
	if err := h.svc.Reload(context.Background()); !errors.Is(err, errNotServing) {
		t.Errorf("Reload = %v; want %v (the service is ending)", err, errNotServing)
	}
	select {
	case <-h.svc.done:
	case <-time.After(15 * time.Second):
		t.Fatal("the service never ended after its serving generation lost a worker during a reload")
	}
	if err := h.svc.err; err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", lostPID)) {
		t.Errorf("the service ended with %v; want the lost worker (pid %d) named", err, lostPID)
	}
	for _, pid := range h.startedPIDs() {
		if !waitGone(pid, time.Second) {
			t.Errorf("worker pid %d of either generation outlived the end", pid)
		}
	}
}

// lostBeforeServing is a generation that loses worker 1 after its Start
// succeeded and returns only once the loss has reached the lifecycle
// loop: the loop learns of the loss before it sees the generation ready.
// Meanwhile one more reload is asked for (then, if set).
type lostBeforeServing struct {
	*Supervisor
	reported chan struct{}
	then     func()
}

func (g *lostBeforeServing) Start(ctx context.Context) error {
	if err := g.Supervisor.Start(ctx); err != nil {
		return err
	}
	killGroup(g.pids()[1])
	<-g.reported
	g.then()
	return nil
}

func TestReloadFailsIfItsGenerationLostAWorkerBeforeServing(t *testing.T) {
	h := newServiceHarness(t, 2, nil)
	h.wrap = func(sup *Supervisor, r reports) generation {
		if sup.cfg.Generation != 2 {
			return sup
		}
		g := &lostBeforeServing{Supervisor: sup, reported: make(chan struct{}), then: h.svc.requestReload}
		sup.onLost = func(err error) {
			r.lost(err)
			close(g.reported)
		}
		return g
	}
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := h.servingPIDs()
	var lost *workerError
	if err := h.svc.Reload(context.Background()); !errors.As(err, &lost) || lost.Index != 1 {
		t.Errorf("Reload = %v; want the new generation's lost worker 1", err)
	}
	if got := h.servingPIDs(); !slices.Equal(got, before) {
		t.Errorf("serving pids %v after the failed reload; want %v unchanged", got, before)
	}
	select {
	case <-h.svc.done:
		t.Fatalf("the service ended: %v; want the serving generation to go on", h.svc.err)
	default:
	}
	if code, _, err := get(h.addr, "/"); err != nil || code != 200 {
		t.Errorf("GET / = %d %v; want the serving generation answering", code, err)
	}
	// The reload asked for meanwhile runs once the failed generation has
	// stopped: generation 3 serves.
	for deadline := time.Now().Add(10 * time.Second); h.svc.state().Serving != 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the reload queued behind the failed one never ran: %+v", h.svc.state())
		}
	}
}

func TestStartAfterStopIsACleanStop(t *testing.T) {
	h := newServiceHarness(t, 2, nil)
	if err := h.svc.Stop(context.Background()); err != nil {
		t.Fatalf("Stop before Start = %v; want nil", err)
	}
	if err := h.svc.Start(context.Background()); !errors.Is(err, context.Canceled) {
		t.Errorf("Start after Stop = %v; want it to wrap context.Canceled, which the front end takes as a clean stop", err)
	}
	if pids := h.startedPIDs(); len(pids) != 0 {
		t.Errorf("Start after Stop started workers %v", pids)
	}
}

func TestReloadHandsTheNewGenerationTheCurrentTicketKeys(t *testing.T) {
	id, err := selfSignedIdentity("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	t.Setenv(gateEnv, gate)
	h := newServiceHarness(t, 2, nil, func(c *supervisorConfig) { c.Runtime.TLS = id })
	h.shareTicketKeys()
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The new generation is configured, then held at prepared while the
	// keys rotate twice: the keys in its config are two rotations old.
	h.mu.Lock()
	h.later = map[int]map[int]string{2: {0: faultHeldPrepared, 1: faultHeldPrepared}}
	h.mu.Unlock()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	reloaded := make(chan error, 1)
	go func() { reloaded <- h.svc.Reload(context.Background()) }()
	for !strings.Contains(h.readLogs(), `msg="holding prepared"`) {
		time.Sleep(5 * time.Millisecond)
	}
	h.svc.rotateTicketKeys()
	h.svc.rotateTicketKeys()
	os.Remove(gate)
	if err := <-reloaded; err != nil {
		t.Fatalf("Reload = %v", err)
	}
	// Promotion sends the keys as they are now to every new worker.
	installed := regexp.MustCompile(`msg="ticket keys installed"[^\n]* generation=2 `)
	for deadline := time.Now().Add(10 * time.Second); len(installed.FindAllString(h.readLogs(), -1)) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the new generation's workers never got the current ticket keys:\n%s", h.readLogs())
		}
	}
	// So a ticket the new generation issues now survives the next rotation.
	h.waitRetired()
	cache := &frozenSessionCache{}
	resume(t, h.addr, cache, tls.VersionTLS13, 1)
	h.svc.rotateTicketKeys()
	if r := resume(t, h.addr, cache, tls.VersionTLS13, 8); r.resumed != 8 {
		t.Errorf("%d of 8 resumed after one rotation; want all (the previous key stays valid)", r.resumed)
	}
}
