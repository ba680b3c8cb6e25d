package main

// progress.go is what a worker knows of its own progress, which the
// parent's hang rule (hang.go) decides on: a count that moves whenever
// the serving path does, the requests in flight that wait on their
// client or run on a connection they hijacked (those wait on no one in
// the worker), and the requests in flight, each stamped with the
// interval it began or last moved in, so one stuck for longer than
// -worker-timeout is named in the log.
//
// Progress is a request answered; bytes written on a request's behalf
// (limitConn counts an HTTP/1 connection's writes while a request is open
// on it, so a 1 GiB download to a slow client moves it with every chunk
// the kernel takes; streamWriter counts an HTTP/2 stream's writes and
// flushes); bytes of a request body read (bodyReader); or a handler's
// own word (Alive). A TLS handshake, a new request's headers or HTTP/2's
// own frames are not: a deadlocked worker that clients keep connecting
// to makes no progress.
//
// Rejected: gunicorn's heartbeat, a file each worker touches from its
// serving loop, which Go has no single loop to put in; uwsgi's harakiri,
// a per-request alarm, which kills the whole worker for one slow request
// and costs a clock read and a timer per request. A clock read per
// request is what this file avoids: a request is stamped with an epoch,
// which a ticker advances every eighth of the timeout.

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Alive tells servery that the handler answering through w is making
// progress, though it has written nothing for a while: a handler that
// computes, or waits on purpose (a long poll), for longer than
// -worker-timeout calls it at least once per timeout, or its request is
// named stuck and, when nothing else its worker serves moves either, the
// worker is found hung. w is the handler's ResponseWriter, or a wrapper
// of it with an Unwrap method, as http.ResponseController finds it. It
// costs two atomic adds; outside a worker the parent probes (direct
// mode) it does nothing.
func Alive(w http.ResponseWriter) {
	for w != nil {
		switch v := w.(type) {
		case *drainWriter:
			v.conn.progressed()
			return
		case *streamWriter:
			v.progressed()
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return
		}
	}
}

// progressCounts is what one server counts of its progress, while the
// parent probes its worker: moved, writes and reads on a request's
// behalf and Alive calls (requests answered are served); waiting, the
// reads and writes of requests that block on their client now; hijacked,
// the handlers running on a connection they hijacked, which is theirs.
type progressCounts struct {
	moved, waiting, hijacked atomic.Int64
}

// progressOf returns what a request answered through w counts its
// progress in: its server's counts, and its own (its HTTP/1
// connection's, or its HTTP/2 stream's); nil, nil if neither is kept.
func progressOf(w http.ResponseWriter, r *http.Request) (*progressCounts, *atomic.Int64) {
	if sw, ok := w.(*streamWriter); ok && sw.prog != nil {
		return sw.prog, &sw.progress
	}
	if lc, ok := r.Context().Value(connKey{}).(*limitConn); ok && lc.h1.prog != nil && !servedByHTTP2(r) {
		return lc.h1.prog, &lc.h1.progress
	}
	return nil, nil
}

// progressed counts progress made on c's behalf: its own, which names
// its request stuck or not, and its server's, which the parent's hang
// rule reads. Nothing for a nil c, or where the parent does not probe.
func (c *h1Conn) progressed() {
	if c != nil && c.prog != nil {
		c.progress.Add(1)
		c.prog.moved.Add(1)
	}
}

// progressed counts progress made on the stream's behalf, as an HTTP/1
// connection's.
func (s *streamWriter) progressed() {
	if s.prog != nil {
		s.progress.Add(1)
		s.prog.moved.Add(1)
	}
}

// waits adds d to the reads and writes waiting on their client; nothing
// for nil.
func (p *progressCounts) waits(d int64) {
	if p != nil {
		p.waiting.Add(d)
	}
}

// inflight is the set of a worker's requests in flight, in one list under
// a lock: a request joins it when its handler begins and leaves it when
// the handler returns. The list is read only by look, every eighth of
// the worker timeout.
type inflight struct {
	mu    sync.Mutex
	head  *inflightReq
	epoch atomic.Int64 // look's ticks so far; a request is stamped with it
}

// inflightReq is one request in flight: an HTTP/1 connection's, which
// lives in its h1Conn (one request at a time, no allocation), or an
// HTTP/2 stream's, in its streamWriter.
type inflightReq struct {
	method, path string        // copied as it begins: the handler may rewrite r's
	moved        *atomic.Int64 // its progress: its connection's, or its stream's
	epoch        int64         // the epoch it began in, or last moved in
	seen         int64         // moved when look last saw it
	reported     bool          // look has named it stuck
	hijacked     atomic.Bool   // its handler took its connection: the program's now, never named
	prev, next   *inflightReq
}

