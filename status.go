package main

// status.go is what an operator sees while servery runs: the status
// listener (-status-addr), which the parent serves itself, so it answers
// whatever becomes of any worker. /livez says the lifecycle loop
// answers, /readyz whether to send traffic here, /status what each slot
// is doing, as JSON, and /metrics the counts (metrics.go) for Prometheus.
//
// The loop hands a scrape a snapshot of its own state (evStatus) and goes
// on; the scrape then asks the workers for their counters itself, so a
// worker slow to answer, or a slow client, delays only that scrape.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// statusSnapshot is the loop's state as a scrape needs it.
type statusSnapshot struct {
	Serving int // the serving generation's number; 0 for none
	// Workers is how many slots the serving generation has, one being
	// added included; Target is how many the service runs to (scale.go).
	// In direct mode both are 1.
	Workers, Target int
	Ready           bool // /readyz: a generation serves, and no stop has begun (nor its shutdown delay)
	Ending          bool // the stop began
	Leaving         bool // a stop was asked for and its shutdown delay runs
	Started         time.Time
	Lost            int64 // serving workers lost
	Respawns        int64 // lost workers replaced
	Recycles        int64 // workers recycled
	// RecyclesBy counts them by the limit reached: requests, age, memory.
	RecyclesBy map[string]int64
	// RecycleFailures counts recycles whose replacement failed to start;
	// RecycleFailing is, by slot, how many in a row its serving worker's
	// recycle has failed so far.
	RecycleFailures int64
	RecycleFailing  map[int]int
	// SpawnRefusals counts replacements the host refused to start
	// (EAGAIN, ENOMEM, EMFILE, ENFILE) while others served: retried
	// with the slot's backoff, not against the budget.
	SpawnRefusals int64
	ReloadsOK     int64
	ReloadsFailed int64
	LastReload    *reloadResult
	Restarts      map[int]int64 // respawns, by slot
	gens          []genRole     // every generation with workers that may be alive
	// LogLinesDropped is the parent's count, not the loop's: the status
	// listener reads it from the workers' output (output.go).
	LogLinesDropped int64
}

// reloadResult is how the last reload ended.
type reloadResult struct {
	Generation int       `json:"generation"`
	Result     string    `json:"result"` // ok or failed
	At         time.Time `json:"at"`
	Error      string    `json:"error,omitempty"`
}

// genRole is a generation and what it is to the loop.
type genRole struct {
	gen  generation
	role string // serving, starting, retiring or stopping
}

// workerView is what a scrape shows of one worker process.
type workerView struct {
	Slot       int
	PID        int
	State      string    // stateStarting, stateServing or stateStopping
	ReadySince time.Time // zero until it reported ready
}

// snapshot is run's answer to evStatus.
func (v *Service) snapshot(l *life) statusSnapshot {
	s := l.stats
	s.Serving = l.number(l.serving)
	s.Workers, s.Target = l.target, l.target
	if l.slots != nil && v.workers > 1 {
		s.Workers = l.slots.count
	}
	s.Ending, s.Leaving = l.ending, l.leaving
	s.Ready = l.serving != nil && !l.ending && !l.leaving
	s.Started = processStart
	s.RecyclesBy = maps.Clone(l.stats.RecyclesBy)
	s.Restarts = make(map[int]int64, len(l.stats.Restarts))
	for i, n := range l.stats.Restarts {
		s.Restarts[i] = n
	}
	s.RecycleFailing = map[int]int{}
	if l.slots != nil {
		for i, slot := range l.slots.byIndex {
			if slot.recycleFailures > 0 {
				s.RecycleFailing[i] = slot.recycleFailures
			}
		}
	}
	if l.serving != nil {
		role := "serving"
		if l.stopping[l.serving] {
			role = "stopping" // the end began
		}
		s.gens = append(s.gens, genRole{l.serving, role})
	}
	if l.starting != nil {
		s.gens = append(s.gens, genRole{l.starting.gen, "starting"})
	}
	if l.retiring != nil && l.retiring != l.serving {
		s.gens = append(s.gens, genRole{l.retiring, "retiring"})
	}
	for gen := range l.stopping {
		if gen != l.serving && gen != l.retiring {
			s.gens = append(s.gens, genRole{gen, "stopping"})
		}
	}
	return s
}

