//go:build linux

// heal.go is section 7: what healing costs. A worker killed under load and
// replaced in its slot (beside a cold start), workers recycled under load,
// and a crash loop that ends in "giving up"; timed by bench/reloadtool's
// load (with -kills), coldstart and crashloop modes, and drawn with gnuplot.

package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// healPlan is section 7's settings; -quick shortens them.
type healPlan struct {
	workers, killRestarts, kills, coldRuns, maxRequests, bucketMS int
	killGap, firstKill, killTail, steady, recycleDur, crashSettle time.Duration
}

func (b *bench) healPlan() healPlan {
	p := healPlan{workers: 4, killRestarts: 20, kills: 11, coldRuns: 11, maxRequests: 2000, bucketMS: 100,
		killGap: 3 * time.Second, firstKill: 1500 * time.Millisecond, killTail: 1500 * time.Millisecond,
		steady: 10500 * time.Millisecond, recycleDur: 10 * time.Second, crashSettle: 11 * time.Second}
	if b.cfg.quick {
		p.kills, p.coldRuns, p.killGap, p.firstKill, p.recycleDur, p.crashSettle = 4, 3, time.Second, time.Second, 5*time.Second, 0
	}
	return p
}

// killDur is how long the kill run measures: through the last kill and
// killTail after it.
func (p healPlan) killDur() time.Duration {
	return p.firstKill + time.Duration(p.kills-1)*p.killGap + p.killTail
}

// settle is how long servery serves idle before the kill run's load, so
// that the first workers have served steady when the first kill comes.
func (p healPlan) settle(warmup time.Duration) time.Duration {
	return max(0, p.steady-warmup-p.firstKill)
}

// rotationSteady says whether the rotation gives each slot steady between
// its kills.
func (p healPlan) rotationSteady() bool {
	return p.kills <= p.workers || p.killGap*time.Duration(p.workers) >= p.steady
}

