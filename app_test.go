package main

// app_test.go proves the application contract: the design record's claims
// (DESIGN, "Design record to code") for its WSGI and ASGI runtimes, held by an App's start and stop steps.
// The workers run probeApp, which records what it does as marker files.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// appEnv makes a test worker serve probeApp instead of the static site.
const appEnv = "SERVERY_TEST_APP"

// probeApp is an App whose flags choose a fault in one worker's start or
// stop. It writes a marker file in -marks for each step it takes, holding
// the time it took it, and answers every request with its identity;
// /slow answers after -slow, and -ballast makes every worker that much
// bigger from its start.
func probeApp(fs *flag.FlagSet) App {
	p := &probe{}
	fs.StringVar(&p.marks, "marks", "", "directory for marker files")
	fs.StringVar(&p.startFault, "start-fault", "", "slow, fail, panic, or hang (ignoring its context)")
	fs.IntVar(&p.faultWorker, "fault-worker", 0, "the worker whose start misbehaves")
	fs.IntVar(&p.faultGeneration, "fault-generation", 0, "the generation whose start misbehaves; 0: every one")
	fs.StringVar(&p.stopFault, "stop-fault", "", "hang, fail, or slow (-slow long)")
	fs.IntVar(&p.stopFaultGeneration, "stop-fault-generation", 0, "the generation whose stop misbehaves; 0: every one")
	fs.DurationVar(&p.slow, "slow", 500*time.Millisecond, "how long /slow takes, and a slow start")
	fs.Var((*byteSize)(&p.ballast), "ballast", "resident bytes every worker's start allocates, touches and keeps")
	fs.IntVar(&p.parentReloads, "parent-reloads", 0, "reloads the program's parent asks for through Control, then it stops; 0: no Parent")
	fs.IntVar(&p.parentScale, "parent-scale", 0, "the worker count the program's parent asks for through Control before its reloads; 0: none")
	fs.BoolVar(&p.print, "print", false, "print a line to stdout in the start step and in every request, as a debugging program does")
	fs.StringVar(&p.healthFault, "health-fault", "", "hang-once: the first -fault-worker's health check never returns (ignoring its context); later ones pass. hang: every worker's, every time, as a database every worker waits on does. fail: every check of the first -fault-worker process returns an error (its replacement's pass)")
	fs.BoolVar(&p.slowAlive, "slow-alive", false, "/slow tells servery it is alive (Alive) every tenth of -slow")
	app := App{Start: p.start, Stop: p.stop, Health: p.health}
	if os.Getenv(workerEnv) == "" {
		app.Parent = p.parent
	}
	return app
}

// parent is the probe's App.Parent: once serving, it asks for
// the -parent-scale count, if any, and marks its result as parent-scale;
// then -parent-reloads reloads one after another, marks each result as
// parent-reload-N (its text: ok, or the error), then asks for the stop.
func (p *probe) parent(ctx context.Context, c *Control) {
	if p.parentReloads == 0 {
		return
	}
	if p.parentScale > 0 {
		result := "ok"
		if err := c.Scale(ctx, p.parentScale); err != nil {
			result = err.Error()
		}
		os.WriteFile(filepath.Join(p.marks, "parent-scale"), []byte(result), 0o644)
	}
	for i := 1; i <= p.parentReloads; i++ {
		result := "ok"
		if err := c.Reload(ctx); err != nil {
			result = err.Error()
		}
		os.WriteFile(filepath.Join(p.marks, fmt.Sprintf("parent-reload-%d", i)), []byte(result), 0o644)
	}
	c.Stop()
}

// probe holds probeApp's flags.
type probe struct {
	marks, startFault, stopFault string
	faultWorker, faultGeneration int
	stopFaultGeneration          int
	parentReloads, parentScale   int
	slow                         time.Duration
	ballast                      int64
	print                        bool
	healthFault                  string
	slowAlive                    bool
	// deadlock is what /deadlock takes and never gives back: the first
	// request takes it, every later one waits for ever.
	deadlock sync.Mutex
}

