package main

// reqmetrics.go is what a worker counts of the requests it answers, for
// the parent's /metrics: how many by status class, and how long they
// took, as a histogram. The counts travel in the stats message with the
// others and are summed by the parent per slot across every worker that
// held it (metrics.go), so they never go backwards at a respawn, a
// recycle or a reload.
//
// A request whose handler hijacked its connection (a WebSocket) is left
// out: what it sent and how long it stays are the handler's business.
//
// Classes, not codes: a client cannot make the series grow (every 404
// and 418 it provokes is one 4xx), and an alert on 5xx rates needs no
// more. Per-code counts belong in the access log.

import (
	"sync/atomic"
	"time"
)

// durationBuckets are the request-duration histogram's upper bounds:
// Prometheus's default buckets, from 5 ms to 10 s.
var durationBuckets = [...]time.Duration{
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// statusClasses label the classes, in the order requestCounts keeps them.
var statusClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// requestCounts are a worker's counts of its answered requests: three
// atomic adds a request, no lock.
type requestCounts struct {
	classes   [len(statusClasses)]atomic.Int64
	durations [len(durationBuckets) + 1]atomic.Int64 // per bucket, not cumulative; the last is above every bound
	sumUS     atomic.Int64                           // every duration, in microseconds
}

// observe counts one answered request: its status (0: the handler wrote
// nothing, which net/http answers 200) and how long it took.
func (c *requestCounts) observe(status int, took time.Duration) {
	if status == 0 {
		status = 200
	}
	if class := status/100 - 1; class >= 0 && class < len(c.classes) {
		c.classes[class].Add(1)
	}
	i := 0
	for i < len(durationBuckets) && took > durationBuckets[i] {
		i++
	}
	c.durations[i].Add(1)
	c.sumUS.Add(took.Microseconds())
}

// requestStats is requestCounts as the stats message carries them.
type requestStats struct {
	Classes   [len(statusClasses)]int64       `json:"classes"`
	Durations [len(durationBuckets) + 1]int64 `json:"durations"`
	SumUS     int64                           `json:"duration_sum_us"`
}

func (c *requestCounts) stats() requestStats {
	var s requestStats
	for i := range c.classes {
		s.Classes[i] = c.classes[i].Load()
	}
	for i := range c.durations {
		s.Durations[i] = c.durations[i].Load()
	}
	s.SumUS = c.sumUS.Load()
	return s
}

// add sums two workers' counts; max is the later of two reports of one.
func (a requestStats) add(b requestStats) requestStats {
	for i := range a.Classes {
		a.Classes[i] += b.Classes[i]
	}
	for i := range a.Durations {
		a.Durations[i] += b.Durations[i]
	}
	a.SumUS += b.SumUS
	return a
}

func (a requestStats) max(b requestStats) requestStats {
	for i := range a.Classes {
		a.Classes[i] = max(a.Classes[i], b.Classes[i])
	}
	for i := range a.Durations {
		a.Durations[i] = max(a.Durations[i], b.Durations[i])
	}
	a.SumUS = max(a.SumUS, b.SumUS)
	return a
}