// heal runs section 7's four runs with bench/reloadtool (kills, cold
// starts, recycling, a crash loop), then writes the report and the plot.
func (b *bench) heal() {
	c, p := b.cfg, b.healPlan()
	tool := b.buildReloadtool()
	crashSite := filepath.Join(b.tmp, "site-crash")
	must(os.MkdirAll(crashSite, 0o755))
	must(os.WriteFile(filepath.Join(crashSite, "1k.html"), mustRead(filepath.Join(b.site, "1k.html")), 0o644))
	page := filepath.Join(b.site, "1k.html")
	port := c.basePort + 300
	pin := func(cpu string) []string {
		if b.box.ncpu < 2 {
			return nil
		}
		return []string{"taskset", "-c", cpu}
	}
	servery := func(dir string, port int, extra ...string) []string {
		argv := append(pin(c.serverCPU), b.bin["servery"], "-workers", strconv.Itoa(p.workers), "-dir", dir, "-addr", fmt.Sprintf("127.0.0.1:%d", port))
		return append(argv, extra...)
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }
	var offs, slots []string
	for k := range p.kills {
		offs = append(offs, ms(p.firstKill+time.Duration(k)*p.killGap))
	}
	for k := range p.workers {
		slots = append(slots, strconv.Itoa(k))
	}

	b.box.waitQuiet()
	say("heal, kill: -workers %d, %d clients, %v measured after %v idle and %v warmup, SIGKILL at %s", p.workers, c.conns, p.killDur(), p.settle(c.warmup), c.warmup, strings.Join(offs, ","))
	argv := append(pin(c.wrkCPU), tool, "load", "-noretry=true", "-url", fmt.Sprintf("http://127.0.0.1:%d/1k.html", port), "-expect", page,
		"-c", strconv.Itoa(c.conns), "-warmup", c.warmup.String(), "-dur", ms(p.killDur()), "-bucket", fmt.Sprintf("%dms", p.bucketMS),
		"-settle", ms(p.settle(c.warmup)), "-kills", strings.Join(offs, ","), "-kill-slots", strings.Join(slots, ","),
		"-log", b.logPath("kill.log"), "-pidfile", b.logPath("kill.pid"), "-csv", b.logPath("kill.csv"), "-summary", b.logPath("kill.sum"),
		"-kill-out", b.logPath("kill-kills.tsv"), "-heal", b.logPath("kill-heal.tsv"), "--")
	argv = append(argv, servery(b.site, port, "-max-restarts", strconv.Itoa(p.killRestarts))...)
	if err := b.runTool("kill", p.killDur()+p.settle(c.warmup)+c.warmup+time.Minute, argv...); err != nil {
		b.rep.problem("heal kill: the run failed: %s", tail(b.logPath("kill.tool.out"), 3))
	}
	for _, w := range []int{1, 2} {
		port++
		b.box.waitQuiet()
		say("heal, cold start: -workers %d, %d runs", w, p.coldRuns)
		name := fmt.Sprintf("cold-w%d", w)
		argv := []string{tool, "coldstart", "-n", strconv.Itoa(p.coldRuns), "-log", b.logPath(name + ".log"),
			"-pidfile", b.logPath(name + ".pid"), "-out", b.logPath(name + ".tsv"), "--"}
		argv = append(argv, append(pin(c.serverCPU), b.bin["servery"], "-workers", strconv.Itoa(w), "-dir", b.site, "-addr", fmt.Sprintf("127.0.0.1:%d", port))...)
		if err := b.runTool(name, time.Duration(p.coldRuns*25+30)*time.Second, argv...); err != nil {
			b.rep.problem("heal cold start -workers %d: the run failed: %s", w, tail(b.logPath(name+".tool.out"), 3))
		}
	}
	port++
	b.box.waitQuiet()
	say("heal, recycle: -workers %d -max-requests %d, %d clients, %v", p.workers, p.maxRequests, c.conns, p.recycleDur)
	argv = append(pin(c.wrkCPU), tool, "load", "-url", fmt.Sprintf("http://127.0.0.1:%d/1k.html", port), "-expect", page,
		"-c", strconv.Itoa(c.conns), "-warmup", c.warmup.String(), "-dur", p.recycleDur.String(), "-bucket", fmt.Sprintf("%dms", p.bucketMS),
		"-log", b.logPath("recycle.log"), "-pidfile", b.logPath("recycle.pid"), "-csv", b.logPath("recycle.csv"), "-summary", b.logPath("recycle.sum"),
		"-heal", b.logPath("recycle-heal.tsv"), "--")
	argv = append(argv, servery(b.site, port, "-max-requests", strconv.Itoa(p.maxRequests))...)
	if err := b.runTool("recycle", p.recycleDur+c.warmup+time.Minute, argv...); err != nil {
		b.rep.problem("heal recycle: the run failed: %s", tail(b.logPath("recycle.tool.out"), 3))
	}
	port++
	b.box.waitQuiet()
	say("heal, crash loop: -workers %d, default -max-restarts; after %v, -dir renamed and slot 1's worker killed", p.workers, p.crashSettle)
	argv = []string{tool, "crashloop", "-vanish", crashSite, "-slot", "1", "-settle", p.crashSettle.String(), "-timeout", "60s",
		"-log", b.logPath("crash.log"), "-pidfile", b.logPath("crash.pid"), "-out", b.logPath("crash.tsv"), "-summary", b.logPath("crash.sum"), "--"}
	argv = append(argv, servery(crashSite, port)...)
	if err := b.runTool("crash", p.crashSettle+90*time.Second, argv...); err != nil {
		b.rep.problem("heal crash loop: the run failed: %s", tail(b.logPath("crash.tool.out"), 3))
	}
	b.rep.mdf("## 7. Healing: a worker killed, workers recycled, a crash loop")
	b.rep.md("")
	pinned := "Unpinned (one CPU)."
	if b.box.ncpu >= 2 {
		pinned = fmt.Sprintf("servery and its workers pinned to CPU %s, the client to CPU %s.", c.serverCPU, c.wrkCPU)
	}
	b.rep.mdf("Load in the kill and recycle runs: bench/reloadtool's Go client, %d goroutines sharing one keep-alive Transport, each GETting `/1k.html` in a loop; every response is checked byte for byte and counted in the %d ms bucket of its completion time; every error is classified: refused (ECONNREFUSED), closed before any response byte on a reused connection (the keep-alive race's symptom), truncated (body cut short), other. %s", c.conns, p.bucketMS, pinned)
	b.rep.md("")
	b.healKills(p, offs, slots)
	b.healRecycle(p)
	b.healCrash(p)
	b.healPlot(p)
}

// buildReloadtool builds bench/reloadtool into the run's bin directory once.
func (b *bench) buildReloadtool() string {
	tool := filepath.Join(b.tmp, "bin", "reloadtool")
	if _, err := os.Stat(tool); err == nil {
		return tool
	}
	if err := run1(b.logPath("build.log"), b.repo, "go", "build", "-o", tool, "./bench/reloadtool"); err != nil {
		die("go build of bench/reloadtool: %v: %s", err, tail(b.logPath("build.log"), 20))
	}
	return tool
}

