//go:build linux

// throughput.go is section 1 (throughput: servery against net/http's
// FileServer, the bare net/http ceiling and nginx) and section 1b (an
// application's handler served by a vendored servery), one round-robin.

package main

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// row is one server configuration of a throughput table.
type row struct {
	id, label, kind string
	workers         int
	cpus, loadCPUs  string
	group           string // A: one core for the server, one for wrk; B: both on both
}

// trial is one measured run of a row.
type trial struct {
	loadResult
	usage
}

// counters are one worker's counts, from a servery stop log.
type counters struct {
	worker, pid, accepted, served string
}

var countersLine = regexp.MustCompile(`msg="worker counters".*`)

// workerCounters reads the "worker counters" lines of a servery log.
func workerCounters(log string) []counters {
	var out []counters
	for _, line := range countersLine.FindAllString(string(mustRead(log)), -1) {
		var c counters
		for _, kv := range strings.Fields(line) {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "worker":
				c.worker = v
			case "pid":
				c.pid = v
			case "accepted":
				c.accepted = v
			case "served":
				c.served = v
			case "reported":
				c.accepted, c.served = "?", "?"
			}
		}
		out = append(out, c)
	}
	return out
}

// maxOverFair is the largest of xs over their mean.
func maxOverFair(xs []string) float64 {
	var total, top float64
	for _, x := range xs {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return math.NaN()
		}
		total += v
		top = max(top, v)
	}
	if len(xs) == 0 || total == 0 {
		return math.NaN()
	}
	return top / (total / float64(len(xs)))
}

func column(cs []counters, f func(counters) string) []string {
	var out []string
	for _, c := range cs {
		out = append(out, f(c))
	}
	return out
}

// tpBalance is a multi-worker throughput run's balance, from its counters.
type tpBalance struct {
	id               string
	trial            int
	maxFair          float64
	accepted, served string
}

// throughput runs section 1 and 1b's round-robin: every row's server,
// fresh for each trial, warmed up, then measured with wrk; it blocks until
// the last trial and writes both tables.
func (b *bench) throughput() {
	c := b.cfg
	one, two := c.serverCPU, c.pairCPUs
	static := []row{
		{"s1", "servery", "servery", 1, one, c.wrkCPU, "A"},
		{"s2", "servery", "servery", 2, one, c.wrkCPU, "A"},
		{"s4", "servery", "servery", 4, one, c.wrkCPU, "A"},
		{"s4l", "servery, -access-log FILE", "servery-accesslog", 4, one, c.wrkCPU, "A"},
		{"h1", "net/http FileServer", "nethttp", 1, one, c.wrkCPU, "A"},
		{"b1", "bare net/http (same headers)", "barehttp", 1, one, c.wrkCPU, "A"},
		{"n1", "nginx", "nginx", 1, one, c.wrkCPU, "A"},
		{"s2p", "servery", "servery", 2, two, two, "B"},
		{"h2p", "net/http FileServer", "nethttp", 2, two, two, "B"},
		{"n2p", "nginx", "nginx", 2, two, two, "B"},
	}
	// Section app adds its rows to the same round-robin, measured as
	// group A. Without section throughput the round-robin holds only the
	// rows the app table compares them with.
	var rows []row
	for _, r := range static {
		if c.want("throughput") || slices.Contains([]string{"s1", "s2", "s4", "b1"}, r.id) {
			rows = append(rows, r)
		}
	}
	if c.before != "" {
		rows = append(rows, row{"s1b", "servery before (-before)", "servery-before", 1, one, c.wrkCPU, "A"},
			row{"s2b", "servery before (-before)", "servery-before", 2, one, c.wrkCPU, "A"})
	}
	if c.want("app") {
		for _, w := range []int{1, 2, 4} {
			rows = append(rows, row{fmt.Sprintf("a%d", w), "servery app (1 KiB from memory)", "app", w, one, c.wrkCPU, "A"})
		}
	}
	results := map[string][]trial{}
	var balance []tpBalance
	for t := 1; t <= c.trials; t++ {
		for k := range rows {
			idx := (k + t - 1) % len(rows) // round-robin, rotated per trial
			r := rows[idx]
			name := fmt.Sprintf("tp-%s-t%d", r.id, t)
			say("throughput trial %d/%d: %s (%s w=%d on cpus %s, wrk on %s)", t, c.trials, r.id, r.label, r.workers, r.cpus, r.loadCPUs)
			b.box.waitQuiet()
			port := c.basePort + idx
			s := b.startServer(name, r.kind, r.workers, r.cpus, port)
			url := fmt.Sprintf("http://127.0.0.1:%d/1k.html", port)
			b.wrk(b.logPath(fmt.Sprintf("wrk-warm-%s-t%d.txt", r.id, t)), r.loadCPUs, c.warmup, url)
			var res loadResult
			u := b.box.measure(s.pid, func() time.Duration {
				res = b.wrk(b.logPath(fmt.Sprintf("wrk-%s-t%d.txt", r.id, t)), r.loadCPUs, c.dur, url)
				return res.cpu
			})
			b.stop(s)
			if math.IsNaN(res.rps) {
				b.rep.problem("%s: no Requests/sec in wrk output", name)
			}
			if res.errors != 0 {
				b.rep.problem("%s: wrk reported %d errors (socket errors + non-2xx)", name, res.errors)
			}
			results[r.id] = append(results[r.id], trial{res, u})
			say("  %s req/s, p99 %s ms, errors %d, server CPU %.0f%% of a core, other work on the box %.1f%%",
				num("%.0f", res.rps), num("%.2f", res.p99ms), res.errors, u.serverPct, u.otherPct)
			if r.kind == "servery" || r.kind == "app" || r.kind == "servery-before" {
				b.logIssues(name, s.log, nil)
				if r.workers > 1 {
					cs := workerCounters(s.log)
					balance = append(balance, tpBalance{r.id, t, maxOverFair(column(cs, func(c counters) string { return c.served })),
						strings.Join(column(cs, func(c counters) string { return c.accepted }), "/"),
						strings.Join(column(cs, func(c counters) string { return c.served }), "/")})
				}
			}
		}
	}
	b.tpBalance = balance
	med := map[string]float64{}
	for id, ts := range results {
		med[id] = median(rps(ts))
	}
	writeTSV(b.logPath("tp.tsv"), results)
	if c.want("throughput") {
		b.throughputTable(rows, results, med)
	}
	if c.want("app") {
		b.appTable(rows, results, med)
	}
}