// status returns the loop's snapshot, or an error if the loop did not
// answer before ctx ended. Once the service has ended it returns one
// that says so.
func (v *Service) status(ctx context.Context) (statusSnapshot, error) {
	r := make(chan statusSnapshot, 1)
	select {
	case v.inbox <- evStatus{reply: r}:
	case <-v.done:
		return statusSnapshot{Ending: true, Started: processStart}, nil
	case <-ctx.Done():
		return statusSnapshot{}, fmt.Errorf("lifecycle loop: %w", ctx.Err())
	}
	select {
	case s := <-r:
		return s, nil
	case <-ctx.Done():
		return statusSnapshot{}, fmt.Errorf("lifecycle loop: %w", ctx.Err())
	}
}

// Status listener limits. A status client is an operator's curl, a
// load balancer's health check or a scraper: a few connections, each
// with small requests. A slow or hostile one is cut off by these, never
// holds the loop or a worker, and, holding connections, never keeps a
// probe waiting (statusConns).
const (
	statusMaxConns      = 16
	statusHeaderTimeout = 2 * time.Second
	statusWriteTimeout  = 5 * time.Second
	statusIdleTimeout   = 30 * time.Second
	// statusAnswer bounds the wait for the loop's snapshot and the
	// workers' counters: a worker that has not answered by then is
	// shown with the counters it last reported.
	statusAnswer = time.Second
)

// statusServer serves the status listener for one Service.
type statusServer struct {
	svc     *Service
	counts  *tally
	workers int
	http    *http.Server
	scrape  sync.Mutex // one scrape asks the workers at a time
}

// serveStatus serves the status listener ln for svc in a goroutine of its
// own until ln is closed (close).
func serveStatus(ln net.Listener, svc *Service, log *slog.Logger) *statusServer {
	st := &statusServer{svc: svc, counts: svc.counts, workers: svc.workers}
	mux := http.NewServeMux()
	mux.HandleFunc("/livez", st.livez)
	mux.HandleFunc("/readyz", st.readyz)
	mux.HandleFunc("/status", st.status)
	mux.HandleFunc("/metrics", st.metrics)
	conns := &statusConns{max: statusMaxConns, seen: map[net.Conn]connSeen{}}
	st.http = &http.Server{
		Handler:           onlyGetAndHead(mux),
		ConnState:         conns.track,
		ReadHeaderTimeout: statusHeaderTimeout,
		ReadTimeout:       statusHeaderTimeout,
		WriteTimeout:      statusWriteTimeout,
		IdleTimeout:       statusIdleTimeout,
		MaxHeaderBytes:    8 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go st.http.Serve(newLimitListener(ln, 0, 0, statusWriteTimeout, new(atomic.Int64)))
	return st
}

// statusConns caps the status listener's connections without ever
// making a new one wait. A cap that holds Accept, as a worker's does,
// lets a few clients that keep their connections idle, or send their
// headers a byte at a time, leave the liveness probe unanswered until
// they time out, and reconnect: anyone who can reach the port could get
// the service restarted. So every connection is accepted, and one over
// the cap closes the one that has gone longest without a request
// running: idle, or still sending its headers; only if each of the
// others runs a request, the oldest of those. A probe, whose request
// runs as soon as it arrives and ends within milliseconds, is thus never
// the one closed while a client that only holds a connection remains.
type statusConns struct {
	max  int
	mu   sync.Mutex
	seen map[net.Conn]connSeen
}

// connSeen is a status connection's state and when it entered it.
type connSeen struct {
	state http.ConnState
	since time.Time
}

// track is the status server's ConnState hook; for a new connection it
// runs in the accept loop, before the connection is served.
func (c *statusConns) track(conn net.Conn, state http.ConnState) {
	var victim net.Conn
	c.mu.Lock()
	switch state {
	case http.StateNew, http.StateActive, http.StateIdle:
		c.seen[conn] = connSeen{state, time.Now()}
		if state == http.StateNew && len(c.seen) > c.max {
			victim = c.longestWaiting(conn)
			delete(c.seen, victim)
		}
	default: // closed or hijacked: no longer ours
		delete(c.seen, conn)
	}
	c.mu.Unlock()
	if victim != nil {
		victim.Close()
	}
}

// longestWaiting returns the connection other than keep to close: the
// one longest idle or reading its headers, or else the oldest request.
func (c *statusConns) longestWaiting(keep net.Conn) net.Conn {
	var victim net.Conn
	var v connSeen
	for conn, s := range c.seen {
		if conn == keep {
			continue
		}
		waiting, vWaiting := s.state != http.StateActive, v.state != http.StateActive
		if victim == nil || (waiting && !vWaiting) || (waiting == vWaiting && s.since.Before(v.since)) {
			victim, v = conn, s
		}
	}
	return victim
}

// close closes the status listener and every connection on it.
func (st *statusServer) close() { st.http.Close() }

// onlyGetAndHead answers any other method with 405 and an Allow header.
func onlyGetAndHead(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: the status listener answers GET and HEAD", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// livez answers 200 while the lifecycle loop answers within statusAnswer,
// and 503 if it does not.
func (st *statusServer) livez(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), statusAnswer)
	defer cancel()
	if _, err := st.svc.status(ctx); err != nil {
		http.Error(w, "not live: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	plain(w, http.StatusOK, "live\n")
}

// readyz answers 200 while a generation serves and no stop has begun,
// and 503 otherwise: before the first generation is ready, from the
// first stop request on (the shutdown delay included), and if the loop
// does not answer.
func (st *statusServer) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), statusAnswer)
	defer cancel()
	s, err := st.svc.status(ctx)
	switch {
	case err != nil:
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
	case s.Ready:
		plain(w, http.StatusOK, fmt.Sprintf("ready: generation %d serves\n", s.Serving))
	case s.Ending || s.Leaving:
		plain(w, http.StatusServiceUnavailable, "not ready: stopping\n")
	default:
		plain(w, http.StatusServiceUnavailable, "not ready: starting\n")
	}
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write([]byte(body))
}

