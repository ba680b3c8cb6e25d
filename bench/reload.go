//go:build linux

// reload.go is section 6: what a reload (SIGHUP) costs, idle and under
// keep-alive load, timed by bench/reloadtool, which sends the SIGHUPs,
// reads servery's stderr from a pipe and drives the load; and the req/s
// series drawn with gnuplot.

package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// reloadRun is one under-load run: its workers, and whether its requests
// are non-replayable (the Transport will not resend them).
type reloadRun struct {
	id       string
	workers  int
	noRetry  bool
	bucketMS int
	upgrade  bool // SIGUSR2: the parent's in-place upgrade, which ends in a reload
}

func (r reloadRun) label() string {
	switch {
	case r.upgrade:
		return "GET, upgrade (SIGUSR2)"
	case r.noRetry:
		return "non-replayable"
	}
	return "GET"
}

// signal is the signal its -hups send.
func (r reloadRun) signal() string {
	if r.upgrade {
		return "USR2"
	}
	return "HUP"
}

// idleRun is one idle row: its workers, and whether it upgrades the
// parent (SIGUSR2) rather than reloads (SIGHUP).
type idleRun struct {
	workers int
	upgrade bool
}

func (r idleRun) name() string {
	if r.upgrade {
		return fmt.Sprintf("idle-w%d-upgrade", r.workers)
	}
	return fmt.Sprintf("idle-w%d", r.workers)
}

func (r idleRun) label() string {
	switch {
	case r.upgrade:
		return fmt.Sprintf("%d, upgrade (SIGUSR2)", r.workers)
	case r.workers == 1:
		return "1 (direct)"
	}
	return strconv.Itoa(r.workers)
}

func (r idleRun) signal() string {
	if r.upgrade {
		return "USR2"
	}
	return "HUP"
}