func rps(ts []trial) []float64 {
	var out []float64
	for _, t := range ts {
		out = append(out, t.rps)
	}
	return out
}

// field is f of every element of xs.
func field[T any](xs []T, f func(T) float64) []float64 {
	out := make([]float64, 0, len(xs))
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

func errorsOf(ts []trial) int {
	n := 0
	for _, t := range ts {
		n += t.errors
	}
	return n
}

// writeTSV keeps every trial's figures with the raw data.
func writeTSV(path string, results map[string][]trial) {
	var sb strings.Builder
	ids := make([]string, 0, len(results))
	for id := range results {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		for i, t := range results[id] {
			fmt.Fprintf(&sb, "%s\t%d\t%.2f\t%.3f\t%d\t%.1f\t%.1f\n", id, i+1, t.rps, t.p99ms, t.errors, t.serverPct, t.otherPct)
		}
	}
	must(os.WriteFile(path, []byte(sb.String()), 0o644))
}

// throughputTable writes section 1's table and its targets.
func (b *bench) throughputTable(rows []row, results map[string][]trial, med map[string]float64) {
	c := b.cfg
	b.rep.mdf("## 1. Throughput: GET /1k.html, keep-alive, wrk -t1 -c%d -d%v", c.conns, c.dur)
	b.rep.md("")
	b.rep.mdf("Each cell is over %d trial(s), run round-robin across servers (each trial starts a fresh server, warms up for %v, then measures).", c.trials, c.warmup)
	b.rep.mdf("**Group A (one core):** the server and all its processes pinned to CPU %s (`taskset`, children inherit), wrk pinned to CPU %s.", c.serverCPU, c.wrkCPU)
	b.rep.mdf("**Group B (two cores):** the server on CPUs %s and wrk on the same CPUs: the load generator competes with the server for the 2 cores, so these numbers understate what the server could do alone.", c.pairCPUs)
	b.rep.md("servery with N workers runs each worker with GOMAXPROCS = max(1, cpus/N) (its own default), with `-status-addr` on; net/http gets GOMAXPROCS explicitly. nginx: sendfile on, access_log off, **open_file_cache on**, keepalive_requests 1000000.", "")
	b.rep.md("| group | server | workers / GOMAXPROCS | cores | median req/s | MAD req/s | median p99 (ms) | errors | vs net/http (same cores) | vs nginx (same cores) | server CPU (% of 1 core) | other work on box (max %) |",
		"|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if r.kind == "app" {
			continue // section 1b's table
		}
		ts := results[r.id]
		href, nref := "h1", "n1"
		if r.group == "B" {
			href, nref = "h2p", "n2p"
		}
		b.rep.mdf("| %s | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s |", r.group, r.label, workersLabel(r), r.cpus,
			num("%.0f", med[r.id]), num("%.1f%%", madPct(rps(ts))), num("%.2f", median(field(ts, func(t trial) float64 { return t.p99ms }))),
			errorsOf(ts), num("%.2fx", ratio(med[r.id], med[href])), num("%.2fx", ratio(med[r.id], med[nref])),
			num("%.0f", median(field(ts, func(t trial) float64 { return t.serverPct }))),
			num("%.1f", maxOf(field(ts, func(t trial) float64 { return t.otherPct }))))
	}
	if med["s4l"] > 0 && med["s4"] > 0 {
		b.rep.md("")
		b.rep.mdf("The access log's cost: 4 workers writing every request's line to a file, through the parent, serve %s of the same build without it (%s against %s req/s, medians).",
			num("%.3fx", ratio(med["s4l"], med["s4"])), num("%.0f", med["s4l"]), num("%.0f", med["s4"]))
	}
	b.rep.md("", "errors = wrk socket errors (connect+read+write+timeout) + non-2xx/3xx responses, summed over trials. The nginx reference is worker_processes 1 in group A and worker_processes 2 in group B.")
	b.rep.mdf("server CPU = user+system time of the server's whole process tree during the measured run (median). other work on box = CPU time (/proc/stat user+nice+system+steal; irq/softirq left out) not used by the server or wrk, as %% of all %d CPUs, worst trial: anything above a few %% means another workload competed and the row is noisy.", b.box.ncpu)
	b.noisyWarning(results, "throughput runs")
	b.rep.md("")
	r1, r2, r3, r4 := ratio(med["s1"], med["h1"]), ratio(med["s1"], med["n1"]), ratio(med["s4"], med["s1"]), ratio(med["s1"], med["b1"])
	b.rep.md("### Throughput targets (group A, one core)", "")
	b.rep.mdf("- servery w1 / net/http FileServer: %s (%s / %s req/s), target >= 2.0x: %s", num("%.2fx", r1), num("%.0f", med["s1"]), num("%.0f", med["h1"]), verdict(r1, ">=", 2.0, none))
	b.rep.mdf("- servery w1 / nginx 1 worker: %s (%s / %s req/s), target >= 0.75x: %s", num("%.2fx", r2), num("%.0f", med["s1"]), num("%.0f", med["n1"]), verdict(r2, ">=", 0.75, 0.85))
	b.rep.mdf("- servery w4 / servery w1 on one core: %s (%s / %s req/s), target >= 0.9x: %s", num("%.2fx", r3), num("%.0f", med["s4"]), num("%.0f", med["s1"]), verdict(r3, ">=", 0.9, none))
	b.rep.mdf("- servery w1 / bare net/http (same headers): %s, with `-status-addr` on, target >= 0.95x: %s (%s / %s req/s)", num("%.2fx", r4), verdict(r4, ">=", 0.95, none), num("%.0f", med["s1"]), num("%.0f", med["b1"]))
	if c.before != "" {
		b.rep.mdf("- before and after, in this round-robin: direct mode %s (%s / %s req/s), 2 workers %s (%s / %s req/s); before: `%s`",
			num("%.3fx", ratio(med["s1"], med["s1b"])), num("%.0f", med["s1"]), num("%.0f", med["s1b"]),
			num("%.3fx", ratio(med["s2"], med["s2b"])), num("%.0f", med["s2"]), num("%.0f", med["s2b"]), c.before)
	}
	b.rep.md("", "### N workers with GOMAXPROCS=1 vs 1 process with GOMAXPROCS=N (group B, two cores, wrk sharing them)", "")
	b.rep.mdf("- servery 2 workers / net/http GOMAXPROCS=2: %s; servery 2 workers / nginx 2 workers: %s; servery 2 workers on 2 cores / servery 1 worker on 1 core: %s",
		num("%.2fx", ratio(med["s2p"], med["h2p"])), num("%.2fx", ratio(med["s2p"], med["n2p"])), num("%.2fx", ratio(med["s2p"], med["s1"])))
	b.rep.md("")
}