// collect takes the loop's snapshot, asks every live worker for its
// counters, and returns what a page needs.
func (st *statusServer) collect(ctx context.Context) (*metricsPage, error) {
	ctx, cancel := context.WithTimeout(ctx, statusAnswer)
	defer cancel()
	s, err := st.svc.status(ctx)
	if err != nil {
		return nil, err
	}
	st.scrape.Lock()
	defer st.scrape.Unlock()
	deadline, _ := ctx.Deadline()
	var wg sync.WaitGroup
	for _, g := range s.gens {
		wg.Go(func() { g.gen.askStats(deadline) })
	}
	wg.Wait()
	s.LogLinesDropped = st.svc.output.droppedLines()
	p := &metricsPage{snap: s, now: time.Now()}
	for _, g := range s.gens {
		p.workers = append(p.workers, g.gen.workers(g.role == "serving")...)
	}
	p.slots, p.exits = st.counts.read()
	for i := range max(st.workers, s.Workers) {
		if _, ok := p.slots[i]; !ok {
			p.slots[i] = slotCounts{}
		}
	}
	return p, nil
}

// metrics writes the Prometheus text format.
func (st *statusServer) metrics(w http.ResponseWriter, r *http.Request) {
	p, err := st.collect(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	var b bytes.Buffer
	p.write(&b)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b.Bytes())
}

// statusDoc is /status's JSON.
type statusDoc struct {
	Generation    int              `json:"generation"`     // the serving one; 0 for none
	Workers       int              `json:"workers"`        // the serving generation's slots, one being added included
	WorkersTarget int              `json:"workers_target"` // -workers, or the last scale's count
	Ready         bool             `json:"ready"`
	Stopping      bool             `json:"stopping"`
	PID           int              `json:"pid"` // the parent's
	Started       time.Time        `json:"started"`
	UptimeSeconds float64          `json:"uptime_seconds"`
	Goroutines    int              `json:"goroutines"` // the parent's: flat over months, across upgrades too
	Slots         []slotDoc        `json:"slots"`
	Generations   []generationDoc  `json:"generations"`
	Reloads       reloadsDoc       `json:"reloads"`
	Lost          int64            `json:"workers_lost"`
	Respawns      int64            `json:"respawns"`
	Recycles      int64            `json:"recycles"`
	RecyclesBy    map[string]int64 `json:"recycles_by_limit"`
	// RecycleFailures counts recycles whose replacement failed to start:
	// the old worker served on each time.
	RecycleFailures int64 `json:"recycle_failures"`
	// SpawnRefusals counts replacements the host refused to start
	// while other workers served: retried, not spent from the budget.
	SpawnRefusals int64            `json:"spawn_refusals"`
	Exits         map[string]int64 `json:"worker_exits"`
	// LogLinesDropped counts the workers' output lines the parent
	// dropped because its own log output was too slow (output.go).
	LogLinesDropped int64 `json:"log_lines_dropped"`
}

