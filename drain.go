package main

// drain.go is the stop path on both sides. A serving runtime (the direct
// mode's, or a worker's) drains: it stops accepting, lets in-flight
// requests finish within the drain timeout, then closes what remains. The
// parent escalates: it closes every worker's protocol input (its fd 4,
// the drain signal), then terminates survivors at the drain timeout and
// kills them at the force timeout.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// errDrainCut is returned by drain when it ran out of time: connections
// were still open, and were closed, or handlers were still running.
var errDrainCut = errors.New("drain cut short")

// drain stops srv gracefully and blocks until it has: until every
// connection is closed and every handler has returned, so the App's stop
// step, which both modes run next, never runs under a request. The
// listener closes at once; idle connections close; active ones get until
// the drain timeout to finish, or until hurry is cancelled (a second
// signal, or SIGTERM in a worker). Whatever is still open then is closed
// and drain returns errDrainCut at once, without waiting for handlers
// still running: the App's stop then runs beside them, and the force
// deadline bounds it as ever.
//
// HTTP/1 clients are let leave on their own first, since net/http's
// Shutdown is abrupt with three kinds of them. It closes an idle
// keep-alive connection at once, racing a request the client may be
// sending on it; it drops, unanswered, a request it reads after it began,
// which is the first request of a connection accepted just before the
// listener closed; and it closes a connection as soon as its response
// ends, though that response, begun before, did not say Connection:
// close ("such is life with HTTP/1.1", says net/http), so the client may
// already be sending its next request. Go's Transport retries none of
// these when the connection is new, nor does any client for a POST.
//
// So every HTTP/1 response whose header is committed after the drain
// began says Connection: close (drainWriter), and awaitClosed waits until
// each HTTP/1 connection has closed, is sending such a response, after
// which net/http closes it, or has been idle for closeGrace: since the
// drain began, or since its last response ended if that was later. A
// client whose response was under way when the drain began thus gets
// closeGrace after it to send its next request and be answered with
// Connection: close, all within the drain timeout. Those left after that
// are idle or silent, and Shutdown closes them. During a reload, when
// another generation keeps serving the listener, this is what makes a
// retiring worker lose nothing. It has a price: Shutdown is also what
// sends HTTP/2 clients GOAWAY, so they are told to leave only once the
// HTTP/1 clients have been given their chance; until then they are
// served as ever.
//
// Shutdown waits for connections, not handlers: a handler whose HTTP/2
// stream its client reset, or which hijacked its connection, can run on
// after it returned. awaitHandlers waits for those.
//
// Rejected: Server.SetKeepAlivesEnabled(false) when the drain begins,
// which would make net/http mark every response committed after it with
// Connection: close by itself. It also closes idle connections at once
// and closes every connection when its response ends, as Shutdown does:
// the very losses awaitClosed avoids.
func (srv *server) drain(hurry context.Context) error {
	ctx, cancel := context.WithTimeout(hurry, srv.cfg.DrainTimeout)
	defer cancel()
	began := time.Now()
	srv.drainBegan.CompareAndSwap(nil, &began)
	srv.draining.Store(true)
	if ln := srv.ln.Load(); ln != nil {
		(*ln).Close()
		select {
		case <-srv.serving: // no connection is accepted after this
		case <-ctx.Done():
		}
	}
	srv.awaitClosed(ctx)
	if srv.h2base != nil {
		// Before Shutdown: an HTTP/2 connection whose handshake ends
		// after Shutdown began gets its GOAWAY when a stream ends, if
		// the server it is served with (http2Base) says so.
		srv.h2base.SetKeepAlivesEnabled(false)
	}
	err := srv.http.Shutdown(ctx)
	if err == nil {
		err = srv.awaitHandlers(ctx)
	}
	if err == nil {
		return srv.close()
	}
	srv.http.Close()
	srv.close()
	return fmt.Errorf("%w: %w", errDrainCut, err)
}

// closeGrace is how long a drain lets an idle HTTP/1 client leave by
// itself: far more than a keep-alive client needs to send its next
// request and read the answer that closes, far less than a drain.
const closeGrace = time.Second

