package main

// faults_test.go turns the test binary into the processes the tests need,
// as os/exec's own tests do: TestMain looks at the environment and, when
// asked, runs a worker (real or faulty), servery's own main, or an idle
// grandchild instead of the tests.

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	faultEnv      = "SERVERY_TEST_FAULT"      // which fault a test worker injects
	delayEnv      = "SERVERY_TEST_DELAY"      // how long slow faults wait
	pidFileEnv    = "SERVERY_TEST_PIDFILE"    // where the grandchild fault records its child's pid
	mainEnv       = "SERVERY_TEST_MAIN"       // run servery's main
	grandchildEnv = "SERVERY_TEST_GRANDCHILD" // sleep, ignoring SIGTERM
	gateEnv       = "SERVERY_TEST_GATE"       // a file: while it exists, the held-prepared fault holds its worker
	startsEnv     = "SERVERY_TEST_STARTS"     // a file per slot, where its workers count their starts
)

func TestMain(m *testing.M) {
	// Under -race every process sleeps a second in os.Exit (the race
	// runtime's atexit_sleep_ms) while still holding its descriptors; the
	// processes the tests start should exit when they say they do.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	switch {
	case os.Getenv(upgradeCheckEnv) != "" && os.Getenv(checkFaultEnv) == "slow":
		time.Sleep(3 * time.Second) // a check the test signals the parent during
		os.Exit(checkStatic())
	case os.Getenv(upgradeCheckEnv) != "" && os.Getenv(checkFaultEnv) != "":
		fmt.Println("handover 99") // a build of another handover format
		os.Exit(exitFailure)
	case os.Getenv(upgradeCheckEnv) != "":
		os.Exit(checkStatic())
	case os.Getenv(workerEnv) != "":
		os.Exit(testWorker(os.Getenv(faultEnv)))
	case os.Getenv(grandchildEnv) != "":
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
		os.Exit(0)
	case os.Getenv(mainEnv) != "":
		os.Exit(runStatic(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// checkFaultEnv makes the test binary's upgrade check answer a handover
// version it does not read, as a build of another format would, or, set
// to "slow", take 3 s to answer (upgrade_test.go).
const checkFaultEnv = "SERVERY_TEST_CHECK_FAULT"

// Worker faults, each named after what it does.
const (
	faultFail         = "fail"           // reports failed after reading its config
	faultExit         = "exit"           // exits 3 without a word
	faultGarbage      = "garbage"        // writes a line that is not the protocol
	faultHang         = "hang"           // reads nothing and never reports
	faultSlowPrepared = "slow-prepared"  // reports prepared late
	faultSlowReady    = "slow-ready"     // reports ready late
	faultSlowReadyOne = "slow-ready-one" // the first worker to claim the pid file reports ready late
	faultDeaf         = "deaf"           // ignores the stdin EOF, honours SIGTERM
	faultStubborn     = "stubborn"       // ignores SIGTERM and the stdin EOF
	faultGrandchild   = "grandchild"     // stubborn, with a grandchild in its session
	// faultHeldPrepared is a real worker until it is about to report
	// prepared while the gate file exists: then it logs "holding prepared",
	// waits until the gate is removed (a minute at most), ignoring SIGTERM
	// meanwhile, and carries on. Workers that prepare before the test
	// creates the gate (the first generation) are never held, so a test
	// can hold one later generation in the middle of its barrier for as
	// long as it likes.
	faultHeldPrepared = "held-prepared"
	// faultHeldReady is a real worker until, committed and accepting, it
	// is about to report ready while the gate file exists: then it logs
	// "holding ready" and waits until the gate is removed (a minute at
	// most), reading neither its stdin nor signals meanwhile; SIGTERM, as
	// for any serving worker, ends its drain once it reads again.
	faultHeldReady = "held-ready"
	// Faults of the slot's later workers, its replacements; the first
	// one is real. They count the slot's starts in startsEnv's file.
	faultCrashLater       = "crash-later"        // from the 2nd start, exits 3 right after ready
	faultCrashEverySecond = "crash-every-second" // on the 2nd, 4th... start, exits 3 right after ready
	faultFailLater        = "fail-later"         // from the 2nd start, its App.Start fails
	faultExitLater        = "exit-later"         // from the 2nd start, exits 3 without a word
	// faultBadAfterReady, on its first start, writes a line that is not
	// the protocol right after ready and then ignores SIGTERM and the
	// stdin EOF: a worker lost while it still runs, until SIGKILL.
	faultBadAfterReady = "bad-after-ready"
	// faultPrintsBeforeMain prints a line to stdout before it calls the
	// worker's entry, as a library that prints in its init() does, then
	// is the real worker.
	faultPrintsBeforeMain = "prints-before-main"
)

// testWorker runs one worker process with fault injected; "" is the real
// worker, unchanged.
func testWorker(fault string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("fault", fault)
	delay := faultDelay()
	switch fault {
	case "", faultPrintsBeforeMain:
		if fault == faultPrintsBeforeMain {
			fmt.Println(initPrint)
		}
		fs := flag.NewFlagSet("worker", flag.ContinueOnError)
		return workerEntry(os.Getenv(workerEnv), os.Args[1:], fs, testApp(fs))
	case faultFail, faultExit, faultGarbage, faultHang:
		return brokenWorker(fault)
	case faultCrashLater, faultCrashEverySecond, faultFailLater, faultExitLater, faultBadAfterReady:
		return laterWorker(fault, startNumber())
	}
	// The rest run the real worker through a changed workerIO. Only they
	// wrap fds 3, 4 and 5 in Files: two Files for one descriptor would
	// close it twice, the second time after the number was reused.
	wio := realWorkerIO(log)
	in, out := wio.in, wio.out
	switch fault {
	case faultSlowPrepared:
		wio.out = &delayedWriter{w: out, match: `"prepared"`, delay: delay}
	case faultSlowReady:
		wio.out = &delayedWriter{w: out, match: `"ready"`, delay: delay}
	case faultSlowReadyOne:
		if claimPIDFile() {
			wio.out = &delayedWriter{w: out, match: `"ready"`, delay: delay}
		}
	case faultGrandchild:
		if err := startGrandchild(); err != nil {
			log.Error("grandchild", "err", err)
			return 1
		}
		fallthrough
	case faultStubborn:
		signal.Ignore(syscall.SIGTERM)
		wio.term = nil
		wio.in = endless{in}
	case faultDeaf:
		wio.in = endless{in}
	case faultHeldPrepared:
		g := &gatedWriter{w: out, match: msgPrepared, gate: os.Getenv(gateEnv), log: log}
		wio.out = g
		wio.term = g.filter(wio.term)
	case faultHeldReady:
		wio.out = &gatedWriter{w: out, match: msgReady, gate: os.Getenv(gateEnv), log: log}
	default:
		log.Error("unknown fault")
		return 1
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	app := testApp(fs)
	if _, err := parseFlags(os.Args[1:], io.Discard, fs); err != nil {
		log.Error("parse command line", "err", err)
		return 1
	}
	return runWorker(wio, app)
}

// initPrint is what faultPrintsBeforeMain prints.
const initPrint = "mylib v1.2 initialised"

// testApp is the App a test worker serves: probeApp when appEnv asks for
// it, the static site otherwise.
func testApp(fs *flag.FlagSet) App {
	if os.Getenv(appEnv) == "probe" {
		return probeApp(fs)
	}
	return newStaticApp(fs)
}

// runStatic is run with the test App (the static site, unless appEnv asks
// for the probe), on flags of its own, so tests can call it many times in
// one process.
// checkStatic is Main's upgrade check for the program runStatic runs.
func checkStatic() int {
	fs := flag.NewFlagSet("static", flag.ContinueOnError)
	return answerUpgradeCheck(os.Getenv(upgradeCheckEnv), os.Args[1:], fs, testApp(fs))
}

func runStatic(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("static", flag.ContinueOnError)
	return run(args, stdout, stderr, fs, testApp(fs))
}

// brokenWorker misbehaves without ever running the real worker.
func brokenWorker(fault string) int {
	switch fault {
	case faultFail:
		in, out := testPipes()
		newLineReader(in).next()
		(&lineWriter{w: out}).send(message{Type: msgFailed, Reason: "injected failure"})
		return 1
	case faultGarbage:
		in, out := testPipes()
		fmt.Fprintln(out, "this is not the protocol")
		io.Copy(io.Discard, in)
		return 1
	case faultHang:
		time.Sleep(time.Hour)
		return 1
	}
	return 3 // faultExit
}

// laterWorker is a slot's start number n with one of the faults of later
// workers.
func laterWorker(fault string, n int) int {
	crash := fault == faultCrashLater && n > 1 || fault == faultCrashEverySecond && n%2 == 0
	if fault == faultFailLater && n > 1 {
		return brokenWorker(faultFail)
	}
	if fault == faultExitLater && n > 1 {
		return brokenWorker(faultExit)
	}
	wio := realWorkerIO(slog.New(slog.NewTextHandler(os.Stderr, nil)).With("fault", fault, "start", n))
	if crash {
		wio.out = exitAfter{w: wio.out, match: `"ready"`}
	}
	if fault == faultBadAfterReady && n == 1 {
		wio.out = badAfter{w: wio.out, match: `"ready"`}
		signal.Ignore(syscall.SIGTERM)
		wio.term = nil
		wio.in = endless{wio.in}
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	app := testApp(fs)
	if _, err := parseFlags(os.Args[1:], io.Discard, fs); err != nil {
		return 1
	}
	return runWorker(wio, app)
}

// startNumber counts this start in the slot's file and returns its
// number, from 1. A slot starts one worker at a time, so no lock is
// needed.
func startNumber() int {
	f, err := os.OpenFile(os.Getenv(startsEnv), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0
	}
	defer f.Close()
	f.Write([]byte{'.'})
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	return int(st.Size())
}

// exitAfter passes writes on and exits 3 right after the one that
// contains match: a worker that crashes the moment it is ready.
type exitAfter struct {
	w     io.Writer
	match string
}

func (e exitAfter) Write(b []byte) (int, error) {
	n, err := e.w.Write(b)
	if bytes.Contains(b, []byte(e.match)) {
		os.Exit(3)
	}
	return n, err
}

// badAfter passes writes on and, a second after the one that contains
// match, writes a line that is not the protocol.
type badAfter struct {
	w     io.Writer
	match string
}

func (b badAfter) Write(p []byte) (int, error) {
	n, err := b.w.Write(p)
	if bytes.Contains(p, []byte(b.match)) {
		// Once the whole generation is surely ready: a bad line in the
		// barrier fails the start instead.
		time.AfterFunc(time.Second, func() { b.w.Write([]byte("this is not the protocol\n")) })
	}
	return n, err
}

// realWorkerIO is what workerMain would use.
func realWorkerIO(log *slog.Logger) workerIO {
	signal.Ignore(syscall.SIGPIPE)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	in, out := testPipes()
	return workerIO{in: in, out: out, listener: os.NewFile(listenerFD, "listener"), term: term, log: log}
}

// testPipes returns the protocol's pipes as a worker finds them; a test
// worker started without them exits 1.
func testPipes() (in, out *os.File) {
	in, out, err := protocolPipes()
	if err != nil {
		fmt.Fprintln(os.Stderr, "test worker:", err)
		os.Exit(1)
	}
	return in, out
}

func faultDelay() time.Duration {
	d, err := time.ParseDuration(os.Getenv(delayEnv))
	if err != nil {
		return 500 * time.Millisecond
	}
	return d
}

// startGrandchild starts an idle process in this worker's session and
// records its pid for the test.
func startGrandchild() error {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(withoutEnv(os.Environ(), workerEnv), grandchildEnv+"=1")
	if err := cmd.Start(); err != nil {
		return err
	}
	return os.WriteFile(os.Getenv(pidFileEnv), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

// claimPIDFile creates the pid file with this process's pid and reports
// whether it did; only the first of several workers succeeds.
func claimPIDFile() bool {
	f, err := os.OpenFile(os.Getenv(pidFileEnv), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.WriteString(strconv.Itoa(os.Getpid()))
	return err == nil
}

// withoutEnv drops name from env.
func withoutEnv(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// delayedWriter holds back any write that contains match for delay.
type delayedWriter struct {
	w     io.Writer
	match string
	delay time.Duration
}

func (d *delayedWriter) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(d.match)) {
		time.Sleep(d.delay)
	}
	return d.w.Write(b)
}

// gatedWriter holds back one message, of the type match, while the gate
// file exists.
type gatedWriter struct {
	w     io.Writer
	match string
	gate  string
	log   *slog.Logger
	held  atomic.Bool
}

func (g *gatedWriter) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(`"`+g.match+`"`)) && g.closed() {
		g.held.Store(true)
		g.log.Info("holding "+g.match, "pid", os.Getpid())
		for deadline := time.Now().Add(time.Minute); g.closed() && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		g.held.Store(false)
	}
	return g.w.Write(b)
}

// closed reports whether the gate file exists.
func (g *gatedWriter) closed() bool {
	_, err := os.Stat(g.gate)
	return g.gate != "" && err == nil
}

// filter passes the SIGTERMs from in on, except those that arrive while
// the prepared message is held, which it drops.
func (g *gatedWriter) filter(in <-chan os.Signal) <-chan os.Signal {
	out := make(chan os.Signal, 1)
	go func() {
		for sig := range in {
			if g.held.Load() {
				g.log.Info("SIGTERM ignored while holding prepared", "pid", os.Getpid())
				continue
			}
			select {
			case out <- sig:
			default: // one is pending already
			}
		}
	}()
	return out
}

// endless reads like r until r ends, then blocks for ever: a worker that
// never notices its parent closed stdin.
type endless struct{ r io.Reader }

func (e endless) Read(b []byte) (int, error) {
	n, err := e.r.Read(b)
	if err == io.EOF {
		select {}
	}
	return n, err
}
