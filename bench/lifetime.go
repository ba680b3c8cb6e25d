//go:build linux

// lifetime.go is section 8: how many workers servery replaces a second,
// and what its parent holds after 100,000 replacements. servery -workers
// 2 -max-requests 50 under wrk recycles a worker every few milliseconds;
// after each load run of -lifetime-step the parent's resident memory,
// descriptors and threads are read from /proc, until -lifetime-replacements
// workers were replaced or -lifetime-limit has passed.

package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"
)

// lifetimeRequests is servery's -max-requests here: with wrk's
// keep-alive connections, a worker answers its 50 (plus jitter) within
// milliseconds, so replacements run back to back, one at a time.
const lifetimeRequests = 50

// lifetimePoint is the parent after some replacements.
type lifetimePoint struct {
	replaced      int
	at            time.Duration
	rssKiB        float64
	fds, threads  int
	requests      int
	errors        int
	rpsInThisStep float64
}

func (b *bench) lifetime() {
	c := b.cfg
	port := c.basePort + 300
	say("lifetime: up to %d replacements, at most %v", c.lifetimeReplacements, c.lifetimeLimit)
	b.box.waitQuiet()
	s := b.startServer("lifetime", "servery-lifetime", 2, "", port)
	url := fmt.Sprintf("http://127.0.0.1:%d/1k.html", port)
	began := time.Now()
	var points []lifetimePoint
	for step := 1; ; step++ {
		r := b.wrk(b.logPath(fmt.Sprintf("wrk-lifetime-%d.txt", step)), "", c.lifetimeStep, url)
		p := lifetimePoint{replaced: bytes.Count(mustRead(s.log), []byte(`msg="worker recycled"`)), at: time.Since(began),
			rssKiB: rollup(s.pid, false).rss, fds: countFDs(s.pid), threads: readThreads(s.pid),
			requests: int(r.rps * c.lifetimeStep.Seconds()), errors: r.errors, rpsInThisStep: r.rps}
		points = append(points, p)
		say("lifetime: %d replaced in %v; parent %.1f MiB, %d fds, %d threads", p.replaced, p.at.Round(time.Second), p.rssKiB/1024, p.fds, p.threads)
		if p.replaced >= c.lifetimeReplacements || p.at >= c.lifetimeLimit {
			break
		}
	}
	b.stop(s)
	b.logIssues("lifetime", s.log, nil)
	b.lifetimeReport(points)
}

// lifetimeReport writes section 8's table and its verdicts.
func (b *bench) lifetimeReport(points []lifetimePoint) {
	c := b.cfg
	b.rep.mdf("## 8. Lifetime: servery -workers 2 -max-requests %d under wrk -c%d, %v a step", lifetimeRequests, c.conns, c.lifetimeStep)
	b.rep.md("", "Each worker is recycled after its 50 requests (plus up to 10 % jitter): replacement started, ready, the old one drained, one at a time. The parent's resident memory, open descriptors and threads after each step, from /proc.", "",
		"| replaced | elapsed | replacements / s (this step) | req/s (this step) | errors | parent RSS (MiB) | descriptors | threads |",
		"|---:|---:|---:|---:|---:|---:|---:|---:|")
	prev := lifetimePoint{}
	errs := 0
	for _, p := range points {
		rate := float64(p.replaced-prev.replaced) / (p.at - prev.at).Seconds()
		b.rep.mdf("| %d | %v | %.0f | %.0f | %d | %.1f | %d | %d |", p.replaced, p.at.Round(time.Second), rate, p.rpsInThisStep, p.errors, p.rssKiB/1024, p.fds, p.threads)
		prev = p
		errs += p.errors
	}
	first, last := points[0], points[len(points)-1]
	b.rep.md("")
	b.rep.mdf("- %d workers replaced in %v: %.0f a second sustained; the parent's RSS %.1f MiB after the first step, %.1f MiB after the last; descriptors %d then %d; threads %d then %d.",
		last.replaced, last.at.Round(time.Second), float64(last.replaced)/last.at.Seconds(), first.rssKiB/1024, last.rssKiB/1024, first.fds, last.fds, first.threads, last.threads)
	b.rep.md("")
	switch {
	case errs != 0:
		b.rep.problem("lifetime: wrk counted %d errors across the replacements", errs)
	case last.fds > first.fds+4 || last.threads > first.threads+4:
		b.rep.problem("lifetime: the parent grew: %d descriptors and %d threads at the end, %d and %d after the first step", last.fds, last.threads, first.fds, first.threads)
	case last.replaced < c.lifetimeReplacements:
		b.rep.problem("lifetime: %d replaced within -lifetime-limit %v; asked for %d", last.replaced, c.lifetimeLimit, c.lifetimeReplacements)
	}
}

// countFDs counts pid's open descriptors.
func countFDs(pid int) int {
	entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(entries)
}

// readThreads reads pid's thread count from /proc/PID/status.
func readThreads(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	_, v, _ := strings.Cut(string(b), "\nThreads:")
	if f := strings.Fields(v); len(f) > 0 {
		return atoi(f[0])
	}
	return 0
}