// awaitClosed blocks until every HTTP/1 connection is closed, answering
// with Connection: close or idle for closeGrace (see drain), or ctx ends.
// No clock is read for it outside a drain: a connection that went idle
// before records no time, and counts as idle since the drain began.
//
// A connection is idle only once the client has its last answer: a
// handler is done when the answer's last byte is in the kernel's send
// buffer, which holds megabytes, so a slow reader may read for seconds
// after it and only then send its next request. While the connection's
// send queue holds bytes (unsent) and shrinks, the client is reading, and
// its grace begins again at each look; once the queue stops shrinking
// (emptied, or a client that stopped reading) the grace runs out as
// ever. Where unsent cannot tell (not Linux), the grace counts from the
// handler's end.
func (srv *server) awaitClosed(ctx context.Context) {
	began := *srv.drainBegan.Load()
	pollUntil(ctx, 2*time.Millisecond, func() bool {
		now := time.Since(began)
		return srv.h1.every(func(c *h1Conn) bool {
			switch idle := c.idleSince.Load(); idle {
			case connClosing:
				return true
			case connBusy:
				return false
			default:
				if n := unsent(c.conn); n > 0 && n != c.unsentSeen {
					c.unsentSeen = n
					c.idleSince.CompareAndSwap(idle, int64(now)) // unless it became busy meanwhile
					return false
				}
				return now-time.Duration(idle) >= closeGrace
			}
		})
	})
}

// awaitHandlers blocks until no handler is running, or ctx ends; it
// returns ctx's error then.
func (srv *server) awaitHandlers(ctx context.Context) error {
	return pollUntil(ctx, 2*time.Millisecond, func() bool { return srv.inflight.Load() == 0 })
}

// What h1Conn.idleSince holds while the connection is not idle.
const (
	// connBusy: it reads a request or answers it, and its answer may
	// not say Connection: close.
	connBusy = -1
	// connClosing: its answer says Connection: close, since the handler
	// committed the header during the drain; net/http closes the
	// connection once it is sent.
	connClosing = -2
)

// h1Conn is what a drain knows of one connection. It lives in the
// limitConn that serve's listener wraps every connection in; trackConns
// keeps it up to date, and server.h1 lists it while the connection speaks
// HTTP/1.
type h1Conn struct {
	// idleSince is when the connection went idle, as time since the
	// drain began, or 0 if that was before (or it is new and silent);
	// connBusy or connClosing while a request is read or answered.
	idleSince atomic.Int64
	// w answers every HTTP/1 request on the connection. HTTP/1 answers
	// one request at a time, so one writer per connection serves them all
	// and no request allocates one.
	w drainWriter
	// conn is the TCP connection, whose send queue awaitClosed reads;
	// unsentSeen is what it read there last (awaitClosed's alone, under
	// the set's lock).
	conn       net.Conn
	unsentSeen int
	// Progress (progress.go): req is its HTTP/1 request in flight, in the
	// server's set; progress counts what its requests moved (the stuck
	// rule's, per connection); prog is the server's counts, nil where
	// the parent does not probe; h2 is set once it speaks HTTP/2, whose
	// progress its streams count.
	req      inflightReq
	progress atomic.Int64
	prog     *progressCounts
	h2       atomic.Bool
}

// h1Conns is the set of open HTTP/1 connections, which awaitClosed looks
// over. A connection joins it and leaves it under the lock; a request
// never takes the lock.
type h1Conns struct {
	mu sync.Mutex
	m  map[*h1Conn]struct{}
}

func (s *h1Conns) add(c *h1Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[*h1Conn]struct{})
	}
	s.m[c] = struct{}{}
}

// remove takes c out of the set; it may be out already.
func (s *h1Conns) remove(c *h1Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, c)
}

// every reports whether ok holds for every connection in the set. It
// holds the lock meanwhile, so ok must not block.
func (s *h1Conns) every(ok func(*h1Conn) bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.m {
		if !ok(c) {
			return false
		}
	}
	return true
}

// connKey is the context key under which serve's connection context
// holds the connection's *limitConn, for counting to find its h1Conn
// and whether it was evicted.
type connKey struct{}

// connContext gives each connection's requests its limitConn.
func (srv *server) connContext(ctx context.Context, c net.Conn) context.Context {
	lc := asLimitConn(c)
	if lc == nil {
		return ctx
	}
	lc.h1.w.draining, lc.h1.w.conn = &srv.draining, &lc.h1
	return context.WithValue(ctx, connKey{}, lc)
}