type slotDoc struct {
	Index       int        `json:"index"`
	PID         int        `json:"pid"`   // the serving generation's worker in the slot; 0 while none serves
	State       string     `json:"state"` // serving, starting (a replacement in its barrier) or down (lost, its respawn pending)
	ReadySince  *time.Time `json:"ready_since,omitempty"`
	Requests    int64      `json:"requests"`    // by every worker that held the slot
	Connections int64      `json:"connections"` // by every worker that held the slot
	Restarts    int64      `json:"restarts"`
	LastExit    string     `json:"last_exit,omitempty"`
	// RecycleFailures: how many times in a row the recycle of the slot's
	// worker has failed; it serves on, and the recycle is tried again.
	RecycleFailures int `json:"recycle_failures,omitempty"`
	// What its workers alive now last said: requests in flight and
	// resident bytes; how many of its workers were found hung, and how
	// many requests its workers found stuck (progress.go).
	Inflight int64 `json:"inflight"`
	Memory   int64 `json:"memory_bytes"`
	Hangs    int64 `json:"hangs"`
	Stuck    int64 `json:"stuck_requests"`
}

type generationDoc struct {
	Number int         `json:"number"`
	Role   string      `json:"role"` // serving, starting, retiring or stopping
	PIDs   []workerDoc `json:"workers"`
}

type workerDoc struct {
	Slot  int    `json:"slot"`
	PID   int    `json:"pid"`
	State string `json:"state"`
}

type reloadsDoc struct {
	OK     int64         `json:"ok"`
	Failed int64         `json:"failed"`
	Last   *reloadResult `json:"last,omitempty"`
}

// status writes /status.
func (st *statusServer) status(w http.ResponseWriter, r *http.Request) {
	p, err := st.collect(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	s := p.snap
	doc := statusDoc{Generation: s.Serving, Workers: s.Workers, WorkersTarget: s.Target, Ready: s.Ready, Stopping: s.Ending || s.Leaving, PID: os.Getpid(),
		Started: s.Started, UptimeSeconds: p.now.Sub(s.Started).Seconds(), Goroutines: runtime.NumGoroutine(), Exits: p.exits,
		Reloads: reloadsDoc{OK: s.ReloadsOK, Failed: s.ReloadsFailed, Last: s.LastReload},
		Lost:    s.Lost, Respawns: s.Respawns, Recycles: s.Recycles, RecycleFailures: s.RecycleFailures,
		SpawnRefusals: s.SpawnRefusals, LogLinesDropped: s.LogLinesDropped,
		RecyclesBy: recyclesBy(s.RecyclesBy)}
	for _, g := range s.gens {
		gd := generationDoc{Number: g.gen.number(), Role: g.role, PIDs: []workerDoc{}}
		for _, v := range g.gen.workers(g.role == "serving") {
			gd.PIDs = append(gd.PIDs, workerDoc{Slot: v.Slot, PID: v.PID, State: v.State})
		}
		doc.Generations = append(doc.Generations, gd)
	}
	shown := st.workers // before the first generation serves
	if s.Workers > 0 {
		shown = s.Workers
	}
	for i := range shown {
		doc.Slots = append(doc.Slots, p.slotDoc(i))
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(append(b, '\n'))
}

// slotDoc describes slot i: its counts, and the serving generation's
// worker in it, if one serves or starts there.
func (p *metricsPage) slotDoc(i int) slotDoc {
	c := p.slots[i]
	d := slotDoc{Index: i, State: "down", Requests: c.Served, Connections: c.Accepted,
		Restarts: p.snap.Restarts[i], LastExit: c.LastExit, RecycleFailures: p.snap.RecycleFailing[i],
		Inflight: c.Inflight, Memory: c.Memory, Hangs: c.Hangs, Stuck: c.Stuck}
	for _, v := range p.servingWorkers() {
		if v.Slot != i || v.State == stateStopping {
			continue
		}
		if d.PID == 0 || v.State == stateServing {
			d.PID, d.State = v.PID, v.State
			if !v.ReadySince.IsZero() {
				t := v.ReadySince
				d.ReadySince = &t
			}
		}
	}
	return d
}

// servingWorkers returns the serving generation's workers.
func (p *metricsPage) servingWorkers() []workerView {
	for _, g := range p.snap.gens {
		if g.role == "serving" {
			return g.gen.workers(true)
		}
	}
	return nil
}

// checkStatusAddr refuses a -status-addr that cannot work: unparsable,
// or the address servery serves on.
func (cfg *config) checkStatusAddr() error {
	if cfg.StatusAddr == "" {
		return nil
	}
	if err := checkAddr(cfg.StatusAddr); err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			ue.flag = "status-addr"
		}
		return err
	}
	if sameAddr(cfg.StatusAddr, cfg.Addr) {
		return bad("status-addr", "%q is -addr too: the status listener needs its own port", cfg.StatusAddr)
	}
	return nil
}