// runSummary reads reloadtool's summary of run; without one it says so in
// the report and as a problem named what.
func (b *bench) runSummary(run, what string) (map[string]string, bool) {
	s := summary(b.logPath(run + ".sum"))
	if len(s) == 0 {
		b.rep.md("No results: the run failed.", "")
		b.rep.problem("%s: no summary", what)
	}
	return s, len(s) > 0
}

// numOf is a numeric summary key, 0 when missing.
func numOf(s map[string]string, k string) int {
	v, _, _ := strings.Cut(s[k], "\n")
	return atoi(v)
}

// pctOf is x and its share of m.
func pctOf(x, m float64) string {
	if math.IsNaN(x) || m == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%g (%.0f %%)", x, 100*x/m)
}

// healKills writes 7.1: the kill run and the cold starts beside it.
func (b *bench) healKills(p healPlan, offs, slots []string) {
	c := b.cfg
	b.rep.mdf("### 7.1 A worker killed under load: -workers %d -max-restarts %d, %d SIGKILLs %v apart", p.workers, p.killRestarts, p.kills, p.killGap)
	b.rep.md("", "Requests are non-replayable (an empty body that is not `http.NoBody`, no `GetBody`; nothing more on the wire), so the Transport retries nothing: every request a kill breaks is a failed request here, what a POST or a client without retries sees. (Go's Transport would resend a GET that failed this way on a reused connection.)", "")
	rot := ""
	if !p.rotationSteady() {
		rot = fmt.Sprintf("; **but with %d slots and kills %v apart, a slot is killed again sooner than that, so later kills back off**", p.workers, p.killGap)
	}
	b.rep.mdf("Kills at %s into the measurement, slots %s in turn; servery served %v idle and %v under load first, so each slot's worker had served at least %v when killed (servery counts a worker lost within 10 s of its ready as a failure and backs off)%s. Just before each SIGKILL the helper lists the killed worker's established client connections (its socket fds against `/proc/PID/net/tcp`); a failed request is the killed worker's when its connection was in that list, else it is lost elsewhere.",
		strings.Join(offs, " "), strings.Join(slots, ","), p.settle(c.warmup), c.warmup, p.steady, rot)
	b.rep.md("")
	s, ok := b.runSummary("kill", "heal kill")
	if !ok {
		return
	}
	kills := readTSV(b.logPath("kill-kills.tsv"))
	col := func(i int) []float64 { return tsvColumn(kills, i-1) } // kill-kills.tsv's columns, from 1
	// The lowest bucket within 1 s after a kill, and elsewhere.
	var killAt []float64
	for _, v := range col(2) {
		killAt = append(killAt, v*1000)
	}
	near, away := math.NaN(), math.NaN()
	for _, row := range readCSV(b.logPath("kill.csv")) {
		t, r := row[0], row[1]
		isNear := false
		for _, k := range killAt {
			if t+float64(p.bucketMS) > k && t < k+1000 {
				isNear = true
			}
		}
		if isNear && (math.IsNaN(near) || r < near) {
			near = r
		} else if !isNear && (math.IsNaN(away) || r < away) {
			away = r
		}
	}
	med, _ := strconv.ParseFloat(s["rps_median_bucket"], 64)
	// kinds lists a summary's error kinds, "N race" read out.
	kinds := func(k string) string {
		var out []string
		for line := range strings.Lines(strings.TrimSpace(s[k])) {
			line = strings.TrimSpace(line)
			if n, ok := strings.CutSuffix(line, " race"); ok {
				line = n + " closed before any response byte"
			}
			out = append(out, line)
		}
		return strings.Join(out, "; ")
	}
	lostKinds, elseKinds := kinds("lost_killed_kind"), kinds("lost_elsewhere_kind")
	sum := func(xs []float64) int {
		t := 0.0
		for _, x := range xs {
			t += x
		}
		return int(t)
	}
	paren := func(x string) string {
		if x == "" {
			return ""
		}
		return " (" + x + ")"
	}
	b.rep.md("| requests | mean req/s | median bucket req/s | lowest bucket within 1 s after a kill (% of median) | lowest bucket elsewhere (% of median) | refused | lost on the killed worker | lost elsewhere | retried by the Transport (killed worker / elsewhere) | truncated / other (all connections) | loss to replacement ready (after=), median (min-max) ms | kill to `worker respawned` stamp, median (min-max) ms | other work on box |",
		"|---:|---:|---:|---|---|---:|---|---:|---|---|---|---|---:|")
	b.rep.mdf("| %d | %s | %s | %s | %s | %d | %d, from the %d connections the killed workers held, %d of them carrying a request%s | %d%s | %d / %d | %d / %d | %s (%s-%s) | %s (%s-%s) | %s %% |",
		numOf(s, "requests"), s["rps_mean"], s["rps_median_bucket"], pctOf(near, med), pctOf(away, med), numOf(s, "refused"),
		numOf(s, "lost_killed"), sum(col(5)), sum(col(19)), paren(lostKinds), numOf(s, "lost_elsewhere"), paren(elseKinds),
		numOf(s, "retried_killed"), numOf(s, "retried_elsewhere"), numOf(s, "truncated"), numOf(s, "other"),
		s["after_ms_median"], s["after_ms_min"], s["after_ms_max"],
		num("%g", median(col(13))), num("%g", minOf(col(13))), num("%g", maxOf(col(13))), s["other_pct"])
	b.rep.md("")
	if n := numOf(s, "refused"); n != 0 {
		b.rep.problem("heal kill: %d requests refused", n)
	}
	if n := numOf(s, "lost_elsewhere"); n != 0 {
		b.rep.problem("heal kill: %d requests lost on connections of workers that were not killed: %s", n, elseKinds)
	}
	if n := numOf(s, "retried_elsewhere"); n != 0 {
		b.rep.problem("heal kill: %d requests retried after failing on connections of workers that were not killed", n)
	}
	if n := numOf(s, "kills"); n != p.kills {
		b.rep.problem("heal kill: %d of %d kills made", n, p.kills)
	}
	if n := numOf(s, "kills_failed"); n != 0 {
		var why []string
		for _, r := range kills {
			if len(r) > 16 && r[16] != "" {
				why = append(why, r[16])
			}
		}
		b.rep.problem("heal kill: %d kills failed: %s", n, strings.Join(why[:min(3, len(why))], "; "))
	}
	if n := numOf(s, "kills_missing_lines"); n != 0 {
		b.rep.problem("heal kill: %d kills lack an expected line (worker lost, worker respawning, worker started, worker respawned): see the table", n)
	}
	if s["servery_exit"] != "ok" {
		b.rep.problem("heal kill: servery's exit: %s", s["servery_exit"])
	}
	b.rep.md("Per kill. conns: the killed worker's established client connections, and how many of them carried a request of the client's just before the kill (the client's pool also holds idle connections; a request begun between that look and the kill is lost too); after: the `worker respawned` line's after=, servery's clock from the loss (as its lifecycle loop saw it) to the replacement's ready; kill to lost / respawned: from the helper's clock just before kill() to the `time=` stamps of the `worker lost` and `worker respawned` lines (the same wall clock; the stamps have 1 ms resolution), so they include how long servery took to notice the death:",
		"", "| kill | at (s) | slot | pid | conns (carrying a request) | lost | retried | `worker respawning` delay, failures | after (ms) | kill to lost / respawned (ms) | new pid | lowest bucket within 1 s (% of median) |",
		"|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---|")
	backed := 0
	for _, r := range kills {
		f := func(i int) string {
			if i-1 < len(r) {
				return r[i-1]
			}
			return ""
		}
		d := f(9)
		if d != "NaN" {
			if whole, frac, ok := strings.Cut(d, "."); ok {
				d = whole + strings.TrimLeft(frac, "0123456789")
			}
		}
		b.rep.mdf("| %s | %s | %s | %s | %s (%s) | %s | %s | %s, %s | %s | %s / %s | %s | %s (%s %%) |", f(1), f(2), f(3), f(4), f(5), f(19), f(6), f(7), d, f(10), f(12), f(18), f(13), f(14), f(15), f(16))
		if f(10) != "0" && f(10) != "NaN" {
			backed++
		}
	}
	b.rep.md("")
	if backed > 0 {
		if p.rotationSteady() {
			b.rep.problem("heal kill: %d of %d respawns waited a backoff (failures > 0) although every killed worker had served %v or more: servery counted it as a failure", backed, p.kills, p.steady)
		} else {
			b.rep.problem("heal kill (note): %d of %d respawns waited a backoff: the rotation kills a slot again within 10 s of its replacement's ready", backed, p.kills)
		}
	}
	b.rep.mdf("**Beside it, a cold start** (%d runs per row, idle, servery pinned to CPU %s): ready_in is the `msg=serving` line's own (servery's clock from its process start); exec is the helper's clock from just before exec to reading that line.", p.coldRuns, c.serverCPU)
	b.rep.md("", "| servery | ready_in, median (min-max) ms | exec to `serving` line, median (min-max) ms | stop after SIGTERM, median ms |", "|---|---|---|---:|")
	for _, w := range []int{1, 2} {
		rows := readTSV(b.logPath(fmt.Sprintf("cold-w%d.tsv", w)))
		label := fmt.Sprintf("-workers %d", w)
		if w == 1 {
			label += " (direct mode: no worker process)"
		}
		if len(rows) == 0 {
			b.rep.mdf("| %s | n/a | n/a | n/a |", label)
			b.rep.problem("heal cold start -workers %d: no results", w)
			continue
		}
		if len(rows) != p.coldRuns {
			b.rep.problem("heal cold start -workers %d: %d of %d runs", w, len(rows), p.coldRuns)
		}
		for _, r := range rows {
			if len(r) > 5 && r[5] != "ok" {
				b.rep.problem("heal cold start -workers %d: a run did not stop cleanly: %s", w, r[5])
			}
		}
		rd, ex := tsvColumn(rows, 1), tsvColumn(rows, 2)
		b.rep.mdf("| %s | %s (%s-%s) | %s (%s-%s) | %s |", label, num("%g", median(rd)), num("%g", minOf(rd)), num("%g", maxOf(rd)),
			num("%g", median(ex)), num("%g", minOf(ex)), num("%g", maxOf(ex)), num("%g", median(tsvColumn(rows, 4))))
	}
	b.rep.mdf("| respawn of one of %d workers under load (7.1's after=) | %s (%s-%s) | | |", p.workers, s["after_ms_median"], s["after_ms_min"], s["after_ms_max"])
	b.rep.md("", fmt.Sprintf("![req/s per %d ms bucket across the kills, and across recycling](heal-rps.svg)", p.bucketMS), "")
}