// drainWriter is the writer of an HTTP/1 response. When its handler
// commits the header after the drain began, whenever the handler began,
// it adds Connection: close, so the client learns from the answer itself
// not to send another request on the connection. A handler commits the
// header by WriteHeader with a final status, by its first write, flush or
// hijack, or, having written nothing, by returning (counting calls done).
// A header that a handler committed before the drain but net/http sends
// after it goes without; awaitClosed covers that connection as one whose
// response was under way.
//
// It passes on what net/http's writer offers that handlers look for:
// io.ReaderFrom, so files still go out by sendfile; io.StringWriter;
// http.Flusher and FlushError, which ResponseController prefers;
// http.Hijacker; and Unwrap for ResponseController's other methods. Not
// http.CloseNotifier, deprecated since Go 1.11 in favour of the request's
// context.
//
// One drainWriter serves every request of its connection, one at a time:
// counting points it at each request's writer in turn, and away from it
// once the handler returns. A handler that uses its writer after it
// returned, which net/http forbids, gets an error until the next request
// begins; after that it would write into the next response.
//
// Rejected: a check at the start of the handler alone, which leaves a
// response begun before the drain, and committed after, without
// Connection: close; and a writer allocated per request, since the hot
// path allocates nothing.
type drainWriter struct {
	http.ResponseWriter
	draining  *atomic.Bool // the server's; set once per connection
	conn      *h1Conn      // the connection this writer belongs to
	committed bool
	hijacked  bool // its handler hijacked the connection, and counts in prog.hijacked
	status    int  // the final status it sent, for the request metrics; 0 until committed
}

// answer points the connection's writer at w, the writer of a request
// that begins, and returns it.
func (c *h1Conn) answer(w http.ResponseWriter) *drainWriter {
	c.w.ResponseWriter, c.w.committed, c.w.status = w, false, 0
	return &c.w
}

// done ends the request: it commits the header if the handler did not,
// and points the writer away from the request's.
func (d *drainWriter) done() {
	d.commit()
	d.ResponseWriter = returnedWriter{}
	if d.hijacked {
		d.hijacked = false
		d.conn.prog.hijacked.Add(-1)
	}
}

// commit sets the Date (stampDate), and adds Connection: close to the
// header during a drain, the first time it is called for a request, and
// tells awaitClosed that the client needs no more time.
func (d *drainWriter) commit() {
	if d.committed {
		return
	}
	d.committed = true
	if d.status == 0 {
		d.status = http.StatusOK // a write before any WriteHeader
	}
	h := d.ResponseWriter.Header()
	stampDate(h)
	if d.draining.Load() {
		h["Connection"] = hdrClose
		d.conn.idleSince.Store(connClosing)
	}
}

func (d *drainWriter) WriteHeader(code int) {
	switch {
	case code == http.StatusSwitchingProtocols:
		d.committed = true // its Connection: Upgrade must stand
		d.status = code
	case code >= 200:
		if !d.committed {
			d.status = code
		}
		d.commit()
	}
	d.ResponseWriter.WriteHeader(code)
}

func (d *drainWriter) Write(b []byte) (int, error) {
	d.commit()
	return d.ResponseWriter.Write(b)
}

func (d *drainWriter) WriteString(s string) (int, error) {
	d.commit()
	return io.WriteString(d.ResponseWriter, s)
}

// ReadFrom keeps the sendfile path of the writer underneath.
func (d *drainWriter) ReadFrom(r io.Reader) (int64, error) {
	d.commit()
	if rf, ok := d.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{d.ResponseWriter}, r)
}

func (d *drainWriter) Flush() { d.FlushError() }

func (d *drainWriter) FlushError() error {
	d.commit()
	return http.NewResponseController(d.ResponseWriter).Flush()
}