// health is the probe's App.Health: it passes, but for -health-fault.
func (p *probe) health(ctx context.Context, h http.Handler) error {
	w := h.(*probeHandler).w
	if p.healthFault == "hang" {
		select {}
	}
	if p.healthFault == "hang-once" && w.Index == p.faultWorker {
		once := filepath.Join(p.marks, "health-hung")
		if f, err := os.OpenFile(once, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
			f.Close()
			select {} // a deadlock: ignores ctx
		}
	}
	if p.healthFault == "fail" && w.Index == p.faultWorker {
		// The first process to claim the mark fails every check.
		mark, pid := filepath.Join(p.marks, "health-failing"), strconv.Itoa(os.Getpid())
		if f, err := os.OpenFile(mark, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
			f.WriteString(pid)
			f.Close()
		}
		if b, _ := os.ReadFile(mark); string(b) == pid {
			return errors.New("database unreachable")
		}
	}
	return nil
}

// probeHandler is one worker's handler, which knows the worker.
type probeHandler struct {
	p       *probe
	w       Worker
	ballast []byte // -ballast, resident for the handler's life
}

func (p *probe) mark(name string) {
	os.WriteFile(filepath.Join(p.marks, name), []byte(strconv.FormatInt(time.Now().UnixNano(), 10)), 0o644)
}

func (p *probe) start(ctx context.Context, w Worker) (http.Handler, error) {
	p.mark(fmt.Sprintf("identity-%d-of-%d-gen-%d", w.Index, w.Count, w.Generation))
	if w.Index == p.faultWorker && (p.faultGeneration == 0 || w.Generation == p.faultGeneration) {
		switch p.startFault {
		case "slow":
			time.Sleep(p.slow)
		case "fail":
			return nil, errors.New("no database")
		case "panic":
			panic("invalid import")
		case "hang":
			select {} // ignores ctx
		case "wait": // until ctx ends, and says so
			<-ctx.Done()
			p.mark(fmt.Sprintf("start-cancelled-%d", w.Index))
			return nil, context.Cause(ctx)
		case "succeed-late": // succeeds only once ctx has ended
			<-ctx.Done()
		case "fail-lines": // an error of several lines, as errors.Join makes
			return nil, errors.Join(errors.New("no database"), errors.New("no cache"))
		case "fail-eof": // an error that wraps io.EOF, as a decoder's of an empty file does
			return nil, fmt.Errorf("read settings: %w", io.EOF)
		}
	}
	p.mark(fmt.Sprintf("started-%d", w.Index))
	if p.print {
		fmt.Println("starting worker", w.Index)
	}
	ballast := make([]byte, p.ballast)
	for i := 0; i < len(ballast); i += 4096 {
		ballast[i] = 1 // a page touched is a page resident
	}
	return &probeHandler{p: p, w: w, ballast: ballast}, nil
}

func (h *probeHandler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/slow":
		h.p.mark(fmt.Sprintf("slow-begun-%d", h.w.Index))
		h.p.sleep(rw)
		defer h.p.mark(fmt.Sprintf("slow-done-%d", h.w.Index))
		defer h.p.mark(fmt.Sprintf("slow-done-gen-%d", h.w.Generation))
	case "/deadlock":
		h.p.deadlock.Lock() // never unlocked
	case "/panic": // a handler's bug
		panic("probe panic")
	case "/hog": // computes for -slow, letting nothing else in its worker run (hang_linux_test.go)
		hog(h.p.slow)
	case "/stream": // a chunk every 100 ms for -slow, as a server-sent event stream does
		for end := time.Now().Add(h.p.slow); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			fmt.Fprintf(rw, "data: %d\n\n", time.Now().UnixNano())
			rw.(http.Flusher).Flush()
		}
		return
	case "/upload": // reads the body, however slowly it comes
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(rw, "read %d bytes", n)
		return
	case "/hijack-idle": // holds the hijacked connection idle for -slow, then one byte
		conn, _, err := http.NewResponseController(rw).Hijack()
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		defer conn.Close()
		time.Sleep(h.p.slow)
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\n.")
		return
	case "/hijack": // a byte every 100 ms for -slow, on the hijacked connection
		conn, _, err := http.NewResponseController(rw).Hijack()
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		defer conn.Close()
		n := int(h.p.slow / (100 * time.Millisecond))
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", n)
		for range n {
			time.Sleep(100 * time.Millisecond)
			conn.Write([]byte("."))
		}
		return
	}
	if h.p.print {
		fmt.Println("got request", r.URL.Path)
	}
	fmt.Fprintf(rw, "worker %d of %d", h.w.Index, h.w.Count)
}