// runTool runs reloadtool in a session of its own, bounded by limit, its
// output to logs/NAME.tool.out; afterwards every process of the run must
// be gone within 2 s, or it is a problem and they are killed.
func (b *bench) runTool(name string, limit time.Duration, argv ...string) error {
	_, err := b.runBounded(b.logPath(name+".tool.out"), limit, argv...)
	for range 40 {
		if len(under(b.tmp)) == 0 {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	left := under(b.tmp)
	b.rep.problem("%s: %d processes left after the run: %v", name, len(left), left)
	for _, pid := range left {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return err
}

// readTSV reads a TSV with a header line into rows of fields.
func readTSV(path string) [][]string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var rows [][]string
	for _, l := range lines[1:] {
		rows = append(rows, strings.Split(l, "\t"))
	}
	return rows
}

// tsvColumn is column i (from 0) of rows as numbers, NaNs left out.
func tsvColumn(rows [][]string, i int) []float64 {
	var out []float64
	for _, r := range rows {
		if i < len(r) {
			if v, err := strconv.ParseFloat(r[i], 64); err == nil && !math.IsNaN(v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// summary reads reloadtool's key=value summary of a load run.
func summary(path string) map[string]string {
	m := map[string]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			if m[k] == "" {
				m[k] = v
			} else {
				m[k] += "\n" + v
			}
		}
	}
	return m
}

// reload runs section 6: idle reloads for 1, 2 and 4 workers, then
// reloads under load, each run by bench/reloadtool; then the report and
// the plot.
func (b *bench) reload() {
	c := b.cfg
	idleReloads, loadWorkers, dur, hupCount := 11, []int{2, 4}, 10*time.Second, 5
	if c.quick {
		idleReloads, loadWorkers, dur, hupCount = 5, []int{4}, 5*time.Second, 3
	}
	const gap, bucketMS = "300ms", 100
	tool := b.buildReloadtool()
	pinned := b.box.ncpu >= 2
	port := c.basePort + 200
	// The site's 1 KiB file is the same for every section; reloadtool
	// checks each answer against it byte for byte.
	page := filepath.Join(b.site, "1k.html")
	serveryArgs := func(w, port int) []string {
		return []string{b.bin["servery"], "-workers", strconv.Itoa(w), "-dir", b.site, "-addr", fmt.Sprintf("127.0.0.1:%d", port)}
	}
	idleRuns := []idleRun{{1, false}, {2, false}, {4, false}, {2, true}, {4, true}}
	for _, r := range idleRuns {
		b.box.waitQuiet()
		say("reload, idle: -workers %d, %d of SIG%s", r.workers, idleReloads, r.signal())
		name := r.name()
		argv := append([]string{tool, "idle", "-n", strconv.Itoa(idleReloads), "-gap", gap, "-signal", r.signal(),
			"-log", b.logPath(name + ".log"), "-pidfile", b.logPath(name + ".pid"),
			"-out", b.logPath(name + ".tsv"), "-other", b.logPath(name + ".other"), "--"}, serveryArgs(r.workers, port)...)
		if err := b.runTool(name, 2*time.Minute, argv...); err != nil {
			b.rep.problem("reload idle %s: the run failed: %s", r.label(), tail(b.logPath(name+".tool.out"), 3))
		}
		port++
	}
	var hups []string
	for k := 1; k <= hupCount; k++ {
		hups = append(hups, fmt.Sprintf("%dms", int(math.Round(1000*float64(k)*dur.Seconds()/float64(hupCount+1)))))
	}
	var runs []reloadRun
	for _, w := range loadWorkers {
		runs = append(runs, reloadRun{fmt.Sprintf("w%d", w), w, false, bucketMS, false})
	}
	runs = append(runs, reloadRun{"w4-noretry", 4, true, bucketMS, false}, reloadRun{"w4-upgrade", 4, false, bucketMS, true})
	for _, r := range runs {
		b.box.waitQuiet()
		say("reload, load: %s: %d keep-alive clients, %v, SIGHUP at %s", r.id, c.conns, dur, strings.Join(hups, ","))
		name := "load-" + r.id
		var argv []string
		if pinned {
			argv = []string{"taskset", "-c", c.wrkCPU}
		}
		argv = append(argv, tool, "load", "-noretry="+strconv.FormatBool(r.noRetry), "-signal", r.signal(),
			"-url", fmt.Sprintf("http://127.0.0.1:%d/1k.html", port), "-expect", page, "-c", strconv.Itoa(c.conns),
			"-warmup", c.warmup.String(), "-dur", dur.String(), "-bucket", fmt.Sprintf("%dms", bucketMS), "-hups", strings.Join(hups, ","),
			"-log", b.logPath(name+".log"), "-pidfile", b.logPath(name+".pid"), "-csv", b.logPath(name+".csv"),
			"-reloads", b.logPath(name+".tsv"), "-summary", b.logPath(name+".sum"), "--")
		if pinned {
			argv = append(argv, "taskset", "-c", c.serverCPU)
		}
		argv = append(argv, serveryArgs(r.workers, port)...)
		if err := b.runTool(name, dur+time.Minute, argv...); err != nil {
			b.rep.problem("reload load %s: the run failed: %s", r.id, tail(b.logPath(name+".tool.out"), 3))
		}
		port++
	}
	b.reloadReport(idleRuns, idleReloads, runs, dur, hups, gap, pinned)
	b.reloadPlot(runs, dur, hups, loadWorkers)
}

// reloadReport writes section 6 from reloadtool's TSVs and summaries.
func (b *bench) reloadReport(idleRuns []idleRun, idleReloads int, runs []reloadRun, dur time.Duration, hups []string, gap string, pinned bool) {
	c := b.cfg
	ms := func(us float64) string { return num("%.1f", us/1000) }
	b.rep.mdf("## 6. Reload (SIGHUP), idle: %d reloads per row, one at a time, %s apart; unpinned", idleReloads, gap)
	b.rep.md("", "ready = SIGHUP until `msg=reloaded` (every new worker ready, the new generation serving); gone = SIGHUP until `msg=\"generation retired\"` (every old worker drained, exited and reaped). Helper clock: bench/reloadtool takes the time just before kill(SIGHUP) and when it reads each line from servery's stderr pipe (microseconds). Log: servery's own `time=` stamps, from the `reload requested` line (millisecond resolution, so +-1 ms).",
		"", "| workers | ready, median (min-max) ms, helper clock | gone, median (min-max) ms, helper clock | ready / gone median ms, log | signal to its `reload requested` (`upgrade requested`) line, median ms | old workers alive after `retired` | other work on box |",
		"|---:|---|---|---|---:|---:|---:|")
	for _, r := range idleRuns {
		w, name, label := r.workers, r.name(), r.label()
		rows := readTSV(b.logPath(name + ".tsv"))
		if len(rows) == 0 {
			b.rep.mdf("| %s | n/a | n/a | n/a | n/a | n/a | n/a |", label)
			continue
		}
		ready, gone := tsvColumn(rows, 2), tsvColumn(rows, 3)
		alive := 0
		for _, v := range tsvColumn(rows, 6) {
			alive += int(v)
		}
		if alive != 0 {
			b.rep.problem("reload idle -workers %d: %d old workers still alive after their generation's `generation retired` line", w, alive)
		}
		if len(rows) != idleReloads {
			b.rep.problem("reload idle -workers %d: %d of %d reloads completed", w, len(rows), idleReloads)
		}
		other := strings.TrimSpace(string(mustReadOr(b.logPath(name+".other"), "n/a")))
		b.rep.mdf("| %s | %s (%s-%s) | %s (%s-%s) | %s / %s | %s | %d | %s %% |", label, ms(median(ready)), ms(minOf(ready)), ms(maxOf(ready)),
			ms(median(gone)), ms(minOf(gone)), ms(maxOf(gone)), num("%g", median(tsvColumn(rows, 4))), num("%g", median(tsvColumn(rows, 5))),
			ms(median(tsvColumn(rows, 1))), alive, other)
	}
	b.rep.md("", "- Direct mode (-workers 1) starts no processes: a reload rebuilds the handler in-process and swaps it in, so ready and gone are close together and tiny.",
		"- An upgrade (SIGUSR2) checks the new executable in a child, execs it in the parent with the workers held, adopts them, then reloads: its ready and gone include the check and the exec, the same pid throughout.", "")
	b.rep.mdf("### Reload under keep-alive load: %d clients, GET /1k.html, %v measured after %v warmup, SIGHUP at %s", c.conns, dur, c.warmup, strings.Join(hups, " "))
	pin := "Unpinned (one CPU)."
	if pinned {
		pin = fmt.Sprintf("servery and its workers pinned to CPU %s, the client to CPU %s.", c.serverCPU, c.wrkCPU)
	}
	b.rep.md("")
	b.rep.mdf("Load: a Go net/http client, bench/reloadtool (wrk cannot bucket by time): %d goroutines sharing one keep-alive Transport, each GETting in a loop; every response is checked byte for byte and counted in the %d ms bucket of its completion time. %s", c.conns, runs[0].bucketMS, pin)
	b.rep.md("", "- **GET** rows: ordinary GETs. Go's Transport silently sends a GET again when a reused connection closes before any response byte (the keep-alive race); the helper sees each such retry through httptrace (a second `GotConn` within one request) and counts it as a keep-alive-race closure, but the request itself succeeds.",
		"- **non-replayable** rows: the same GET with an empty body that is not `http.NoBody` and no `GetBody` (nothing more on the wire), which the Transport will not retry: what a POST, or a client that never retries, would see. A keep-alive race is then an error.",
		"", "| run | workers | requests | mean req/s | median bucket req/s | lowest bucket within 1 s after a SIGHUP (% of median) | lowest bucket elsewhere (% of median) | buckets < 50 % of median / at 0 | truncated | refused | keep-alive-race closures (retried / failed) | other errors | reloads done / failed | other work on box |",
		"|---|---:|---:|---:|---:|---|---|---|---:|---:|---|---:|---|---:|")
	var totReq, totTrunc, totRef, totRace, totRaceF, totOther int
	for _, r := range runs {
		s := summary(b.logPath("load-" + r.id + ".sum"))
		if len(s) == 0 {
			b.rep.mdf("| %s | %d | n/a | | | | | | | | | | | |", r.label(), r.workers)
			continue
		}
		n := func(k string) int { return atoi(s[k]) }
		req, trunc, ref, race, raceF, other := n("requests"), n("truncated"), n("refused"), n("ka_race"), n("ka_race_failed"), n("other")
		totReq, totTrunc, totRef, totRace, totRaceF, totOther = totReq+req, totTrunc+trunc, totRef+ref, totRace+race, totRaceF+raceF, totOther+other
		rows := readTSV(b.logPath("load-" + r.id + ".tsv"))
		worst, done := "n/a", 0
		low := math.NaN()
		for _, row := range rows {
			if len(row) > 5 {
				if v, err := strconv.ParseFloat(row[4], 64); err == nil && (math.IsNaN(low) || v < low) {
					low, worst = v, fmt.Sprintf("%s (%s %%)", row[4], row[5])
				}
			}
			if len(row) > 3 && row[3] != "NaN" {
				done++
			}
		}
		failed := n("reloads_failed")
		b.rep.mdf("| %s | %d | %d | %s | %s | %s | %s | %s / %s of %s | %d | %d | %d / %d | %d | %d / %d of %d | %s %% |", r.label(), r.workers, req,
			s["rps_mean"], s["rps_median_bucket"], worst, s["min_rps_away"], s["low_buckets"], s["zero_buckets"], s["buckets"],
			trunc, ref, race-raceF, raceF, other, done, failed, len(hups), s["other_pct"])
		if trunc != 0 {
			b.rep.problem("reload load %s: %d truncated responses", r.id, trunc)
		}
		if ref != 0 {
			b.rep.problem("reload load %s: %d refused connections", r.id, ref)
		}
		if other != 0 {
			b.rep.problem("reload load %s: %d other errors: %s", r.id, other, firstLines(s["other_kind"], 3))
		}
		if failed != 0 {
			b.rep.problem("reload load %s: %d reloads failed", r.id, failed)
		}
		if done != len(hups) {
			b.rep.problem("reload load %s: %d of %d reloads reached `generation retired`", r.id, done, len(hups))
		}
		if s["servery_exit"] != "ok" {
			b.rep.problem("reload load %s: servery's exit: %s", r.id, s["servery_exit"])
		}
		if r.noRetry && raceF > 0 {
			b.rep.problem("reload load %s: %d non-replayable requests failed on a reused connection closed before any response byte (a POST would be lost): %s", r.id, raceF, firstLines(s["race_kind"], 3))
		}
	}
	b.rep.md("")
	b.rep.mdf("**Totals** over the load runs: %d requests, %d truncated, %d refused, %d keep-alive-race closures (%d retried by the Transport, %d failed), %d other errors.",
		totReq, totTrunc, totRef, totRace, totRace-totRaceF, totRaceF, totOther)
	b.rep.md("", "Per reload (log timestamps, from `reload requested`; the lowest bucket is over the 1 s from the SIGHUP):", "",
		"| run | workers | reload | SIGHUP at (s) | ready (ms) | gone (ms) | lowest bucket req/s (% of median) |", "|---|---:|---:|---:|---:|---:|---:|")
	slow := 0
	for _, r := range runs {
		for _, row := range readTSV(b.logPath("load-" + r.id + ".tsv")) {
			if len(row) > 5 {
				b.rep.mdf("| %s | %d | %s | %s | %s | %s | %s (%s %%) |", r.label(), r.workers, row[0], row[1], row[2], row[3], row[4], row[5])
				if v, err := strconv.ParseFloat(row[3], 64); err == nil && v >= 900 {
					slow++
				}
			}
		}
	}
	b.rep.md("")
	for _, r := range runs {
		s := summary(b.logPath("load-" + r.id + ".sum"))
		if k := s["race_kind"]; k != "" {
			b.rep.mdf("- %s, errors of the failed keep-alive-race closures: %s", r.id, firstLines(k, 4))
		}
		if w := atoi(s["reload_waits"]); w > 0 {
			b.rep.mdf("- %s: %d reload(s) waited for the previous generation to finish retiring (`reload waits for the retiring generation`).", r.id, w)
		}
	}
	if slow > 0 {
		b.rep.mdf("- %d reload(s) took 0.9 s or more to retire the old generation under load. The drain's closeGrace (drain.go) is 1 s: the old workers wait up to that long for their HTTP/1 clients to leave on a `Connection: close` answer, and a connection that the client holds idle (a Transport keeps spare ones in its pool) only goes when Shutdown closes it at the end of that second.", slow)
	}
	b.rep.md("", "![req/s per 100 ms bucket across reloads](reload-rps.svg)", "")
}

func mustReadOr(path, alt string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return []byte(alt)
	}
	return b
}

// firstLines joins the first n lines of s with "; ".
func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[:min(n, len(lines))], "; ")
}

// reloadPlot writes the load runs' buckets to OUT/reload-rps.csv (and one
// CSV per run beside it) and draws them with gnuplot as OUT/reload-rps.svg,
// the SIGHUPs as dashed lines.
func (b *bench) reloadPlot(runs []reloadRun, dur time.Duration, hups []string, loadWorkers []int) {
	out := b.cfg.out
	must(os.MkdirAll(out, 0o755))
	var csv strings.Builder
	csv.WriteString("run,workers,t_ms,rps,errors,ka_race\n")
	var plots []string
	colors := []string{"#1f77b4", "#2ca02c", "#9467bd", "#8c564b"}
	y2 := false
	for i, r := range runs {
		data, err := os.ReadFile(b.logPath("load-" + r.id + ".csv"))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		hasCol := func(col int) bool {
			for _, l := range lines[1:] {
				if f := strings.Split(l, ","); col < len(f) && atoi(f[col]) > 0 {
					return true
				}
			}
			return false
		}
		for _, l := range lines[1:] {
			fmt.Fprintf(&csv, "%s,%d,%s\n", r.id, r.workers, l)
		}
		f := filepath.Join(out, "reload-rps-"+r.id+".csv")
		must(os.WriteFile(f, data, 0o644))
		color := colors[i%len(colors)]
		if r.noRetry {
			plots = append(plots, fmt.Sprintf("'%s' skip 1 using ($1/1000):2 with steps lw 1 dt 3 lc rgb '%s' title '-workers %d, non-replayable GET'", f, color, r.workers))
			if hasCol(2) {
				plots = append(plots, fmt.Sprintf("'%s' skip 1 using ($1/1000+%d/2000.0):($3>0?$3:1/0) axes x1y2 with points pt 7 ps 0.6 lc rgb '#d62728' title 'failed requests per bucket, -workers %d non-replayable (right axis)'", f, r.bucketMS, r.workers))
				y2 = true
			}
		} else {
			plots = append(plots, fmt.Sprintf("'%s' skip 1 using ($1/1000):2 with steps lw 1.5 lc rgb '%s' title '-workers %d, GET'", f, color, r.workers))
			if hasCol(3) {
				plots = append(plots, fmt.Sprintf("'%s' skip 1 using ($1/1000+%d/2000.0):($4>0?$4:1/0) axes x1y2 with impulses lw 2 lc rgb '%s' title 'keep-alive-race retries per bucket, -workers %d GET (right axis)'", f, r.bucketMS, color, r.workers))
				y2 = true
			}
		}
	}
	must(os.WriteFile(filepath.Join(out, "reload-rps.csv"), []byte(csv.String()), 0o644))
	if len(plots) == 0 {
		plots = []string{"1/0 notitle"}
	}
	rev := b.rev
	var ws []string
	for _, w := range loadWorkers {
		ws = append(ws, strconv.Itoa(w))
	}
	bucket := runs[0].bucketMS
	var gp strings.Builder
	fmt.Fprintf(&gp, "set terminal svg size 960,540 font 'sans,12' noenhanced\nset output '%s'\nset datafile separator ','\n", filepath.Join(out, "reload-rps.svg"))
	fmt.Fprintf(&gp, "set title \"servery reload under keep-alive load: req/s per %d ms bucket, -workers %s, %d clients, %d SIGHUPs (dashed red)\\ncommit %s, %s\"\n",
		bucket, strings.Join(ws, ","), b.cfg.conns, len(hups), rev, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&gp, "set xlabel 'time since the start of measurement (s)'\nset ylabel 'requests/s (completions per %d ms bucket x %d)'\n", bucket, 1000/bucket)
	if y2 {
		gp.WriteString("set y2label 'keep-alive-race retries (bars) / failed requests (dots) per bucket'\nset y2tics\nset ytics nomirror\nset y2range [0:*]\n")
	}
	fmt.Fprintf(&gp, "set xrange [0:%g]\nset yrange [0:*]\nset grid ytics lc rgb '#dddddd'\nset key outside bottom center horizontal font ',10'\nset bmargin 7\n", dur.Seconds())
	for _, h := range hups {
		t := strings.TrimSuffix(h, "ms")
		fmt.Fprintf(&gp, "set arrow from %s/1000.0, graph 0 to %s/1000.0, graph 1 nohead dt 2 lw 1.5 lc rgb '#d62728' back\n", t, t)
	}
	fmt.Fprintf(&gp, "set label 1 'made by: %s (commit %s, %s)' at screen 0.01, screen 0.015 font ',9' tc rgb '#555555'\n", b.command(), rev, time.Now().UTC().Format("2006-01-02"))
	gp.WriteString("plot " + strings.Join(plots, ", \\\n\t") + "\n")
	script := b.logPath("plot.gp")
	must(os.WriteFile(script, []byte(gp.String()), 0o644))
	os.Remove(filepath.Join(out, "reload-rps.svg"))
	if err := run1(b.logPath("gnuplot.log"), "", "gnuplot", script); err != nil {
		b.rep.problem("gnuplot failed: %v: %s", err, tail(b.logPath("gnuplot.log"), 5))
	}
}
