//go:build linux

// report.go is the run's Markdown report, its problems, and the arithmetic
// of its cells: medians, dispersion, ratios and verdicts.

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// report collects the Markdown lines and the problems seen; the problems
// become the report's "Problems observed" section.
type report struct {
	mu       sync.Mutex
	lines    []string
	problems []string
}

func newReport() *report { return &report{} }

func (r *report) md(lines ...string) {
	r.mu.Lock()
	r.lines = append(r.lines, lines...)
	r.mu.Unlock()
}

func (r *report) mdf(format string, args ...any) { r.md(fmt.Sprintf(format, args...)) }

// problem records something that makes a figure doubtful or a server
// misbehave; the run goes on.
func (r *report) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	say("PROBLEM: %s", msg)
	r.mu.Lock()
	r.problems = append(r.problems, msg)
	r.mu.Unlock()
}

func (r *report) len() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.lines) }

func (r *report) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n") + "\n"
}

// median of xs, NaN for none; NaNs are left out.
func median(xs []float64) float64 {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if n := len(v); n%2 == 1 {
		return v[n/2]
	} else {
		return (v[n/2-1] + v[n/2]) / 2
	}
}

// madPct is the median absolute deviation as a percentage of the median.
func madPct(xs []float64) float64 {
	m := median(xs)
	if math.IsNaN(m) || m <= 0 {
		return math.NaN()
	}
	dev := make([]float64, len(xs))
	for i, x := range xs {
		dev[i] = math.Abs(x - m)
	}
	return 100 * median(dev) / m
}

// maxOf is the largest of xs, NaN for none.
func maxOf(xs []float64) float64 {
	m := math.NaN()
	for _, x := range xs {
		if math.IsNaN(m) || x > m {
			m = x
		}
	}
	return m
}

// ratio is a / b, NaN when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// num formats x with format, or "n/a" when it is not a number.
func num(format string, x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "n/a"
	}
	return fmt.Sprintf(format, x)
}

// verdict says whether v meets target (and stretch, if not NaN) under
// op, one of ">=", "<=", "<".
func verdict(v float64, op string, target, stretch float64) string {
	ok := func(t float64) bool {
		switch op {
		case ">=":
			return v >= t
		case "<=":
			return v <= t
		}
		return v < t
	}
	res := "**FAIL**"
	if !math.IsNaN(v) && ok(target) {
		res = "**PASS**"
	}
	if !math.IsNaN(stretch) {
		if !math.IsNaN(v) && ok(stretch) {
			res += fmt.Sprintf(" (stretch %g: PASS)", stretch)
		} else {
			res += fmt.Sprintf(" (stretch %g: not met)", stretch)
		}
	}
	return res
}

var none = math.NaN() // no stretch target

// logIssues makes a problem of WARN and ERROR lines, panics and fatal
// errors in a servery log, but for lines ignore matches (when not nil).
func (b *bench) logIssues(name, log string, ignore *regexp.Regexp) {
	var hits []string
	for _, line := range strings.Split(string(mustRead(log)), "\n") {
		bad := strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") ||
			strings.Contains(line, "panic:") || strings.Contains(line, "fatal error")
		if bad && (ignore == nil || !ignore.MatchString(line)) {
			hits = append(hits, line)
		}
	}
	if len(hits) > 0 {
		b.rep.problem("%s: warnings/errors in its log (%s): %s", name, log, strings.Join(hits[:min(5, len(hits))], " "))
	}
}

// header writes what the run measured with, and on what.
func (b *bench) header() {
	c := b.cfg
	out := func(name string, args ...string) string {
		o, _ := runOutput(name, args...)
		line, _, _ := strings.Cut(strings.TrimSpace(o), "\n")
		return line
	}
	b.rev = out("git", "-C", b.repo, "rev-parse", "--short", "HEAD")
	if out("git", "-C", b.repo, "status", "--porcelain", "--untracked-files=no") != "" {
		b.rev += "-dirty"
	}
	cpu := "unknown"
	for _, line := range strings.Split(string(mustRead("/proc/cpuinfo")), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			cpu = strings.TrimSpace(v)
			break
		}
	}
	b.rep.md("# servery benchmark report", "", "| | |", "|---|---|")
	b.rep.mdf("| date | %s |", time.Now().UTC().Format("2006-01-02 15:04:05 UTC"))
	b.rep.mdf("| kernel | %s |", out("uname", "-r"))
	b.rep.mdf("| CPU | %s |", cpu)
	b.rep.mdf("| nproc | %d |", b.box.ncpu)
	b.rep.mdf("| go | %s |", out("go", "version"))
	b.rep.mdf("| servery | git %s, binary sha256 %s |", b.rev, fileHash(b.bin["servery"]))
	b.rep.mdf("| command | `%s` |", b.command())
	if c.want("app") {
		b.rep.mdf("| app (section 1b) | the same sources vendored by the README's steps, with a main.go that writes 1 KiB from memory; binary sha256 %s |", fileHash(b.bin["app"]))
	}
	if lookTool("wrk") != "" {
		b.rep.mdf("| wrk | %s |", strings.Join(strings.Fields(out("wrk", "--version"))[:2], " "))
	}
	if b.nginx != "" {
		b.rep.mdf("| nginx | %s |", strings.TrimPrefix(out(b.nginx, "-v"), "nginx version: "))
	}
	if c.want("https") {
		b.rep.mdf("| h2load / caddy | %s / caddy %s |", out("h2load", "--version"), out(b.caddy, "version"))
	}
	b.rep.mdf("| dur / trials | %v / %d (warmup %v; wrk -c%d --latency) |", c.dur, c.trials, c.warmup, c.conns)
	b.rep.mdf("| startup trials | %d |", c.startupTrials)
	b.rep.mdf("| quick / sections | %v / %s |", c.quick, strings.Join(c.sections, ","))
	b.rep.mdf("| shared-box guard | wait for other work <= %g%% (up to %v each, %v in all); measure again when other work > %g%% (up to %dx) |",
		c.quietPct, c.quietWait, c.quietBudget, c.noisyPct, c.noisyRetries)
	b.rep.mdf("| load average at start | %s |", loadavg())
	b.rep.md("")
}