// sleep waits -slow, saying it is alive every tenth of it with
// -slow-alive.
func (p *probe) sleep(w http.ResponseWriter) {
	if !p.slowAlive {
		time.Sleep(p.slow)
		return
	}
	for range 10 {
		time.Sleep(p.slow / 10)
		Alive(w)
	}
}

func (p *probe) stop(ctx context.Context, h http.Handler) error {
	w := h.(*probeHandler).w
	fault := p.stopFault
	if p.stopFaultGeneration != 0 && w.Generation != p.stopFaultGeneration {
		fault = ""
	}
	switch fault {
	case "hang":
		select {} // ignores ctx: only the kill ends it
	case "fail":
		return errors.New("cannot flush the queue")
	case "slow": // flushes for -slow, then succeeds, and says if it was told to hurry
		time.Sleep(p.slow)
		if ctx.Err() != nil {
			p.mark(fmt.Sprintf("stop-hurried-%d", w.Index))
		}
	}
	p.mark(fmt.Sprintf("stopped-%d", w.Index))
	p.mark(fmt.Sprintf("stopped-gen-%d", w.Generation))
	return nil
}

// newProbeHarness prepares a generation of workers serving probeApp with
// the given flags, and returns it with the marks directory.
func newProbeHarness(t *testing.T, workers int, flags []string, edit ...func(*supervisorConfig)) (*harness, string) {
	t.Helper()
	t.Setenv(appEnv, "probe")
	marks := t.TempDir()
	args := append([]string{"-marks", marks}, flags...)
	edit = append([]func(*supervisorConfig){func(c *supervisorConfig) { c.Args = args }}, edit...)
	return newHarness(t, workers, nil, edit...), marks
}

// markTime returns when the probe wrote the marker name, and whether it did.
func markTime(t *testing.T, marks, name string) (time.Time, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(marks, name))
	if err != nil {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		t.Fatalf("marker %s: %v", name, err)
	}
	return time.Unix(0, ns), true
}

func TestAppStartRunsBeforeAnyAnswer(t *testing.T) {
	h, marks := newProbeHarness(t, 3, []string{"-start-fault", "slow", "-fault-worker", "2"})
	started := make(chan error, 1)
	go func() { started <- h.sup.Start(context.Background()) }()
	// Asked before any worker is ready: the connection queues, and the
	// answer comes only after every worker's start has returned.
	code, body, err := get(h.addr, "/")
	answered := time.Now()
	if err != nil || code != 200 || !strings.HasPrefix(body, "worker ") {
		t.Fatalf("GET / = %d %q %v; want an answer from a worker", code, body, err)
	}
	for i := range 3 {
		at, ok := markTime(t, marks, fmt.Sprintf("started-%d", i))
		if !ok || at.After(answered) {
			t.Errorf("worker %d's start had not returned when a worker answered", i)
		}
	}
	if err := <-started; err != nil {
		t.Fatalf("Start() = %v; want nil", err)
	}
}

func TestAppStartFailureRollsBackGeneration(t *testing.T) {
	h, _ := newProbeHarness(t, 3, []string{"-start-fault", "fail", "-fault-worker", "1"})
	err := h.sup.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "worker 1") || !strings.Contains(err.Error(), "no database") {
		t.Fatalf("Start() = %v; want an error naming worker 1 and its reason", err)
	}
	h.assertAllGone()
}

func TestAppStartErrorWrappingEOFIsAFailure(t *testing.T) {
	h, _ := newProbeHarness(t, 2, []string{"-start-fault", "fail-eof", "-fault-worker", "1"})
	err := h.sup.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "worker 1") || !strings.Contains(err.Error(), "read settings: EOF") {
		t.Fatalf("Start() = %v; want an error naming worker 1 and its reason", err)
	}
	h.assertAllGone()
}

