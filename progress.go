package main

// progress.go is what a worker knows of its own progress, which the
// parent's hang rule (watch.go) decides on: a count that moves whenever
// the serving path does, and the requests in flight, each stamped with
// the interval it began in, so one that has run for longer than
// -worker-timeout is named in the log.
//
// Progress is a request answered, a write to a client on a request's
// behalf (limitConn counts a write while its connection has a request in
// flight, so a 1 GiB download to a slow client moves it with every chunk
// the kernel takes, a stream with every write, and a hijacked connection
// with every write the program makes on it), or a handler's own word
// (Alive). A TLS handshake or HTTP/2's own frames on a connection with no
// request open are not: a deadlocked worker that clients keep connecting
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

// Alive tells servery that the handler serving r is making progress,
// though it has written nothing for a while: a handler that computes, or
// waits on purpose (a long poll), for longer than -worker-timeout calls
// it at least once per timeout, or its worker is found hung when nothing
// else it serves moves either. It costs one atomic add; outside a worker
// (direct mode, or a request servery did not accept) it does nothing.
func Alive(r *http.Request) {
	if lc, ok := r.Context().Value(connKey{}).(*limitConn); ok && lc.h1.moved != nil {
		lc.h1.moved.Add(1)
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
// HTTP/2 stream's.
type inflightReq struct {
	r          *http.Request
	epoch      int64 // the epoch it began in
	reported   bool  // look has named it stuck
	prev, next *inflightReq
}

// add puts q, for r, in the set.
func (s *inflight) add(q *inflightReq, r *http.Request) {
	q.r, q.epoch, q.reported = r, s.epoch.Load(), false
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
	q.prev, q.next, q.r = nil, nil, nil
	s.mu.Unlock()
}

// stuckRequest is a request look found running for longer than the
// timeout, for the log.
type stuckRequest struct {
	method, path string
	running      time.Duration // at least
}

// look advances the epoch and returns the requests that have now run for
// at least after, each once, given that an epoch lasts tick. A request
// stamped with epoch e began before e+1 began, so at epoch now it has run
// for at least (now-e-1) ticks.
func (s *inflight) look(tick, after time.Duration) []stuckRequest {
	now := s.epoch.Add(1)
	var found []stuckRequest
	s.mu.Lock()
	defer s.mu.Unlock()
	for q := s.head; q != nil; q = q.next {
		running := time.Duration(now-q.epoch-1) * tick
		if q.reported || running < after {
			continue
		}
		q.reported = true
		found = append(found, stuckRequest{q.r.Method, q.r.URL.Path, running})
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
		last = last.next(srv.stats().Progress, srv.inflight.Load(), every)
		srv.stalled.Store(int64(last.stalled))
		if was < timeout && last.stalled >= timeout {
			rt.sendStats(out)
		}
	}
}

// stallSample is what one look saw: the progress count, the requests in
// flight, and how long the worker has made no progress with requests in
// flight.
type stallSample struct {
	progress, inflight int64
	stalled            time.Duration
}

// next is the sample after s, an interval every later. The worker made
// no progress in between if its count did not move and requests were in
// flight at both ends: each of them answered is progress, so the same
// ones (and maybe more) were stuck throughout.
func (s stallSample) next(progress, inflight int64, every time.Duration) stallSample {
	n := stallSample{progress: progress, inflight: inflight}
	if progress == s.progress && inflight > 0 && s.inflight > 0 {
		n.stalled = s.stalled + every
	}
	return n
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
		rt.log.Warn("request stuck", "method", q.method, "path", q.path, "running_for", q.running, "timeout", timeout)
	}
}