func workersLabel(r row) string {
	switch r.kind {
	case "servery", "app", "servery-before":
		if r.workers == 1 {
			return "1 (direct mode)"
		}
		return fmt.Sprintf("%d workers", r.workers)
	case "nginx":
		return fmt.Sprintf("worker_processes %d", r.workers)
	}
	return fmt.Sprintf("GOMAXPROCS=%d", r.workers)
}

// noisyWarning warns, in the report and as a problem, when other work
// took more than 5% of the machine during any of the runs.
func (b *bench) noisyWarning(results map[string][]trial, what string) {
	worst := math.NaN()
	for _, ts := range results {
		if w := maxOf(field(ts, func(t trial) float64 { return t.otherPct })); math.IsNaN(worst) || w > worst {
			worst = w
		}
	}
	if worst > 5 {
		b.rep.mdf("\n**Warning: other work used up to %.1f%% of the machine during some %s; compare rows with care, or rerun on a quiet machine.**", worst, what)
		b.rep.problem("machine not quiet: other processes used up to %.1f%% of all CPUs during %s (not a servery problem; it makes the numbers noisy)", worst, what)
	}
}

// appTable writes section 1b's table: the app rows beside the static and
// bare ones.
func (b *bench) appTable(rows []row, results map[string][]trial, med map[string]float64) {
	c := b.cfg
	b.rep.mdf("## 1b. Application handler: GET /1k.html answered from memory by a vendored App, keep-alive, wrk -t1 -c%d -d%v", c.conns, c.dur)
	b.rep.md("", "The design record's second workload (its ASGI row), in Go: servery vendored into a program of its own by the README's steps (\"Embedding your own handler\"), whose `App.Start` returns a handler that writes a fixed 1 KiB reply held in memory (the bytes of /1k.html, read once per worker at start) with the headers servery sends for that file, precomputed and set by direct map assignment: the bare net/http row's handler, run by servery's workers.")
	b.rep.mdf("Measured as section 1's group A and in the same round-robin: %d trial(s), a fresh server each, %v warmup, then `wrk -t1 -c%d -d%v --latency`; the server and all its processes on CPU %s, wrk on CPU %s; medians. Its workers run with GOMAXPROCS = max(1, cpus/N), as servery's. The static and bare rows below are the same measurements as in section 1 when both sections run.",
		c.trials, c.warmup, c.conns, c.dur, c.serverCPU, c.wrkCPU)
	b.rep.md("", "| server | workers / GOMAXPROCS | cores | median req/s | MAD | median p99 (ms) | errors | vs 1 worker (same server) | vs bare net/http | app / static (same workers) | server CPU (% of 1 core) | other work on box (max %) |",
		"|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	sub := map[string][]trial{}
	for _, id := range []string{"s1", "s2", "s4", "a1", "a2", "a4", "b1"} {
		i := slices.IndexFunc(rows, func(r row) bool { return r.id == id })
		r, ts := rows[i], results[id]
		sub[id] = ts
		label, vs1, vsStatic := r.label, "-", "-"
		if r.kind == "servery" || r.kind == "app" {
			vs1 = num("%.2fx", ratio(med[id], med[id[:1]+"1"]))
			if r.kind == "app" {
				vsStatic = num("%.2fx", ratio(med[id], med[fmt.Sprintf("s%d", r.workers)]))
			} else {
				label = "servery static (cached file)"
			}
		}
		b.rep.mdf("| %s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s | %s |", label, workersLabel(r), r.cpus, num("%.0f", med[id]),
			num("%.1f%%", madPct(rps(ts))), num("%.2f", median(field(ts, func(t trial) float64 { return t.p99ms }))), errorsOf(ts),
			vs1, num("%.2fx", ratio(med[id], med["b1"])), vsStatic,
			num("%.0f", median(field(ts, func(t trial) float64 { return t.serverPct }))),
			num("%.1f", maxOf(field(ts, func(t trial) float64 { return t.otherPct }))))
	}
	b.rep.md("", "errors, server CPU and other work on box: as in section 1. vs 1 worker: against the same server's direct mode (app against app, static against static); app / static: the app row against servery's static row with as many workers.")
	if !c.want("throughput") {
		b.noisyWarning(sub, "app section runs")
	}
	b.rep.md("", "### Application handler ratios (one core; informational, no targets: the design record's targets are set for the static rows)", "")
	b.rep.mdf("- app w1 / bare net/http (same handler, same reply): %s (%s / %s req/s): what servery costs around an application's handler in direct mode; static servery w1 / bare net/http: %s.",
		num("%.2fx", ratio(med["a1"], med["b1"])), num("%.0f", med["a1"]), num("%.0f", med["b1"]), num("%.2fx", ratio(med["s1"], med["b1"])))
	b.rep.mdf("- app w2 / app w1: %s; app w4 / app w1: %s (extra workers on one busy core); static: w2 / w1 %s, w4 / w1 %s (its target: w4 / w1 >= 0.9x).",
		num("%.2fx", ratio(med["a2"], med["a1"])), num("%.2fx", ratio(med["a4"], med["a1"])), num("%.2fx", ratio(med["s2"], med["s1"])), num("%.2fx", ratio(med["s4"], med["s1"])))
	b.rep.mdf("- app / static with 1, 2, 4 workers: %s, %s, %s: the static handler's own work (cache lookup, revalidation, conditional and range checks) against a handler that only writes a precomputed reply.",
		num("%.2fx", ratio(med["a1"], med["s1"])), num("%.2fx", ratio(med["a2"], med["s2"])), num("%.2fx", ratio(med["a4"], med["s4"])))
	b.rep.md("")
}