func TestAppStartPanicRollsBackGeneration(t *testing.T) {
	h, _ := newProbeHarness(t, 3, []string{"-start-fault", "panic", "-fault-worker", "1"})
	err := h.sup.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "worker 1") || !strings.Contains(err.Error(), "panicked: invalid import") {
		t.Fatalf("Start() = %v; want an error naming worker 1 and the panic", err)
	}
	h.assertAllGone()
}

func TestAppStartThatOutlivesTheStartupTimeoutRollsBack(t *testing.T) {
	h, _ := newProbeHarness(t, 2, []string{"-start-fault", "slow", "-fault-worker", "1"},
		func(c *supervisorConfig) { c.StartupTimeout = 200 * time.Millisecond })
	err := h.sup.Start(context.Background())
	if !errors.Is(err, errStartupTimeout) || !strings.Contains(err.Error(), "worker 1") {
		t.Fatalf("Start() = %v; want a startup timeout naming worker 1", err)
	}
	h.assertAllGone()
}

func TestAppStopRunsAfterDrain(t *testing.T) {
	t.Run("after the in-flight request", func(t *testing.T) {
		h, marks := newProbeHarness(t, 2, []string{"-slow", "500ms"})
		h.start()
		answered := make(chan string, 1)
		go func() {
			code, body, err := get(h.addr, "/slow")
			answered <- fmt.Sprint(code, " ", body, " ", err)
		}()
		// Stop only once a worker's handler holds the request.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if m, _ := filepath.Glob(filepath.Join(marks, "slow-begun-*")); len(m) > 0 {
				break
			}
		}
		if err := h.stop(context.Background()); err != nil {
			t.Fatalf("Stop() = %v; want nil", err)
		}
		if got := <-answered; !strings.HasPrefix(got, "200 worker ") {
			t.Fatalf("the in-flight request got %q; want it answered", got)
		}
		for i := range 2 {
			stopped, ok := markTime(t, marks, fmt.Sprintf("stopped-%d", i))
			if !ok {
				t.Errorf("worker %d's stop step did not run", i)
				continue
			}
			if done, ok := markTime(t, marks, fmt.Sprintf("slow-done-%d", i)); ok && stopped.Before(done) {
				t.Errorf("worker %d's stop step ran before its in-flight request finished", i)
			}
		}
		h.assertAllGone()
	})
	t.Run("a hanging stop is cut off", func(t *testing.T) {
		const drain, force = 200 * time.Millisecond, 800 * time.Millisecond
		h, _ := newProbeHarness(t, 2, []string{"-stop-fault", "hang"}, func(c *supervisorConfig) {
			c.DrainTimeout, c.ForceTimeout = drain, force
		})
		h.start()
		began := time.Now()
		if err := h.stop(context.Background()); err != nil {
			t.Fatalf("Stop() = %v; want nil (the hanging workers were killed and reaped)", err)
		}
		if took := time.Since(began); took > force+finalGrace {
			t.Errorf("Stop took %v; want the force deadline (%v) to cut the hanging stop step", took, force)
		}
		if !strings.Contains(h.readLogs(), "action=kill") {
			t.Errorf("want the hanging workers killed at the force deadline:\n%s", h.readLogs())
		}
		h.assertAllGone()
	})
}

func TestAppSeesWorkerIndexAndCount(t *testing.T) {
	h, marks := newProbeHarness(t, 3, nil, func(c *supervisorConfig) { c.Generation = 7 })
	h.start()
	for i := range 3 {
		if _, ok := markTime(t, marks, fmt.Sprintf("identity-%d-of-3-gen-7", i)); !ok {
			entries, _ := os.ReadDir(marks)
			t.Errorf("no worker saw index %d of 3 in generation 7; marks: %v", i, entries)
		}
	}
}

