//go:build linux

// Command bench measures servery against its baselines, and its reloads
// and healing, and prints a Markdown report, also written to
// bench/out/report.md with the raw load generator output, server logs and
// TSVs in bench/out/raw/ and the reload and heal plots beside it:
//
//	go run ./bench                                  # every section
//	go run ./bench -sections throughput,https -trials 5
//	go run ./bench -quick                           # a smoke run
//
// It builds servery from the working tree, starts each server in its own
// session (pinned with taskset where a section asks), drives it with wrk or
// h2load, and ends every process it started, on failure and on a signal
// too. Before each measurement it waits for the box to go quiet, and it
// measures again when other work took too much of it meanwhile. Every
// server listens on 127.0.0.1 and every load run is bounded in time.
// Linux only: it reads /proc. bench/README.md says what each section
// measures and what its targets mean.
package main

import (
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// config is the command line.
type config struct {
	sections              []string
	quick                 bool
	dur, warmup           time.Duration
	balDur, memLoad       time.Duration
	trials, startupTrials int
	conns                 int
	h2Conns, h2Streams    int
	httpsWorkers          int
	basePort              int
	serverCPU, wrkCPU     string
	pairCPUs              string
	idleBeforeStop        time.Duration
	stopWait              time.Duration
	quietPct, noisyPct    float64
	quietWait             time.Duration
	quietBudget           time.Duration
	noisyRetries          int
	out                   string
	lifetimeReplacements  int
	lifetimeLimit         time.Duration
	lifetimeStep          time.Duration
	before                string // a servery binary of an earlier commit: throughput rows for it beside today's
}

var allSections = []string{"throughput", "app", "balance", "startup", "memory", "https", "reload", "heal", "lifetime"}

// sectionRuns are the sections in the order they run; throughput runs the
// app rows too, in the same round-robin.
var sectionRuns = []struct {
	names []string
	run   func(*bench)
}{
	{[]string{"throughput", "app"}, (*bench).throughput},
	{[]string{"balance"}, (*bench).balance},
	{[]string{"startup"}, (*bench).startup},
	{[]string{"memory"}, (*bench).memory},
	{[]string{"https"}, (*bench).https},
	{[]string{"reload"}, (*bench).reload},
	{[]string{"heal"}, (*bench).heal},
	{[]string{"lifetime"}, (*bench).lifetime},
}

// parseConfig reads the command line; -quick changes the defaults it
// does not set.
func parseConfig(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	sections := fs.String("sections", strings.Join(allSections, ","), "sections to run, a comma-separated subset of "+strings.Join(allSections, ","))
	fs.BoolVar(&c.quick, "quick", false, "smoke run: -dur 2s -trials 1 -startup-trials 3, 500 lifetime replacements in 2 s steps and a shorter quiet-box guard, unless given")
	fs.DurationVar(&c.dur, "dur", 5*time.Second, "each measured load run")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "load before every measured run (whole seconds: wrk takes no ms)")
	fs.DurationVar(&c.balDur, "bal-dur", 0, "each connection-balance run (default -dur)")
	fs.DurationVar(&c.memLoad, "mem-load", time.Second, "load between the two memory snapshots")
	fs.IntVar(&c.trials, "trials", 3, "trials per throughput and HTTPS cell, round-robin across servers")
	fs.IntVar(&c.startupTrials, "startup-trials", 11, "trials per startup row")
	fs.IntVar(&c.conns, "conns", 64, "wrk -c")
	fs.IntVar(&c.h2Conns, "h2-conns", 0, "h2load -c (default -conns)")
	fs.IntVar(&c.h2Streams, "h2-streams", 10, "h2load -m, concurrent streams per connection")
	fs.IntVar(&c.httpsWorkers, "https-workers", 2, "https: servery -workers N beside direct mode")
	fs.IntVar(&c.basePort, "base-port", 18180, "first port; ports up to base-port+310, and +1000 for status listeners, are used")
	fs.StringVar(&c.serverCPU, "server-cpu", "0", "one-core rows: the server's CPU (taskset -c)")
	fs.StringVar(&c.wrkCPU, "wrk-cpu", "1", "one-core rows: the load generator's CPU")
	fs.StringVar(&c.pairCPUs, "pair-cpus", "0-1", "two-core rows: server and load generator both here")
	fs.DurationVar(&c.idleBeforeStop, "idle-before-stop", 200*time.Millisecond, "startup: idle time between the first answer and SIGTERM")
	fs.DurationVar(&c.stopWait, "stop-wait", 20*time.Second, "time a server gets to exit after SIGTERM")
	fs.Float64Var(&c.quietPct, "quiet-pct", 10, "wait before each measurement until other work uses at most this % of the CPUs")
	fs.DurationVar(&c.quietWait, "quiet-wait", 30*time.Second, "longest wait for a quiet box, each time (0: no waiting)")
	fs.DurationVar(&c.quietBudget, "quiet-budget", 240*time.Second, "longest wait for a quiet box, in all")
	fs.Float64Var(&c.noisyPct, "noisy-pct", 10, "measure again when other work took more than this % of the CPUs")
	fs.IntVar(&c.noisyRetries, "noisy-retries", 2, "at most this many times")
	fs.StringVar(&c.out, "out", "bench/out", "directory for the report and the raw data")
	fs.StringVar(&c.before, "before", "", "a servery `binary` built from an earlier commit: throughput adds its direct-mode and 2-worker rows to the same round-robin, so a change's cost is measured before and after in one run")
	fs.IntVar(&c.lifetimeReplacements, "lifetime-replacements", 100000, "lifetime: replace this many workers")
	fs.DurationVar(&c.lifetimeLimit, "lifetime-limit", time.Hour, "lifetime: stop after this long, replaced or not")
	fs.DurationVar(&c.lifetimeStep, "lifetime-step", time.Minute, "lifetime: one wrk run between two readings of the parent")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.quick {
		defaults := map[string]func(){
			"dur":                   func() { c.dur = 2 * time.Second },
			"trials":                func() { c.trials = 1 },
			"startup-trials":        func() { c.startupTrials = 3 },
			"quiet-wait":            func() { c.quietWait = 10 * time.Second },
			"quiet-budget":          func() { c.quietBudget = 60 * time.Second },
			"noisy-retries":         func() { c.noisyRetries = 1 },
			"lifetime-replacements": func() { c.lifetimeReplacements = 500 },
			"lifetime-step":         func() { c.lifetimeStep = 2 * time.Second },
			"lifetime-limit":        func() { c.lifetimeLimit = 2 * time.Minute },
		}
		for name, apply := range defaults {
			if !set[name] {
				apply()
			}
		}
	}
	if c.balDur == 0 {
		c.balDur = c.dur
	}
	if c.h2Conns == 0 {
		c.h2Conns = c.conns
	}
	for _, s := range strings.Split(*sections, ",") {
		if !slices.Contains(allSections, s) {
			return c, fmt.Errorf("-sections: unknown section %q (known: %s)", s, strings.Join(allSections, ","))
		}
		c.sections = append(c.sections, s)
	}
	for name, d := range map[string]time.Duration{"dur": c.dur, "warmup": c.warmup, "bal-dur": c.balDur, "mem-load": c.memLoad, "lifetime-step": c.lifetimeStep} {
		if d < time.Second || d%time.Second != 0 {
			return c, fmt.Errorf("-%s %v: whole seconds, at least 1 (wrk takes no ms)", name, d)
		}
	}
	if c.trials < 1 || c.startupTrials < 1 || c.conns < 1 {
		return c, errors.New("-trials, -startup-trials and -conns must be at least 1")
	}
	return c, nil
}

