package main

// metrics.go keeps the counts the status listener exports (status.go) and
// writes them in the Prometheus text format. A worker counts its own
// connections and requests (server.stats) and tells the parent when asked
// (msgStats); the parent adds up, per slot, what every worker that ever
// held the slot counted, so a total never goes backwards when a worker is
// respawned, recycled or replaced by a reload. A scraper's rate() reads
// any drop as a counter reset, which is what nginx's shared-memory
// gauges and a sum over live workers alone get wrong.

import (
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"time"
)

// tally is the parent's count of what its workers did, across every
// generation. Its own lock guards it: the readers and reapers of workers
// write to it, the status listener reads it, and none of them is the
// lifecycle loop, which it never blocks.
type tally struct {
	mu    sync.Mutex
	slots map[int]*slotTally
	live  map[any]*liveCount // a worker (or direct mode's server) still counting
	exits map[string]int64   // worker processes that exited, by exitReason
}

// slotTally is what the workers that held one slot counted.
type slotTally struct {
	gone     workerStats // the final counts of its workers that exited
	lastExit string      // how its last worker exited, as cmd.Wait said
	hangs    int64       // its workers found hung (hang.go)
}

// liveCount is a counting worker's slot and its counters as last seen.
type liveCount struct {
	slot int
	last workerStats
}

func newTally() *tally {
	return &tally{slots: map[int]*slotTally{}, live: map[any]*liveCount{}, exits: map[string]int64{}}
}

func (t *tally) slot(i int) *slotTally {
	st := t.slots[i]
	if st == nil {
		st = &slotTally{}
		t.slots[i] = st
	}
	return st
}

// begin counts who, a worker just started in slot, from now on.
func (t *tally) begin(who any, slot int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.slot(slot)
	t.live[who] = &liveCount{slot: slot}
}

// seen records who's counters as it reported them. A report older than
// one already seen changes nothing.
func (t *tally) seen(who any, st workerStats) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.live[who]; c != nil {
		c.last = c.last.max(st)
		c.last.Inflight, c.last.Memory = st.Inflight, st.Memory // now, not the most
	}
}