// startProbeServery runs servery's main serving probeApp with args, and
// a notify socket; it returns once servery serves.
func startProbeServery(t *testing.T, ns *notifySocket, args ...string) (*servery, string) {
	t.Helper()
	marks := t.TempDir()
	cmd := exec.Command(os.Args[0], append([]string{"-addr", "127.0.0.1:0", "-marks", marks}, args...)...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", appEnv+"=probe", "NOTIFY_SOCKET="+ns.path)
	return launchServery(t, cmd), marks
}

// notifications collects what ns receives until servery exits.
func (ns *notifySocket) until(s *servery) []string {
	var got []string
	for {
		select {
		case d := <-ns.got:
			got = append(got, d.text)
		case <-s.exited:
			for {
				select {
				case d := <-ns.got:
					got = append(got, d.text)
				case <-time.After(100 * time.Millisecond):
					return got
				}
			}
		}
	}
}

func TestProgramPrintsGoToTheLogNotTheProtocol(t *testing.T) {
	skipWithoutWorkers(t)
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-marks", t.TempDir(), "-workers", "2", "-print")
	cmd.Env = append(os.Environ(), mainEnv+"=1", appEnv+"=probe")
	s := launchServery(t, cmd)
	for i := range 20 {
		if code, _, err := get(s.addr, fmt.Sprintf("/x%d", i)); err != nil || code != http.StatusOK {
			t.Fatalf("GET /x%d: %d, %v", i, code, err)
		}
	}
	// The parent writes a worker's prints as they come (output.go).
	for _, want := range []string{"starting worker 0", "starting worker 1", "got request /x0", "got request /x19"} {
		waitLog(t, s, `msg="worker output" generation=1 worker=\d pid=\d+ stream=stdout line="`+regexp.QuoteMeta(want)+`"`)
	}
	logs := s.logs()
	if strings.Contains(logs, "worker lost") || strings.Contains(logs, "malformed") {
		t.Errorf("a print cost a worker its life")
	}
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Errorf("exit status %d; want %d", code, exitOK)
	}
}

func TestPrintBeforeMainGoesToTheLog(t *testing.T) {
	skipWithoutWorkers(t)
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	// Each worker prints before servery's code runs in it, as a library's
	// init() does.
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-dir", site, "-workers", "2")
	cmd.Env = append(os.Environ(), mainEnv+"=1", faultEnv+"="+faultPrintsBeforeMain)
	s := launchServery(t, cmd)
	if code, body, err := get(s.addr, "/"); err != nil || code != http.StatusOK || body != "hello" {
		t.Fatalf("GET / = %d %q, %v; want 200 hello", code, body, err)
	}
	logs := s.logs()
	if n := strings.Count(logs, initPrint); n != 2 {
		t.Errorf("the log has %d of the workers' prints %q; want 2", n, initPrint)
	}
	if strings.Contains(logs, "malformed") || strings.Contains(logs, "rolling back") {
		t.Errorf("a print before main reached the protocol")
	}
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Errorf("exit status %d; want %d", code, exitOK)
	}
}

func TestDirectStartupTimeoutHoldsWhenStartIgnoresIt(t *testing.T) {
	marks := t.TempDir()
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-marks", marks, "-workers", "1",
		"-start-fault", "hang", "-startup-timeout", "300ms")
	cmd.Env = append(os.Environ(), mainEnv+"=1", appEnv+"=probe")
	s := spawnServery(t, cmd)
	if code := s.wait(10 * time.Second); code != exitFailure {
		t.Errorf("exit status %d; want %d", code, exitFailure)
	}
	if !strings.Contains(s.logs(), "startup timeout after 300ms") {
		t.Errorf("want the startup timeout named in the log:\n%s", s.logs())
	}
}

func TestDirectReloadCutByAStopHoldsNothing(t *testing.T) {
	ns := newNotifySocket(t)
	s, _ := startProbeServery(t, ns, "-workers", "1", "-start-fault", "hang", "-fault-generation", "2",
		"-drain-timeout", "1s", "-force-timeout", "2s")
	if d := ns.next(t); !strings.Contains(d.text, "READY=1") {
		t.Fatalf("first notification %q; want READY=1", d.text)
	}
	s.signal(syscall.SIGHUP)
	waitLog(t, s, `msg=reloading generation=2`)
	s.signal(syscall.SIGTERM) // the reload's start never returns
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Errorf("exit status %d; want %d (a clean stop)", code, exitOK)
	}
	got := ns.until(s)
	stopping := slices.IndexFunc(got, func(d string) bool { return strings.Contains(d, "STOPPING=1") })
	if stopping < 0 {
		t.Fatalf("notifications %q; want STOPPING=1", got)
	}
	for _, d := range got[stopping+1:] {
		if strings.Contains(d, "READY=1") || strings.Contains(d, "RELOADING=1") {
			t.Errorf("notifications %q: %q after STOPPING=1", got, d)
		}
	}
	if !strings.Contains(s.logs(), `msg="reload cut short by the stop, rolled back" generation=2`) {
		t.Errorf("want the cut reload logged as cut short:\n%s", s.logs())
	}
}

