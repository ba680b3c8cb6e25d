//go:build linux

// balance.go is section 2: how evenly four workers share the connections
// and the requests, from the counters servery logs when it stops.

package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// balance runs servery with 4 workers under three loads and reads how many
// connections and requests each worker took from its stop log.
func (b *bench) balance() {
	c := b.cfg
	b.rep.mdf("## 2. Connection balance: servery -workers 4, wrk -t1 -c%d -d%v, counters from the stop log", c.conns, c.balDur)
	b.rep.md("", "served = requests answered per worker; fair share = 25%; max/fair = the busiest worker's served count over the mean (target <= 1.5).")
	b.rep.mdf("With keep-alive the %d connections are accepted once, at the start, so the spread of those %d accepts decides the spread of requests; the Connection: close run makes every request a new accept.", c.conns, c.conns)
	b.rep.md("", "| run | worker | pid | accepted | served | share of served |", "|---|---:|---:|---:|---:|---:|")
	runs := []struct {
		id, desc, cpus, loadCPUs string
		extra                    []string
	}{
		{"ka-core0", fmt.Sprintf("keep-alive, server on CPU %s, wrk on CPU %s", c.serverCPU, c.wrkCPU), c.serverCPU, c.wrkCPU, nil},
		{"ka-free", "keep-alive, both unpinned", "", "", nil},
		{"close-free", "Connection: close, both unpinned", "", "", []string{"-H", "Connection: close"}},
	}
	var summary []string
	port := c.basePort + 20
	for _, r := range runs {
		name := "balance-" + r.id
		say("balance: %s", r.desc)
		b.box.waitQuiet()
		s := b.startServer(name, "servery", 4, r.cpus, port)
		res := b.wrk(b.logPath("wrk-"+name+".txt"), r.loadCPUs, c.balDur, fmt.Sprintf("http://127.0.0.1:%d/1k.html", port), r.extra...)
		b.stop(s)
		b.logIssues(name, s.log, nil)
		if res.errors != 0 {
			b.rep.problem("%s: wrk reported %d errors", name, res.errors)
		}
		cs := workerCounters(s.log)
		if len(cs) == 0 {
			b.rep.problem("%s: no 'worker counters' lines in the servery log", name)
			b.rep.mdf("| %s | - | - | - | - | no counters logged |", r.desc)
			summary = append(summary, fmt.Sprintf("- %s: no counters: **FAIL**", r.desc))
			continue
		}
		var total float64
		for _, w := range cs {
			v, _ := strconv.ParseFloat(w.served, 64)
			total += v
		}
		var idle []string
		for _, w := range cs {
			share := "n/a"
			if v, err := strconv.ParseFloat(w.served, 64); err == nil && total > 0 {
				share = fmt.Sprintf("%.1f%%", 100*v/total)
			}
			if w.served == "0" {
				idle = append(idle, w.worker)
			}
			b.rep.mdf("| %s | %s | %s | %s | %s | %s |", r.desc, w.worker, w.pid, w.accepted, w.served, share)
		}
		served := column(cs, func(c counters) string { return c.served })
		mf, mfa := maxOverFair(served), maxOverFair(column(cs, func(c counters) string { return c.accepted }))
		summary = append(summary, fmt.Sprintf("- %s: %s req/s, %.0f served; max/fair served %s (accepted %s), target <= 1.5: %s",
			r.desc, num("%.0f", res.rps), total, num("%.2f", mf), num("%.2f", mfa), verdict(mf, "<=", 1.5, none)))
		if !(mf <= 1.5) {
			b.rep.problem("balance (%s): served max/fair %s > 1.5; accepted per worker %s, served %s", r.desc, num("%.2f", mf),
				strings.Join(column(cs, func(c counters) string { return c.accepted }), "/"), strings.Join(served, "/"))
		}
		if len(idle) > 0 {
			b.rep.problem("balance (%s): worker(s) %s served nothing during %v of load", r.desc, strings.Join(idle, ","), c.balDur)
		}
	}
	b.rep.md("")
	b.rep.md(summary...)
	b.rep.md("")
	if len(b.tpBalance) == 0 {
		return
	}
	b.rep.md("The same counters from the throughput runs (warmup + measured run; per trial, per worker):", "",
		"| throughput row | trial | accepted per worker | served per worker | served max/fair |", "|---|---:|---|---|---:|")
	desc := map[string]string{"s2": "servery 2 workers, core 0", "s4": "servery 4 workers, core 0", "s2p": "servery 2 workers, cores 0-1",
		"a2": "servery app 2 workers, core 0", "a4": "servery app 4 workers, core 0"}
	for _, id := range []string{"s2", "s4", "s2p", "a2", "a4"} {
		var mfs []float64
		var served []string
		for _, t := range b.tpBalance {
			if t.id == id {
				b.rep.mdf("| %s | %d | %s | %s | %s |", desc[id], t.trial, t.accepted, t.served, num("%.2f", t.maxFair))
				mfs = append(mfs, t.maxFair)
				served = append(served, t.served)
			}
		}
		if v := median(mfs); len(mfs) > 0 && (math.IsNaN(v) || v > 1.5) {
			b.rep.problem("throughput row %s: served max/fair median %s over %d trial(s) (served per worker, per trial: %s)",
				desc[id], num("%.2f", v), len(mfs), strings.Join(served, "; "))
		}
	}
	b.rep.md("")
}