func (c config) want(section string) bool { return slices.Contains(c.sections, section) }

//go:embed app.go.txt
var appMain string

// bench is one run: its settings, its temporary directory, what it built
// and started, and the report it writes.
type bench struct {
	cfg     config
	repo    string
	tmp     string
	site    string
	bin     map[string]string // servery, baseline, app
	tls     *identity
	nginx   string
	caddy   string
	procs   *tracker
	box     *box
	rep     *report
	started time.Time
	// tpBalance is the throughput runs' balance, for section 2's table.
	tpBalance []tpBalance
	rev       string    // the commit measured, with -dirty for edited sources
	ending    sync.Once // end runs once, on finishing, failing or a signal
}

func main() { os.Exit(exitStatus(os.Args[1:])) }

// exitStatus runs the bench with args and returns its exit status: 0 for
// -help, 2 for bad flags, else run's.
func exitStatus(args []string) int {
	cfg, err := parseConfig(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	return run(cfg)
}

// run measures every section cfg asks for and returns the exit status:
// 0, or 3 if the report lists problems, or 1 if the run could not finish;
// a signal ends it with 128 + the signal's number. A run that does not
// finish leaves the report so far in report.partial.md.
func run(cfg config) int {
	b := &bench{cfg: cfg, bin: map[string]string{}, started: time.Now()}
	b.procs = newTracker()
	b.rep = newReport()
	// A signal ends the run as a failure would: every process it started
	// goes with it, and the report so far is kept. The run's goroutine
	// may still be starting a process meanwhile; the tracker kills it.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		say("interrupted by %v; ending every process the run started", sig)
		os.Exit(b.end(signalStatus(sig)))
	}()
	return b.finish(func() {
		b.setup()
		b.header()
		for _, s := range sectionRuns {
			if slices.ContainsFunc(s.names, cfg.want) {
				s.run(b)
			}
		}
		b.footer()
		b.save("report.md")
		fmt.Print(b.rep.String())
		say("done in %.0f s; report saved to %s", time.Since(b.started).Seconds(), filepath.Join(cfg.out, "report.md"))
	})
}