func TestDirectReloadStopsTheOldHandlerAfterItsLastRequest(t *testing.T) {
	ns := newNotifySocket(t)
	s, marks := startProbeServery(t, ns, "-workers", "1", "-slow", "1s", "-drain-timeout", "5s", "-force-timeout", "8s")
	answered := make(chan string, 1)
	go func() {
		code, body, err := get(s.addr, "/slow")
		answered <- fmt.Sprint(code, " ", body, " ", err)
	}()
	waitFile(t, filepath.Join(marks, "slow-begun-0"))
	s.signal(syscall.SIGHUP)
	waitLog(t, s, `msg=reloaded generation=2`)
	s.signal(syscall.SIGTERM) // the stop comes while generation 1 still answers
	if got := <-answered; !strings.HasPrefix(got, "200 worker 0") {
		t.Errorf("the request on the replaced handler got %q; want it answered", got)
	}
	if code := s.wait(15 * time.Second); code != exitOK {
		t.Errorf("exit status %d; want %d", code, exitOK)
	}
	done, ok1 := markTime(t, marks, "slow-done-gen-1")
	stopped, ok2 := markTime(t, marks, "stopped-gen-1")
	switch {
	case !ok1 || !ok2:
		t.Errorf("marks: request done %v, generation 1 stopped %v; want both", ok1, ok2)
	case stopped.Before(done):
		t.Errorf("generation 1's stop step ran %v before its last request finished", done.Sub(stopped))
	}
	if _, ok := markTime(t, marks, "stopped-gen-2"); !ok {
		t.Error("generation 2's stop step did not run")
	}
}

func TestAppStopFailureIsAnUncleanExit(t *testing.T) {
	for _, workers := range []string{"1", "2"} {
		t.Run("workers="+workers, func(t *testing.T) {
			if workers != "1" {
				skipWithoutWorkers(t)
			}
			ns := newNotifySocket(t)
			s, _ := startProbeServery(t, ns, "-workers", workers, "-stop-fault", "fail")
			s.signal(syscall.SIGTERM)
			if code := s.wait(10 * time.Second); code != exitFailure {
				t.Errorf("exit status %d; want %d", code, exitFailure)
			}
			if !strings.Contains(s.logs(), "cannot flush the queue") {
				t.Errorf("want the stop step's error in the log:\n%s", s.logs())
			}
			s.assertNoWorkersLeft()
		})
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared", path)
}

func TestRollbackRunsTheStopStepOfEveryWorkerWhoseStartReturned(t *testing.T) {
	// Worker 1's start waits until it is cancelled; worker 0's returns at
	// once, and the rollback then sends it EOF and SIGTERM together. Its
	// App started, so its stop step must run to its end, whichever it
	// reads first: the step takes 300 ms, long after the SIGTERM.
	h, marks := newProbeHarness(t, 2, []string{"-start-fault", "wait", "-fault-worker", "1", "-stop-fault", "slow", "-slow", "300ms"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan error, 1)
	go func() { started <- h.sup.Start(ctx) }()
	h.waitLog(`msg=prepared generation=\d+ worker=0 `)
	cancel()
	if err := <-started; err == nil {
		t.Fatal("Start() = nil after its context was cancelled; want an error")
	}
	h.assertAllGone()
	if _, ok := markTime(t, marks, "stopped-0"); !ok {
		t.Errorf("worker 0's start returned, but the rollback did not run its stop step:\n%s", h.readLogs())
	}
	// The SIGTERM asks it to hurry, as at a stop's drain deadline.
	if _, ok := markTime(t, marks, "stop-hurried-0"); !ok {
		t.Errorf("worker 0's stop step ran with a context the rollback's SIGTERM did not end")
	}
}