// footer writes the problems and the caveats.
func (b *bench) footer() {
	c := b.cfg
	if spread := speedSpread(b.box.probes); spread > maxSpeedSpread {
		b.rep.problem("the box's own speed moved by %.0f%% during the run (see Box speed under Caveats): a ratio between servers that differs from 1 by less than that is not a measurement", spread)
	}
	b.rep.md("## Problems observed", "")
	if len(b.rep.problems) == 0 {
		b.rep.md("- none: every server answered, every load run had 0 errors, every stop exited 0 with no WARN/ERROR log lines and no leftover processes.")
	}
	for _, p := range b.rep.problems {
		b.rep.md("- " + p)
	}
	b.rep.md("", "## Caveats", "")
	b.rep.md("- 2 cores in all, shared with the load generator: in group A it has its own core, in group B (and the balance/memory runs) it competes with the server, so group B measures the pair, not the server alone.")
	b.rep.md("- Loopback only: no NIC, no interrupts, no real network latency; responses from a warm page cache (and nginx's open_file_cache), so this measures per-request CPU cost, not I/O.")
	b.rep.mdf("- wrk uses one thread and %d keep-alive connections; a single wrk thread may be near its own limit against the fastest servers, which compresses ratios towards 1.", c.conns)
	if c.want("reload") || c.want("heal") {
		b.rep.md("- Reload and heal: the load is bench/reloadtool's Go client, heavier per request than wrk, so their req/s level is the client's and the pair's, not servery's ceiling: what matters there is the shape around each SIGHUP, kill or recycle. A bucket's req/s is its count x 10 (100 ms buckets, by completion time). Under load servery's parent shares its CPU with its busy workers, so a replacement's time to ready includes waiting for that CPU.")
	}
	b.rep.mdf("- Short runs (%v x %d trials) on a shared machine: other work on it shows up as noise; see the MAD and other-work columns, the retries and waits below, and the load average. Startup times are ~1 ms resolution.", c.dur, c.trials)
	b.rep.md("- servery is measured as built from the working tree at run time, which may include uncommitted edits.")
	b.rep.mdf("- Waited %.0f s in all for the box to go quiet; measured %d run(s) again that other work disturbed.", b.box.waited.Seconds(), b.box.retried)
	if ms := b.box.probes; len(ms) > 0 {
		b.rep.mdf("- Box speed: a fixed CPU probe (SHA-256 of %d MiB on one thread), run once the box was quiet before each measurement, took %.1f-%.1f ms (median %.1f ms over %d probe(s)): a spread of %.0f%%. A busy host slows a VM with no other work to see above, so ratios of measurements that differ by less than the spread may be the box's, not the servers'.", probeBytes>>20, slices.Min(ms), slices.Max(ms), median(ms), len(ms), speedSpread(ms))
	}
	b.rep.mdf("- Load average at end: %s. Wall time: %.0f s.", loadavg(), time.Since(b.started).Seconds())
}

// command is how the harness was run, for the report and the plots.
func (b *bench) command() string {
	return strings.TrimSpace("go run ./bench " + strings.Join(os.Args[1:], " "))
}

func loadavg() string {
	f := strings.Fields(string(mustRead("/proc/loadavg")))
	return strings.Join(f[:3], " ")
}

// fileHash is the first 12 hex digits of a file's SHA-256.
func fileHash(path string) string {
	sum := sha256.Sum256(mustRead(path))
	return hex.EncodeToString(sum[:])[:12]
}

// runOutput runs a command and returns its combined output.
func runOutput(name string, args ...string) (string, error) {
	o, err := exec.Command(name, args...).CombinedOutput()
	return string(o), err
}

func writeFileOrDie(path, text string) {
	must(os.WriteFile(path, []byte(text), 0o644))
}