// sameAddr reports whether two host:port addresses name one socket: the
// same port, and hosts that are equal or where either is every address.
func sameAddr(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	if pa != pb || pa == "0" {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wild(ha) || wild(hb)
}

// workers returns what each of the generation's worker processes not yet
// reaped is doing; serving says whether the generation serves, as the
// loop's snapshot said. That, not whether its stop has begun since,
// decides: a scrape that reads the snapshot of the serving generation
// just before a reload promotes the next, and its workers just after,
// would otherwise show none serving in either, for a moment that an
// alert on servery_workers{state="serving"} catches. What status shows
// switches from one generation to the next in one step.
func (s *Supervisor) workers(serving bool) []workerView {
	s.mu.Lock()
	defer s.mu.Unlock()
	var vs []workerView
	for _, p := range s.all {
		select {
		case <-p.exited:
			continue
		default:
		}
		v := workerView{Slot: p.index, PID: p.pid, State: stateServing}
		if ready := p.readyAt.Load(); ready != 0 {
			v.ReadySince = time.Unix(0, ready)
		}
		switch {
		case p.gone || s.stopping && !serving:
			v.State = stateStopping
		case v.ReadySince.IsZero() || !serving:
			v.State = stateStarting
		}
		vs = append(vs, v)
	}
	// s.all is in spawn order, which a respawn changes; readers want
	// slot order.
	slices.SortStableFunc(vs, func(a, b workerView) int { return cmp.Compare(a.Slot, b.Slot) })
	return vs
}

// askStats asks each worker that has reported ready, and still runs, for
// its counters, and blocks until each has answered, exited, or deadline
// has passed. The answers reach the tally through the worker's reader. The
// writes share keyMu with the ticket keys', so the two never interleave
// their deadlines; a worker that stopped reading costs a scrape its
// deadline, and nothing else. A stopping worker's protocol input is
// closed: the write fails at once, and its counters come with its done
// message.
func (s *Supervisor) askStats(deadline time.Time) {
	s.mu.Lock()
	var procs []*workerProc
	for _, p := range s.all {
		if p.readyAt.Load() != 0 {
			procs = append(procs, p)
		}
	}
	s.mu.Unlock()
	var waits []<-chan struct{}
	var asked []*workerProc
	s.keyMu.Lock()
	now := monoNow()
	for _, p := range procs {
		replied := p.nextReply()
		p.askedAt.CompareAndSwap(0, now) // a question it cannot even take is unanswered too
		p.stdin.SetWriteDeadline(deadline)
		if p.out.send(message{Type: msgStats}) == nil {
			waits, asked = append(waits, replied), append(asked, p)
		}
	}
	s.keyMu.Unlock()
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	for i, replied := range waits {
		select {
		case <-replied:
		case <-asked[i].exited:
		case <-timeout.C:
			return
		}
	}
}

// nextReply returns a channel closed at the worker's next stats answer.
// Answers come in the order asked, so one asked for after this call has
// come once it closes, or one asked for just before: counters a little
// older, which is all a scrape needs.
func (p *workerProc) nextReply() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.replied == nil {
		p.replied = make(chan struct{})
	}
	return p.replied
}

// statsReplied records a stats answer: it wakes whoever waits for one.
func (p *workerProc) statsReplied() {
	p.askedAt.Store(0)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.replied != nil {
		close(p.replied)
		p.replied = nil
	}
}

// workers shows direct mode's one server as slot 0, served by this
// process, while the generation is the serving one. servedAt is written
// by serve, in the loop, before the loop's snapshot names the generation.
func (d *directGen) workers(serving bool) []workerView {
	if !serving {
		return nil
	}
	return []workerView{{Slot: 0, PID: os.Getpid(), State: stateServing, ReadySince: d.servedAt}}
}

// askStats reads the one server's counters, which count every request
// of every generation of direct mode, and what it does now as a worker
// reports it (sendStats): direct mode's one server is this process, so
// /status shows its requests in flight and its resident memory.
func (d *directGen) askStats(time.Time) {
	st := d.rt.srv.stats()
	st.Inflight, st.Memory = d.rt.srv.inflight.Load(), residentBytes()
	d.rt.counts.seen(d.rt.srv, st)
}