// signalStatus is the exit status of a run a signal ended: 128 + its
// number, as a shell reports it.
func signalStatus(sig os.Signal) int { return 128 + int(sig.(syscall.Signal)) }

// finish runs measure and returns the exit status: 0, or 3 if the report
// lists problems, or 1 if measure died (a measurement that cannot be
// made). A bug's panic ends every process and panics on.
func (b *bench) finish(measure func()) (status int) {
	defer func() {
		r := recover()
		f, isFatal := r.(fatal)
		if r != nil && !isFatal {
			b.end(1) // a bug: no process outlives it either
			panic(r)
		}
		if isFatal {
			say("FAILED: %v", f.err)
			status = 1
		}
		status = b.end(status)
	}()
	measure()
	if len(b.rep.problems) > 0 {
		return 3
	}
	return 0
}

// end, once, ends every process the run started, saves the report so far
// unless the run finished (status 0 or 3), and removes the temp dir; it
// returns status, for the caller that ended the run first.
func (b *bench) end(status int) int {
	b.ending.Do(func() {
		b.procs.endAll(b.tmp)
		if status != 0 && status != 3 && b.rep.len() > 0 && b.tmp != "" {
			func() {
				defer func() { recover() }() // saving is best effort here
				b.save("report.partial.md")
			}()
		}
		if b.tmp != "" {
			os.RemoveAll(b.tmp)
		}
	})
	return status
}

// fatal is what die panics with; run recovers it, ends every process and
// reports the error.
type fatal struct{ err error }