// readCSV reads a CSV with a header line into rows of numbers.
func readCSV(path string) [][]float64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var rows [][]float64
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if i == 0 {
			continue
		}
		var row []float64
		for _, f := range strings.Split(line, ",") {
			v, _ := strconv.ParseFloat(f, 64)
			row = append(row, v)
		}
		if len(row) >= 2 {
			rows = append(rows, row)
		}
	}
	return rows
}

// healRecycle writes 7.2: the recycling run.
func (b *bench) healRecycle(p healPlan) {
	c := b.cfg
	b.rep.mdf("### 7.2 Recycling under load: -workers %d -max-requests %d, %v measured after %v warmup", p.workers, p.maxRequests, p.recycleDur, c.warmup)
	b.rep.md("", "Ordinary GETs. A worker that has answered its -max-requests (plus up to 10 % jitter) asks to be recycled; servery starts its replacement first, then drains it; one recycle at a time.", "")
	s, ok := b.runSummary("recycle", "heal recycle")
	if !ok {
		return
	}
	heal := readTSV(b.logPath("recycle-heal.tsv"))
	inWindow := 0
	for _, r := range heal {
		if len(r) > 2 && r[2] == "worker recycled" {
			if t, err := strconv.ParseFloat(r[0], 64); err == nil && t >= 0 && t < float64(p.recycleDur.Milliseconds()) {
				inWindow++
			}
		}
	}
	race, raceF := numOf(s, "ka_race"), numOf(s, "ka_race_failed")
	b.rep.md("| requests | mean req/s | median bucket req/s | lowest bucket req/s (% of median) | buckets < 50 % of median / at 0 | recycles done (during the measurement) | recycles begun / failed | refused | truncated | keep-alive-race closures (retried / failed) | other errors | new connections | other work on box |",
		"|---:|---:|---:|---|---|---|---|---:|---:|---|---:|---:|---:|")
	b.rep.mdf("| %d | %s | %s | %s | %s / %s of %s | %d (%d) | %d / %d | %d | %d | %d / %d | %d | %d | %s %% |", numOf(s, "requests"), s["rps_mean"], s["rps_median_bucket"], s["min_rps"],
		s["low_buckets"], s["zero_buckets"], s["buckets"], numOf(s, "lines_worker_recycled"), inWindow, numOf(s, "lines_worker_recycling"), numOf(s, "lines_worker_recycle_failed"),
		numOf(s, "refused"), numOf(s, "truncated"), race-raceF, raceF, numOf(s, "other"), numOf(s, "new_conns"), s["other_pct"])
	b.rep.md("")
	checks := []struct {
		bad  bool
		what string
	}{
		{numOf(s, "refused") != 0, fmt.Sprintf("%d requests refused", numOf(s, "refused"))},
		{numOf(s, "truncated") != 0, fmt.Sprintf("%d truncated responses", numOf(s, "truncated"))},
		{race != 0, fmt.Sprintf("%d keep-alive-race closures (%d failed): %s", race, raceF, firstLines(s["race_kind"], 3))},
		{numOf(s, "other") != 0, fmt.Sprintf("%d other errors: %s", numOf(s, "other"), firstLines(s["other_kind"], 3))},
		{numOf(s, "lines_worker_recycled") == 0, "no `worker recycled` line"},
		{numOf(s, "lines_worker_recycle_failed") != 0, fmt.Sprintf("%d `worker recycle failed` lines", numOf(s, "lines_worker_recycle_failed"))},
		{numOf(s, "lines_worker_lost") != 0, fmt.Sprintf("%d `worker lost` lines", numOf(s, "lines_worker_lost"))},
		{s["servery_exit"] != "ok", "servery's exit: " + s["servery_exit"]},
	}
	for _, ch := range checks {
		if ch.bad {
			b.rep.problem("heal recycle: %s", ch.what)
		}
	}
	// A recycle's duration, recycling to recycled of the same slot, by
	// servery's time= stamps (the helper, busy being the load, reads lines
	// late and in batches).
	began := map[string]time.Time{}
	var took []float64
	for _, r := range heal {
		if len(r) < 4 {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, r[1])
		if err != nil {
			continue
		}
		switch r[2] {
		case "worker recycling":
			began[r[3]] = t
		case "worker recycled":
			if t0, ok := began[r[3]]; ok {
				took = append(took, float64(t.Sub(t0).Milliseconds()))
				delete(began, r[3])
			}
		}
	}
	if len(took) > 0 {
		b.rep.mdf("- A recycle (`worker recycling` to `worker recycled`, the replacement started and ready, the old worker told to drain) took %g ms median (%g-%g), by servery's log stamps (1 ms resolution); %d requests to be recycled were queued in all.",
			median(took), minOf(took), maxOf(took), numOf(s, "lines_worker_recycle_queued"))
		b.rep.md("")
	}
}