// last returns who's counters as last seen.
func (t *tally) last(who any) workerStats {
	if t == nil {
		return workerStats{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.live[who]; c != nil {
		return c.last
	}
	return workerStats{}
}

// hung counts who, found hung, against its slot.
func (t *tally) hung(who any) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.live[who]; c != nil {
		t.slot(c.slot).hangs++
	}
}

// end moves who's counts into its slot's total once it has exited: its
// final counters if it reported them (final may be nil: a worker killed
// before its done message), else the last it was seen with. reason is
// how it exited (exitReason), and how, cmd.Wait's words for it.
func (t *tally) end(who any, final *workerStats, reason, how string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.live[who]
	if c == nil {
		return
	}
	delete(t.live, who)
	st := c.last
	if final != nil {
		st = st.max(*final)
	}
	s := t.slot(c.slot)
	s.gone = s.gone.add(st)
	s.lastExit = how
	t.exits[reason]++
}

// slotCounts is one slot's counters at a scrape: the counters of every
// worker that held it; requests in flight and resident memory of those
// alive now.
type slotCounts struct {
	workerStats
	LastExit string
	Hangs    int64
}

// read returns every slot's totals so far: the workers gone and the
// workers still counting, as last seen; and the exits by reason.
func (t *tally) read() (map[int]slotCounts, map[string]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	slots := make(map[int]slotCounts, len(t.slots))
	for i, s := range t.slots {
		slots[i] = slotCounts{workerStats: s.gone, LastExit: s.lastExit, Hangs: s.hangs}
	}
	for _, c := range t.live {
		s := slots[c.slot]
		s.workerStats = s.workerStats.add(c.last)
		s.Inflight += c.last.Inflight
		s.Memory += c.last.Memory
		slots[c.slot] = s
	}
	exits := make(map[string]int64, len(exitReasons))
	for _, r := range exitReasons {
		exits[r] = 0
	}
	for r, n := range t.exits {
		exits[r] = n
	}
	return slots, exits
}

// add sums the counters of two workers; max is the later of two reports
// of one. Progress and Stalled are the probe's, not counters anyone
// reads from the tally.
func (a workerStats) add(b workerStats) workerStats {
	return workerStats{Accepted: a.Accepted + b.Accepted, Served: a.Served + b.Served, Stuck: a.Stuck + b.Stuck,
		Requests: a.Requests.add(b.Requests)}
}

func (a workerStats) max(b workerStats) workerStats {
	return workerStats{Accepted: max(a.Accepted, b.Accepted), Served: max(a.Served, b.Served), Stuck: max(a.Stuck, b.Stuck),
		Requests: a.Requests.max(b.Requests)}
}

// recycleLimitNames are the limits a worker reaches to be recycled: the
// values of the recycles metric's limit label.
var recycleLimitNames = []string{"requests", "age", "memory"}

// recyclesBy is every limit's count, 0 for those never reached.
func recyclesBy(counts map[string]int64) map[string]int64 {
	by := make(map[string]int64, len(recycleLimitNames))
	for _, limit := range recycleLimitNames {
		by[limit] = counts[limit]
	}
	return by
}

// The reasons a worker process exited, the values of the exits metric's
// reason label: few and fixed, so a scraper's series stay bounded.
const (
	exitClean  = "clean"  // status 0: it drained and left when told (a stop, a reload, a recycle), or a replacement rolled back
	exitError  = "error"  // a non-zero status: it failed, or its App's stop step did
	exitSignal = "signal" // ended by a signal: a crash, a kill from outside, or the parent's deadlines
)

var exitReasons = []string{exitClean, exitError, exitSignal}

// exitReason classifies cmd.Wait's result.
func exitReason(err error) string {
	if err == nil {
		return exitClean
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == -1 {
		return exitSignal
	}
	return exitError
}

// The states of a worker process, the values of the workers metric's
// state label.
const (
	stateStarting = "starting" // spawned, not yet serving: in its barrier, or ready in a generation not yet promoted
	stateServing  = "serving"  // ready in the serving generation, in its slot
	stateStopping = "stopping" // draining or lost: its generation retires or ends, or it left its slot
)

var workerStates = []string{stateStarting, stateServing, stateStopping}

// metricsPage is everything one scrape writes.
type metricsPage struct {
	snap    statusSnapshot
	workers []workerView // every worker process alive, of every generation
	slots   map[int]slotCounts
	exits   map[string]int64
	now     time.Time
}

// write writes p in the Prometheus text exposition format 0.0.4: a HELP
// and a TYPE line before each metric's samples, counters named _total,
// times in seconds. Every label value that can appear is written from the
// first scrape on, with 0 where nothing happened yet, so a query never
// finds a series missing.
func (p *metricsPage) write(w io.Writer) {
	m := &promWriter{w: w}
	s := p.snap
	slots := make([]int, 0, len(p.slots))
	for i := range p.slots {
		slots = append(slots, i)
	}
	sort.Ints(slots)
	m.family("servery_requests_total", "counter", "Requests answered, by worker slot, by every worker that held the slot: kept across respawns, recycles and reloads.")
	m.samples("servery_requests_total", "slot", slots, func(i int) int64 { return p.slots[i].Served })
	m.family("servery_connections_total", "counter", "Connections accepted, by worker slot, by every worker that held the slot.")
	m.samples("servery_connections_total", "slot", slots, func(i int) int64 { return p.slots[i].Accepted })
	var reqs requestStats
	for _, i := range slots {
		reqs = reqs.add(p.slots[i].Requests)
	}
	m.family("servery_http_responses_total", "counter", "Requests answered, by status class (1xx to 5xx), summed over every worker: a class, not a code, so no client can make the series grow.")
	for i, class := range statusClasses {
		m.sample("servery_http_responses_total", "code", class, reqs.Classes[i])
	}
	m.histogram("servery_http_request_duration_seconds", "How long requests took, from the handler's start to its return, summed over every worker.", reqs)

	m.family("servery_workers", "gauge", "Worker processes alive, by state: starting (not yet serving), serving, stopping (draining, or lost and not yet reaped).")
	byState := map[string]int64{}
	for _, v := range p.workers {
		byState[v.State]++
	}
	for _, st := range workerStates {
		m.sample("servery_workers", "state", st, byState[st])
	}
	m.family("servery_worker_exits_total", "counter", "Worker processes that exited, by reason: clean (status 0), error (non-zero status), signal (ended by a signal).")
	for _, r := range exitReasons {
		m.sample("servery_worker_exits_total", "reason", r, p.exits[r])
	}
	m.counter("servery_workers_lost_total", "Serving workers lost: exited, or broke the protocol, while they served.", s.Lost)
	m.counter("servery_worker_respawns_total", "Lost workers replaced in their slot: replacements that became ready.", s.Respawns)
	m.family("servery_worker_recycles_total", "counter", "Workers recycled, by the limit they reached: requests (-max-requests), age (-max-worker-age), memory (-max-worker-memory); replacements that became ready.")
	by := recyclesBy(s.RecyclesBy)
	for _, limit := range recycleLimitNames {
		m.sample("servery_worker_recycles_total", "limit", limit, by[limit])
	}
	m.family("servery_worker_hangs_total", "counter", "Workers found hung and killed, by slot: requests in flight and no progress for -worker-timeout, or no answer to the parent's probe while not running.")
	m.samples("servery_worker_hangs_total", "slot", slots, func(i int) int64 { return p.slots[i].Hangs })
	m.family("servery_requests_stuck_total", "counter", "Requests found running for longer than -worker-timeout, by slot: each named once in the log; its worker serves on while others make progress.")
	m.samples("servery_requests_stuck_total", "slot", slots, func(i int) int64 { return p.slots[i].Stuck })
	m.family("servery_requests_in_flight", "gauge", "Requests being answered, by slot, as its workers last said.")
	m.samples("servery_requests_in_flight", "slot", slots, func(i int) int64 { return p.slots[i].Inflight })
	m.family("servery_worker_resident_memory_bytes", "gauge", "Resident memory of the slot's workers alive, as they last said (RSS on Linux).")
	m.samples("servery_worker_resident_memory_bytes", "slot", slots, func(i int) int64 { return p.slots[i].Memory })
	m.counter("servery_worker_recycle_failures_total", "Recycles whose replacement failed to start: the old worker serves on, and the recycle is tried again after a backoff.", s.RecycleFailures)
	m.counter("servery_log_lines_dropped_total", "Lines of the workers' output that the parent dropped because its own log output was too slow to take them.", s.LogLinesDropped)
	m.counter("servery_worker_spawn_refusals_total", "Replacements the host refused to start (out of processes, memory or descriptors) while other workers served: retried after the slot's backoff, never spent from -max-restarts.", s.SpawnRefusals)
	m.family("servery_reloads_total", "counter", "Reloads, by result: ok (the new generation serves) or failed (rolled back; the old one serves on).")
	m.sample("servery_reloads_total", "result", "ok", s.ReloadsOK)
	m.sample("servery_reloads_total", "result", "failed", s.ReloadsFailed)
	m.gauge("servery_worker_slots", "The serving generation's worker slots, one being added included: -workers, then what SIGTTIN, SIGTTOU and Control.Scale make it.", int64(s.Workers))
	m.gauge("servery_worker_slots_target", "How many worker slots the service runs to: -workers, or the last scale's count.", int64(s.Target))
	m.gauge("servery_generation", "The serving generation's number: 1 at start; every reload numbers a new generation, one that fails too, so a reload that succeeds after failed ones skips theirs; 0 before the first serves.", int64(s.Serving))
	m.gauge("servery_ready", "1 while /readyz answers 200: a generation serves and no stop has begun; 0 otherwise.", boolInt(s.Ready))
	m.family("servery_start_time_seconds", "gauge", "When the servery process started, in seconds since the Unix epoch.")
	fmt.Fprintf(w, "servery_start_time_seconds %s\n", strconv.FormatFloat(float64(s.Started.UnixNano())/1e9, 'f', 3, 64))
}

// promWriter writes the text format's lines.
type promWriter struct{ w io.Writer }

func (m *promWriter) family(name, typ, help string) {
	fmt.Fprintf(m.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (m *promWriter) sample(name, label, value string, v int64) {
	fmt.Fprintf(m.w, "%s{%s=%q} %d\n", name, label, value, v)
}

func (m *promWriter) samples(name, label string, keys []int, v func(int) int64) {
	for _, k := range keys {
		m.sample(name, label, strconv.Itoa(k), v(k))
	}
}

// histogram writes the request-duration histogram: cumulative buckets,
// their sum in seconds and their count.
func (m *promWriter) histogram(name, help string, r requestStats) {
	m.family(name, "histogram", help)
	var n int64
	for i, bound := range durationBuckets {
		n += r.Durations[i]
		fmt.Fprintf(m.w, "%s_bucket{le=%q} %d\n", name, strconv.FormatFloat(bound.Seconds(), 'f', -1, 64), n)
	}
	n += r.Durations[len(durationBuckets)]
	fmt.Fprintf(m.w, "%s_bucket{le=\"+Inf\"} %d\n", name, n)
	fmt.Fprintf(m.w, "%s_sum %s\n", name, strconv.FormatFloat(float64(r.SumUS)/1e6, 'f', 6, 64))
	fmt.Fprintf(m.w, "%s_count %d\n", name, n)
}

func (m *promWriter) counter(name, help string, v int64) {
	m.family(name, "counter", help)
	fmt.Fprintf(m.w, "%s %d\n", name, v)
}

func (m *promWriter) gauge(name, help string, v int64) {
	m.family(name, "gauge", help)
	fmt.Fprintf(m.w, "%s %d\n", name, v)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