// die ends the run: a measurement that cannot be made is no measurement.
func die(format string, args ...any) {
	panic(fatal{fmt.Errorf(format, args...)})
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// setup makes the temporary directory, installs missing tools, builds
// servery, the baselines and the vendored app, and writes the site.
func (b *bench) setup() {
	var err error
	if b.repo, err = os.Getwd(); err != nil {
		die("working directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(b.repo, "bench", "main.go")); err != nil {
		die("run from the repository's root: go run ./bench")
	}
	if b.tmp, err = os.MkdirTemp("", "servery-bench."); err != nil {
		die("temp dir: %v", err)
	}
	os.Chmod(b.tmp, 0o755) // nginx workers may run as nobody and must reach the site
	for _, d := range []string{"bin", "logs", "nginx/tmp", "site", "caddy", "src/app"} {
		must(os.MkdirAll(filepath.Join(b.tmp, d), 0o755))
	}
	if runtime.NumCPU() < 2 {
		say("warning: only %d CPU(s); server and load generator cannot be separated", runtime.NumCPU())
	}
	b.install()
	b.site = filepath.Join(b.tmp, "site")
	writeSite(b.site)
	b.build()
	b.box = newBox(b.cfg)
	if b.cfg.want("https") {
		b.tls = newIdentity(filepath.Join(b.tmp, "tls"))
	}
	b.checkPeers()
}

// install apt-gets what the sections need and the machine lacks:
// benchmark tools, never project dependencies.
func (b *bench) install() {
	need := map[string]string{"taskset": "util-linux"}
	anyOf := func(sections ...string) bool { return slices.ContainsFunc(sections, b.cfg.want) }
	if anyOf("throughput", "app", "balance", "memory", "https", "lifetime") {
		need["wrk"] = "wrk"
	}
	if anyOf("throughput", "memory", "https") {
		need["nginx"] = "nginx-light"
	}
	if b.cfg.want("https") {
		need["h2load"] = "nghttp2-client"
		need["caddy"] = "caddy"
	}
	if anyOf("reload", "heal") {
		need["gnuplot"] = "gnuplot-nox"
	}
	var pkgs []string
	for tool, pkg := range need {
		if lookTool(tool) == "" {
			pkgs = append(pkgs, pkg)
		}
	}
	if len(pkgs) > 0 {
		slices.Sort(pkgs)
		say("installing %s (apt-get)", strings.Join(pkgs, " "))
		log := filepath.Join(b.tmp, "logs", "apt.log")
		if err := shell(log, "apt-get update && apt-get install -y "+strings.Join(pkgs, " ")); err != nil {
			die("apt-get install %s: %v: %s", strings.Join(pkgs, " "), err, tail(log, 5))
		}
	}
	for tool := range need {
		if lookTool(tool) == "" {
			die("%s missing after install", tool)
		}
	}
	b.nginx, b.caddy = lookTool("nginx"), lookTool("caddy")
}

// lookTool finds a tool on PATH or in /usr/sbin (nginx's home on Debian).
func lookTool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := "/usr/sbin/" + name; isExecutable(p) {
		return p
	}
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// build compiles servery from the working tree as it is now, the
// baselines, and, for section app, servery vendored by the README's
// steps into a program whose App writes 1 KiB from memory.
func (b *bench) build() {
	log := filepath.Join(b.tmp, "logs", "build.log")
	bin := func(name string) string { return filepath.Join(b.tmp, "bin", name) }
	say("building servery from %s", b.repo)
	if err := run1(log, b.repo, "go", "build", "-o", bin("servery"), "."); err != nil {
		die("go build of servery: %v: %s", err, tail(log, 20))
	}
	if err := run1(log, b.repo, "go", "build", "-o", bin("baseline"), "./bench/baseline"); err != nil {
		die("go build of the baselines: %v: %s", err, tail(log, 20))
	}
	b.bin["servery"], b.bin["baseline"] = bin("servery"), bin("baseline")
	if !b.cfg.want("app") {
		return
	}
	say("building the vendored app (the README's vendoring steps)")
	src := filepath.Join(b.tmp, "src", "app")
	// The README's commands, as written there, run from the module's root.
	const steps = `mkdir servery
cp "$SERVERY"/*.go servery/
rm servery/*_test.go servery/main.go
sed -i.orig 's/^package main$/package servery/' servery/*.go
rm servery/*.orig`
	if err := run1(log, src, "go", "mod", "init", "benchapp"); err != nil {
		die("go mod init: %v: %s", err, tail(log, 20))
	}
	if err := run1(log, src, "env", "SERVERY="+b.repo, "bash", "-euc", steps); err != nil {
		die("vendoring servery into the app: %v: %s", err, tail(log, 20))
	}
	must(os.WriteFile(filepath.Join(src, "main.go"), []byte(appMain), 0o644))
	if err := run1(log, src, "go", "build", "-o", bin("app"), "."); err != nil {
		die("building the vendored app: %v: %s", err, tail(log, 20))
	}
	b.bin["app"] = bin("app")
}

// run1 runs one build step in dir with its output appended to log. The
// environment leaves the repository's module and workspace settings out.
func run1(log, dir string, name string, args ...string) error {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, f, f
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	return cmd.Run()
}

// shell runs a shell command line with its output to log.
func shell(log, line string) error { return run1(log, "", "bash", "-c", line) }

// tail returns the last n lines of a file, on one line.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

func must(err error) {
	if err != nil {
		die("%v", err)
	}
}

// save writes the report and copies the raw logs to the output directory.
func (b *bench) save(name string) {
	must(os.MkdirAll(b.cfg.out, 0o755))
	raw := filepath.Join(b.cfg.out, "raw")
	os.RemoveAll(raw)
	if err := os.CopyFS(raw, os.DirFS(filepath.Join(b.tmp, "logs"))); err != nil {
		say("copying the raw logs: %v", err)
	}
	must(os.WriteFile(filepath.Join(b.cfg.out, name), []byte(b.rep.String()), 0o644))
	if name == "report.md" {
		os.Remove(filepath.Join(b.cfg.out, "report.partial.md"))
	} else {
		say("partial report saved to %s", filepath.Join(b.cfg.out, name))
	}
}
