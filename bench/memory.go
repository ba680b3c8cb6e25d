//go:build linux

// memory.go is section 4: each server's memory (PSS and RSS of every
// process) when ready and after a short load.

package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// procMem is one process's memory in KiB, from /proc/PID/smaps_rollup.
type procMem struct {
	pid      int
	child    bool
	rss, pss float64
}

func rollup(pid int, child bool) procMem {
	m := procMem{pid: pid, child: child}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "Rss:" || f[0] == "Pss:") {
			v, _ := strconv.ParseFloat(f[1], 64)
			if f[0] == "Rss:" {
				m.rss = v
			} else {
				m.pss = v
			}
		}
	}
	return m
}

// snapshot is the memory of a server's parent and of each child.
func snapshot(pid int) []procMem {
	out := []procMem{rollup(pid, false)}
	var children []int
	for _, p := range allPIDs() {
		if readStat(p).ppid == pid {
			children = append(children, p)
		}
	}
	slices.Sort(children)
	for _, c := range children {
		out = append(out, rollup(c, true))
	}
	return out
}

func total(ms []procMem, f func(procMem) float64) float64 {
	t := 0.0
	for _, m := range ms {
		t += f(m)
	}
	return t
}

// memory snapshots every server's processes when ready and after a
// short load.
func (b *bench) memory() {
	c := b.cfg
	type cfg struct {
		kind, label string
		w           int
	}
	configs := []cfg{{"servery", "servery -workers 1", 1}, {"servery", "servery -workers 2", 2}, {"servery", "servery -workers 4", 4},
		{"servery", "servery -workers 8", 8}, {"nethttp-default", "net/http FileServer", 1}, {"nginx", "nginx worker_processes 1", 1}}
	phases := []string{"ready", "loaded"}
	snaps := map[string][]procMem{}
	port := c.basePort + 40
	var tsv strings.Builder
	for _, sc := range configs {
		name := fmt.Sprintf("mem-%s-%d", sc.kind, sc.w)
		say("memory: %s w=%d", sc.kind, sc.w)
		b.box.waitQuiet()
		s := b.startServer(name, sc.kind, sc.w, "", port)
		time.Sleep(300 * time.Millisecond)
		snaps[name+".ready"] = snapshot(s.pid)
		b.wrk(b.logPath("wrk-"+name+".txt"), "", c.memLoad, fmt.Sprintf("http://127.0.0.1:%d/1k.html", port))
		time.Sleep(200 * time.Millisecond)
		snaps[name+".loaded"] = snapshot(s.pid)
		b.stop(s)
		if sc.kind == "servery" {
			b.logIssues(name, s.log, nil)
		}
		for _, ph := range phases {
			for _, m := range snaps[name+"."+ph] {
				fmt.Fprintf(&tsv, "%s\t%s\t%v\t%d\t%.0f\t%.0f\n", name, ph, m.child, m.pid, m.rss, m.pss)
			}
		}
	}
	must(os.WriteFile(b.logPath("mem.tsv"), []byte(tsv.String()), 0o644))
	mib := func(kib float64) string { return fmt.Sprintf("%.1f", kib/1024) }
	b.rep.mdf("## 4. Memory (smaps_rollup; unpinned; after ready, and after %v of wrk -c%d)", c.memLoad, c.conns)
	b.rep.md("", "PSS splits shared pages (the binary's text, shared libraries) among the processes that map them, so the PSS total is the real footprint; RSS counts shared pages in every process.",
		"", "| server | phase | parent PSS / RSS (MiB) | each child PSS / RSS (MiB) | total PSS (MiB) | total RSS (MiB) |", "|---|---|---:|---|---:|---:|")
	for _, sc := range configs {
		name := fmt.Sprintf("mem-%s-%d", sc.kind, sc.w)
		for _, ph := range phases {
			ms := snaps[name+"."+ph]
			var kids []string
			for _, m := range ms[1:] {
				kids = append(kids, mib(m.pss)+" / "+mib(m.rss))
			}
			children := strings.Join(kids, ", ")
			if children == "" {
				children = "-"
			}
			b.rep.mdf("| %s | %s | %s / %s | %s | %s | %s |", sc.label, ph, mib(ms[0].pss), mib(ms[0].rss), children,
				mib(total(ms, func(m procMem) float64 { return m.pss })), mib(total(ms, func(m procMem) float64 { return m.rss })))
		}
	}
	b.rep.md("")
	pss := func(w int, ph string) float64 {
		return total(snaps[fmt.Sprintf("mem-servery-%d.%s", w, ph)], func(m procMem) float64 { return m.pss })
	}
	for _, ph := range phases {
		d48, d24 := (pss(8, ph)-pss(4, ph))/4/1024, (pss(4, ph)-pss(2, ph))/2/1024
		b.rep.mdf("- PSS per added worker (%s): 4->8 workers %.2f MiB, 2->4 workers %.2f MiB; target <= 6 MiB: %s (4->8), %s (2->4)",
			ph, d48, d24, verdict(d48, "<=", 6, none), verdict(d24, "<=", 6, none))
	}
	largest := func(ph string) float64 {
		m := math.NaN()
		for _, sc := range configs[:4] {
			for _, p := range snaps[fmt.Sprintf("mem-servery-%d.%s", sc.w, ph)] {
				if p.child && (math.IsNaN(m) || p.pss > m) {
					m = p.pss
				}
			}
		}
		return m
	}
	b.rep.mdf("- Largest single worker PSS: %s MiB when ready, %s MiB after load. The loaded deltas depend on how many workers the load reached (see section 2: a worker that got no connection stays at its idle size), so the ready deltas are the stable measure of a worker's fixed cost.",
		num("%.1f", largest("ready")/1024), num("%.1f", largest("loaded")/1024))
	b.rep.md("")
}