// add puts q, for r, whose progress moved counts, in the set.
func (s *inflight) add(q *inflightReq, r *http.Request, moved *atomic.Int64) {
	q.method, q.path, q.moved, q.epoch, q.reported = r.Method, r.URL.Path, moved, s.epoch.Load(), false
	q.seen = moved.Load()
	q.hijacked.Store(false)
	s.mu.Lock()
	q.prev, q.next = nil, s.head
	if s.head != nil {
		s.head.prev = q
	}
	s.head = q
	s.mu.Unlock()
}

// remove takes q out of the set.
func (s *inflight) remove(q *inflightReq) {
	s.mu.Lock()
	if q.prev != nil {
		q.prev.next = q.next
	} else {
		s.head = q.next
	}
	if q.next != nil {
		q.next.prev = q.prev
	}
	q.prev, q.next, q.moved = nil, nil, nil
	s.mu.Unlock()
}

// stuckRequest is a request look found running for longer than the
// timeout, for the log.
type stuckRequest struct {
	method, path string
	stuck        time.Duration // at least
}

// look advances the epoch and returns the requests that have now made
// no progress for at least after, each once, given that an epoch lasts
// tick. A request that moved since the last look is stamped anew. A
// request stamped with epoch e began (or last moved) before e+1 began,
// so at epoch now it has been stuck for at least (now-e-1) ticks. It
// holds the set's lock throughout, which requests beginning and ending
// meanwhile wait for.
func (s *inflight) look(tick, after time.Duration) []stuckRequest {
	now := s.epoch.Add(1)
	var found []stuckRequest
	s.mu.Lock()
	defer s.mu.Unlock()
	for q := s.head; q != nil; q = q.next {
		if p := q.moved.Load(); p != q.seen {
			q.seen, q.epoch = p, now
		}
		stuck := time.Duration(now-q.epoch-1) * tick
		if q.reported || stuck < after || q.hijacked.Load() {
			continue
		}
		q.reported = true
		found = append(found, stuckRequest{q.method, q.path, stuck})
	}
	return found
}

// stuckLines is the most requests one look names in the log; the rest
// are counted in one line.
const stuckLines = 10

// watchProgress watches the worker's own progress every eighth of the
// timeout until done closes. It keeps in srv.stalled how long the worker
// has gone without progress while requests were in flight, which its
// stats answers carry to the parent, and when that first reaches the
// timeout it sends them unasked, so the parent need not wait for its
// next probe. It names, once each, the requests that have run for longer
// than the timeout, and counts them in srv.stuck: one stuck request
// while others finish is no hung worker.
//
// The ticker goroutine needs nothing the handlers hold. A late tick, a
// worker whose CPU is taken by its handlers, makes the stall it sees
// shorter, never longer: it counts ticks, each of which lasted at least
// its interval.
func (rt *workerRuntime) watchProgress(timeout time.Duration, out *lineWriter, done <-chan struct{}) {
	if timeout <= 0 {
		return
	}
	every := timeout / 8
	if every <= 0 {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	srv := rt.srv
	var last stallSample
	for {
		select {
		case <-tick.C:
		case <-done:
			return
		}
		// The stuck requests first: a stall report may end the worker.
		rt.logStuck(srv.requests.look(every, timeout), timeout)
		was := time.Duration(srv.stalled.Load())
		last = last.next(srv.stats().Progress, srv.blocked(), every)
		srv.stalled.Store(int64(last.stalled))
		if was < timeout && last.stalled >= timeout {
			rt.sendStats(out)
		}
	}
}

// stallSample is what one look saw: the progress count, the requests
// blocked on the server, and how long the worker has made no progress
// with requests so blocked.
type stallSample struct {
	progress, blocked int64
	stalled           time.Duration
}

// next is the sample after s, an interval every later. The worker made
// no progress in between if its count did not move and requests were
// blocked at both ends: each of them answered is progress, so the same
// ones (and maybe more) were stuck throughout.
func (s stallSample) next(progress, blocked int64, every time.Duration) stallSample {
	n := stallSample{progress: progress, blocked: blocked}
	if progress == s.progress && blocked > 0 && s.blocked > 0 {
		n.stalled = s.stalled + every
	}
	return n
}

// blocked is how many requests in flight wait on the server itself: not
// on their client (a write the client does not take, a body it does not
// send: -write-timeout and -body-timeout bound those), nor running on a
// connection their handler hijacked, which is the program's.
func (srv *server) blocked() int64 {
	return srv.inflight.Load() - srv.prog.waiting.Load() - srv.prog.hijacked.Load()
}

// logStuck names the stuck requests found, up to stuckLines of them, and
// counts them.
func (rt *workerRuntime) logStuck(found []stuckRequest, timeout time.Duration) {
	rt.srv.stuck.Add(int64(len(found)))
	for i, q := range found {
		if i == stuckLines {
			rt.log.Warn("requests stuck", "more", len(found)-stuckLines, "timeout", timeout)
			return
		}
		rt.log.Warn("request stuck", "method", q.method, "path", q.path, "stuck_for", q.stuck, "timeout", timeout)
	}
}