// durMS reads a Go duration as logged ("109.838971ms", "0s") in ms.
func durMS(s string) float64 {
	d, err := time.ParseDuration(s)
	if err != nil {
		return math.NaN()
	}
	return float64(d) / 1e6
}

// healCrash writes 7.3: the crash loop, its lines and its backoffs.
func (b *bench) healCrash(p healPlan) {
	b.rep.mdf("### 7.3 Crash loop: -workers %d, default -max-restarts 5 / -restart-window 1m", p.workers)
	b.rep.md("")
	first := "The worker had served more than 10 s, so the first respawn is immediate and the backoff begins with the first failed start."
	if p.crashSettle == 0 {
		first = "The worker had served less than 10 s, so servery counts its loss as a failure and the first respawn already backs off (-quick)."
	}
	b.rep.mdf("servery served %v; then the helper renamed its -dir, so every later worker start fails (`app start: open root`), and SIGKILLed slot 1's worker. %s", p.crashSettle, first)
	b.rep.md("")
	s, ok := b.runSummary("crash", "heal crash loop")
	if !ok {
		return
	}
	rows := readTSV(b.logPath("crash.tsv"))
	b.rep.md("Lines (t: the helper's clock from the kill; log: servery's time= stamps from the `worker lost` line):", "",
		"| t (ms) | log (ms) | msg | worker | pid | delay | failures | detail |", "|---:|---:|---|---:|---:|---|---:|---|")
	var fails []string
	for _, r := range rows {
		for len(r) < 8 {
			r = append(r, "")
		}
		d := r[7]
		if len(d) > 90 {
			d = d[:90] + "..."
		}
		b.rep.mdf("| %s | %s | %s | %s | %s | %s | %s | %s |", r[0], r[1], r[2], r[3], r[4], r[5], r[6], strings.ReplaceAll(d, "|", `\|`))
		if r[2] == "worker respawning" && r[3] == "1" {
			fails = append(fails, r[6])
		}
	}
	split := func(k string) []string {
		if s[k] == "" {
			return nil
		}
		return strings.Split(s[k], ",")
	}
	delays, gaps, gapsLog := split("delays"), split("gaps_ms"), split("gaps_log_ms")
	b.rep.md("", "Backoffs: the `worker respawning` line's delay, and the time actually taken from the failure (the loss, then each `worker respawn failed`) to the next `worker started` of the slot; nominal: 100 ms doubling per consecutive failure, times 0.8-1.2.", "",
		"| respawn | failures | logged delay (ms) | nominal (ms) | taken, helper's clock (ms) | taken, log (ms) |", "|---:|---:|---:|---|---:|---:|")
	at := func(xs []string, i int) string {
		if i < len(xs) {
			return xs[i]
		}
		return "n/a"
	}
	for i, d := range delays {
		f := at(fails, i)
		nominal := "0"
		if n := atoi(f); n > 0 {
			base := 100 * math.Pow(2, float64(n-1))
			nominal = fmt.Sprintf("%d-%d", int(0.8*base), int(1.2*base))
		}
		b.rep.mdf("| %d | %s | %s | %s | %s | %s |", i+1, f, num("%.1f", durMS(d)), nominal, at(gaps, i), at(gapsLog, i))
		if i < len(gapsLog) {
			g, _ := strconv.ParseFloat(gapsLog[i], 64)
			switch want := durMS(d); {
			case g+1 < want:
				b.rep.problem("heal crash loop: respawn %d started %s ms after the failure (log), before its logged delay %s", i+1, gapsLog[i], d)
			case g > want+250:
				b.rep.problem("heal crash loop (note): respawn %d started %s ms after the failure (log), its logged delay was %s: servery was slow to start it (busy box?)", i+1, gapsLog[i], d)
			}
		}
	}
	b.rep.md("")
	b.rep.mdf("Kill to `giving up` line: %s ms; kill to servery's exit (its /proc entry a zombie, the helper polling every 1 ms): %s ms; exit status %s; `giving up` counted lost=%s.",
		s["kill_to_giving_up_ms"], s["kill_to_exit_ms"], s["exit"], s["giving_up_lost"])
	b.rep.md("")
	checks := []struct {
		bad  bool
		what string
	}{
		{s["kill"] != "ok", "the kill failed: " + s["kill"]},
		{s["exit"] != "1", "servery's exit status was " + s["exit"] + ", not 1"},
		{len(delays) != 5, fmt.Sprintf("%d `worker respawning` lines for the slot, not 5", len(delays))},
		{numOf(s, "lines_worker_respawn_failed") != 5, fmt.Sprintf("%d `worker respawn failed` lines, not 5", numOf(s, "lines_worker_respawn_failed"))},
		{numOf(s, "lines_worker_lost") != 1, fmt.Sprintf("%d `worker lost` lines, not 1", numOf(s, "lines_worker_lost"))},
		{numOf(s, "lines_giving_up") != 1, fmt.Sprintf("%d `giving up` lines, not 1", numOf(s, "lines_giving_up"))},
		{numOf(s, "lines_worker_respawned") != 0, "a respawn succeeded although the -dir was gone"},
		{len(gaps) != len(delays), fmt.Sprintf("%d `worker started` lines after a failure, for %d respawns", len(gaps), len(delays))},
	}
	for _, ch := range checks {
		if ch.bad {
			b.rep.problem("heal crash loop: %s", ch.what)
		}
	}
}