func (d *drainWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	d.committed = true // net/http writes no header on a hijacked connection
	conn, rw, err := http.NewResponseController(d.ResponseWriter).Hijack()
	if err == nil && d.conn.prog != nil && !d.hijacked {
		// The connection is the program's now: its handler's silence on
		// it is no stall of the serving path (progress.go).
		d.hijacked = true
		d.conn.prog.hijacked.Add(1)
		d.conn.req.hijacked.Store(true)
	}
	return conn, rw, err
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (d *drainWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// errHandlerReturned is what a handler's writer answers once the handler
// has returned.
var errHandlerReturned = errors.New("response writer used after its handler returned")

// returnedWriter is a drainWriter's writer between requests.
type returnedWriter struct{}

func (returnedWriter) Header() http.Header       { return http.Header{} }
func (returnedWriter) Write([]byte) (int, error) { return 0, errHandlerReturned }
func (returnedWriter) WriteHeader(int)           {}

// pollUntil blocks until done reports true, checked every interval, or
// ctx ends; it returns ctx's error in that case. A drain polls counters
// that every connection or request updates, rather than have each of them
// signal: a drain is rare, requests are not.
func pollUntil(ctx context.Context, interval time.Duration, done func() bool) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !done() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// escalate is the parent's stop: it blocks until every worker is reaped or
// the final deadline passes, and returns an error naming any worker still
// alive then. The deadlines are measured from began. drain is how long
// workers get to finish on their own; a closed s.hurry ends it early.
//
// All workers are waited on together, never one after another, so the
// stop takes as long as the slowest worker, not the sum.
func (s *Supervisor) escalate(began time.Time, drain time.Duration) error {
	force := s.cfg.ForceTimeout - s.cfg.DrainTimeout + drain
	if drain == 0 {
		// A rollback before commit: no worker accepts, so there is nothing
		// to drain, and terminating them all at once is the plan, not a
		// worker outliving a deadline.
		s.log.Info("terminating every worker: nothing to drain before commit", "workers", len(s.survivors()), "kill_after", force)
	} else {
		s.log.Info("stop begun", "workers", len(s.survivors()), "terminate_after", drain, "kill_after", force)
	}
	for _, p := range s.all {
		p.stdin.Close() // EOF is the drain signal
	}
	stages := []struct {
		at     time.Duration
		hurry  <-chan struct{}
		signal os.Signal
		action string
	}{
		{drain, s.hurry, syscall.SIGTERM, "terminate"},
		{force, nil, syscall.SIGKILL, "kill"},
	}
	for _, st := range stages {
		if s.waitReaped(began.Add(st.at), st.hurry) {
			s.logExits()
			return nil
		}
		s.signalSurvivors(st.signal, st.action, st.at > 0)
	}
	if s.waitReaped(time.Now().Add(finalGrace), nil) {
		s.logExits()
		return nil
	}
	return s.survivorsError()
}

// finalGrace is how long the parent waits after SIGKILL before it reports
// a survivor: the kernel needs a moment to tear a process down.
const finalGrace = time.Second

// waitReaped blocks until every worker is reaped (true), or until deadline
// passes or hurry closes (false, unless the last exit came at that very
// moment: select picks at random among ready cases).
func (s *Supervisor) waitReaped(deadline time.Time, hurry <-chan struct{}) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for _, p := range s.all {
		select {
		case <-p.exited:
		case <-timer.C:
			return len(s.survivors()) == 0
		case <-hurry:
			return len(s.survivors()) == 0
		}
	}
	return true
}

// signalSurvivors sends sig to the process group of every worker not yet
// reaped. Each worker leads its own session, so the signal reaches its
// descendants too. overdue says the survivors outlived a deadline they
// were given, which is worth a warning each; otherwise the signal was the
// plan from the start. A group that is gone (ESRCH) is no failure: its
// worker exited, and was reaped, between survivors' look and the signal.
func (s *Supervisor) signalSurvivors(sig os.Signal, action string, overdue bool) {
	for _, p := range s.survivors() {
		if overdue {
			s.log.Warn("worker outlived deadline", "worker", p.index, "pid", p.pid, "action", action)
		}
		if err := s.seam.signal(p, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			s.log.Warn("signal failed", "worker", p.index, "pid", p.pid, "signal", sig, "err", err)
		}
	}
}

// survivors returns the workers not yet reaped.
func (s *Supervisor) survivors() []*workerProc {
	var alive []*workerProc
	for _, p := range s.all {
		select {
		case <-p.exited:
		default:
			alive = append(alive, p)
		}
	}
	return alive
}

// errSurvived is wrapped by the error that names survivors of a stop.
var errSurvived = errors.New("survived the kill deadline")

// survivorsError names every worker still alive after the final deadline.
func (s *Supervisor) survivorsError() error {
	var names []string
	for _, p := range s.survivors() {
		names = append(names, fmt.Sprintf("worker %d (pid %d)", p.index, p.pid))
	}
	return fmt.Errorf("stop: %s %w", strings.Join(names, ", "), errSurvived)
}

// logExits logs how each reaped worker exited.
func (s *Supervisor) logExits() {
	for _, p := range s.all {
		s.log.Info("worker exited", "worker", p.index, "pid", p.pid, "status", exitStatus(p.status))
	}
}

// exitStatus describes cmd.Wait's result for a log line.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