// healPlot writes the kill and recycle runs' buckets, with an events
// column (the kills, or the recycles completed, per bucket), to
// OUT/heal-rps.csv and one CSV per run, and draws them in two panels as
// OUT/heal-rps.svg.
func (b *bench) healPlot(p healPlan) {
	out := b.cfg.out
	must(os.MkdirAll(out, 0o755))
	bucket := float64(p.bucketMS)
	events := map[string][]float64{}
	for _, v := range tsvColumn(readTSV(b.logPath("kill-kills.tsv")), 1) {
		events["kill"] = append(events["kill"], v*1000)
	}
	for _, r := range readTSV(b.logPath("recycle-heal.tsv")) {
		if t, err := strconv.ParseFloat(r[0], 64); err == nil && len(r) > 2 && r[2] == "worker recycled" && t >= 0 {
			events["recycle"] = append(events["recycle"], t)
		}
	}
	var all strings.Builder
	all.WriteString("run,workers,t_ms,rps,errors,ka_race,events\n")
	files := map[string]string{}
	for _, run := range []string{"kill", "recycle"} {
		data, err := os.ReadFile(b.logPath(run + ".csv"))
		if err != nil {
			continue
		}
		per := map[int]int{}
		for _, e := range events[run] {
			per[int(e/bucket)]++
		}
		var sb strings.Builder
		for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if i == 0 {
				sb.WriteString(line + ",events\n")
				continue
			}
			t, _ := strconv.ParseFloat(strings.Split(line, ",")[0], 64)
			fmt.Fprintf(&sb, "%s,%d\n", line, per[int(t/bucket)])
			fmt.Fprintf(&all, "%s,%d,%s,%d\n", run, p.workers, line, per[int(t/bucket)])
		}
		files[run] = filepath.Join(out, "heal-rps-"+run+".csv")
		must(os.WriteFile(files[run], []byte(sb.String()), 0o644))
	}
	must(os.WriteFile(filepath.Join(out, "heal-rps.csv"), []byte(all.String()), 0o644))
	rev, date := b.rev, time.Now().UTC().Format("2006-01-02")
	var gp strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&gp, format+"\n", args...) }
	w("set terminal svg size 960,900 font 'sans,12' noenhanced")
	w("set output '%s'", filepath.Join(out, "heal-rps.svg"))
	w("set datafile separator ','")
	w("set multiplot layout 2,1 title \"servery healing under keep-alive load: req/s per %d ms bucket, -workers %d, %d clients\\ncommit %s, %s\"", p.bucketMS, p.workers, b.cfg.conns, rev, date)
	w("set grid ytics lc rgb '#dddddd'\nset key outside bottom center horizontal font ',10'\nset ylabel 'requests/s'\nset y2tics\nset ytics nomirror\nset y2range [0:*]\nset yrange [0:*]")
	w("set xlabel 'time since the start of measurement (s)'")
	w("set title '1. SIGKILL of one worker (%d, dashed red), slots in turn; failed requests per bucket on the right axis'", p.kills)
	w("set y2label 'failed requests per bucket'")
	w("set xrange [0:%g]", p.killDur().Seconds())
	for _, t := range events["kill"] {
		w("set arrow from %g/1000.0, graph 0 to %g/1000.0, graph 1 nohead dt 2 lw 1.5 lc rgb '#d62728' back", t, t)
	}
	if f := files["kill"]; f != "" {
		w("plot '%s' skip 1 using ($1/1000):2 with steps lw 1.5 lc rgb '#1f77b4' title 'req/s, non-replayable GET', \\", f)
		w("  '%s' skip 1 using ($1/1000+%d/2000.0):($3>0?$3:1/0) axes x1y2 with points pt 7 ps 0.6 lc rgb '#d62728' title 'failed requests (right axis)'", f, p.bucketMS)
	} else {
		w("plot 0 with lines lc rgb '#ffffff' title 'no data'")
	}
	w("unset arrow")
	w("set title '2. -max-requests %d: worker recycles completed per bucket on the right axis'", p.maxRequests)
	w("set y2label 'recycles / errors per bucket'")
	w("set xrange [0:%g]", p.recycleDur.Seconds())
	w("set label 1 'made by: %s (commit %s, %s)' at screen 0.01, screen 0.012 font ',9' tc rgb '#555555'", b.command(), rev, date)
	if f := files["recycle"]; f != "" {
		w("plot '%s' skip 1 using ($1/1000):2 with steps lw 1.5 lc rgb '#2ca02c' title 'req/s, GET', \\", f)
		w("  '%s' skip 1 using ($1/1000+%d/2000.0):($5>0?$5:1/0) axes x1y2 with impulses lw 2 lc rgb '#9467bd' title 'recycles completed (right axis)', \\", f, p.bucketMS)
		w("  '%s' skip 1 using ($1/1000+%d/2000.0):($3>0?$3:1/0) axes x1y2 with points pt 7 ps 0.6 lc rgb '#d62728' title 'errors (right axis)'", f, p.bucketMS)
	} else {
		w("plot 0 with lines lc rgb '#ffffff' title 'no data'")
	}
	w("unset multiplot")
	script := b.logPath("heal-plot.gp")
	must(os.WriteFile(script, []byte(gp.String()), 0o644))
	os.Remove(filepath.Join(out, "heal-rps.svg"))
	if err := run1(b.logPath("gnuplot.log"), "", "gnuplot", script); err != nil {
		b.rep.problem("gnuplot (heal) failed: %v: %s", err, tail(b.logPath("gnuplot.log"), 5))
	}
}
