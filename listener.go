package main

import (
	"crypto/tls"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener wraps a worker's listener: it caps open connections, paces
// accepts when several workers share the socket, and counts what it
// accepts.
//
// The cap holds Accept while every slot is taken by a connection that is
// not idle, so excess clients wait in the kernel's accept queue (or go to
// another worker) instead of being accepted and starved; once one is
// idle, the next client is accepted and the connection idle longest is
// closed to make room for it (evict.go).
//
// Pacing is for balance. Every worker's netpoller waits on the one shared
// socket, and a new connection wakes them all (Go cannot ask epoll for
// EPOLLEXCLUSIVE); whichever runs first accepts until the queue is empty,
// so a burst of keep-alive connections lands on one or two workers and
// stays there. Before each accept a worker with open connections sleeps
// for pace times that number, which lets a less loaded worker take the
// next one. A worker with none never waits, so an idle generation answers
// at once, and the direct mode (pace 0) is untouched.
//
// Rejected: one SO_REUSEPORT socket per worker, bound by the parent. The
// kernel would spread connections by hash, but a worker that exits takes
// the connections queued on its socket down with it (reset, not handed to
// another worker), so every drain and every lost worker would reset
// clients; it also lets any process of the same user bind into the group.
// Rejected: blocking accept in each worker, which the kernel wakes one at a
// time, because the shared socket must stay non-blocking for the others.
type limitListener struct {
	net.Listener
	slots chan struct{} // nil: unlimited
	pace  time.Duration // 0: no pacing
	// writeTimeout closes a connection whose writes make no progress for
	// this long; 0: never.
	writeTimeout time.Duration
	open         atomic.Int64
	accepted     *atomic.Int64
	prog         *progressCounts // the server's progress counts (progress.go); nil: none
	// readSpan is the header timeout, the read deadline net/http sets as
	// each request begins, which a read deadline put on later takes as its
	// longest step (readdeadline.go); 0: none.
	readSpan  time.Duration
	closed    chan struct{}
	closeOnce sync.Once
	// idle is how the cap makes room (evict.go); unused without a cap.
	idle idleConns
}

// acceptPace is the pause per open connection that a worker takes before
// it accepts another, when several workers share the socket; measured in
// bench/run.sh's balance section.
const acceptPace = 20 * time.Microsecond

// maxAcceptPause bounds one pause, so a busy worker still accepts when the
// others are full or gone.
const maxAcceptPause = 2 * time.Millisecond

func newLimitListener(ln net.Listener, maxConns int, pace, writeTimeout time.Duration, accepted *atomic.Int64) *limitListener {
	l := &limitListener{Listener: ln, pace: pace, writeTimeout: writeTimeout, accepted: accepted, closed: make(chan struct{})}
	if maxConns > 0 {
		l.slots = make(chan struct{}, maxConns)
		l.idle = idleConns{conns: make(map[*limitConn]struct{}), wake: make(chan struct{}, 1)}
	}
	return l
}

// Accept blocks until a slot is free, the pause is over and a connection
// arrives, or the listener is closed. While every slot is taken and a
// connection is idle, it accepts without a slot and then makes room by
// closing the connection idle longest (evict.go).
func (l *limitListener) Accept() (net.Conn, error) {
	evict, err := l.awaitSlot()
	if err != nil {
		return nil, err
	}
	if err := l.pause(); err != nil {
		if !evict {
			l.release()
		}
		return nil, err
	}
	c, err := l.Listener.Accept()
	if err != nil {
		if !evict {
			l.release()
		}
		return nil, err
	}
	if evict {
		if err := l.makeRoom(); err != nil {
			c.Close()
			return nil, err
		}
	}
	l.accepted.Add(1)
	l.open.Add(1)
	lc := &limitConn{Conn: c, ln: l, writeTimeout: l.writeTimeout}
	lc.rd.span = int64(l.readSpan)
	lc.h1.conn, lc.h1.prog = c, l.prog
	l.idle.add(lc)
	return lc, nil
}

// pause sleeps pace per open connection, at most maxAcceptPause.
func (l *limitListener) pause() error {
	n := l.open.Load()
	if l.pace == 0 || n == 0 {
		return nil
	}
	t := time.NewTimer(min(time.Duration(n)*l.pace, maxAcceptPause))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-l.closed:
		return net.ErrClosed
	}
}

// release gives back a slot.
func (l *limitListener) release() {
	if l.slots != nil {
		<-l.slots
	}
}

// connClosed accounts for c, closed.
func (l *limitListener) connClosed(c *limitConn) {
	l.idle.remove(c)
	l.open.Add(-1)
	l.release()
}

// Close unblocks an Accept waiting for a slot or a pause, then closes the
// listener.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitConn gives its slot back once, however often it is closed, and
// keeps a client that stops reading from holding it for ever: every chunk
// of at most writeChunk bytes must be taken by the client within the
// write timeout, as nginx's send_timeout bounds the time between two
// successive writes. A slow but steady reader is therefore never cut, while
// one that stops reading is cut within writeTimeout.
//
// A large write or sendfile re-arms the deadline for each chunk. A small
// write re-arms it only once half of it is used up, so a busy connection
// pays for a clock read per response, not a timer reset; such a write
// starts with at least half of the timeout.
//
// net/http and crypto/tls set and clear write deadlines of their own
// (after every response, after the handshake): SetDeadline and
// SetWriteDeadline note what they set, so the next write re-arms ours
// rather than trusting a deadline that is no longer there.
type limitConn struct {
	net.Conn
	once         sync.Once
	ln           *limitListener // whose slot it holds
	writeTimeout time.Duration
	deadline     atomic.Int64 // UnixNano of the write deadline in force; 0: none
	// ours: the deadline in force is one a write armed, not one that
	// net/http or crypto/tls set (for a TLS handshake: the header
	// timeout), which a clear must really clear.
	ours atomic.Bool
	rd   lazyRead // the read deadline (readdeadline.go)
	h1   h1Conn   // what a drain knows of it (drain.go)
	// idle says whether the cap may close it to make room (evict.go):
	// notIdle, an idle sequence number, or connEvicted.
	idle atomic.Int64
}

// writeChunk is the most one write or sendfile call may send before the
// write deadline is checked again. 64 KiB keeps the promise "no progress
// for this long" for readers down to 128 KiB per write timeout, and costs
// a sendfile call per 64 KiB, which is nothing next to copying it.
const writeChunk = 64 << 10

func (c *limitConn) Write(b []byte) (int, error) {
	if c.writeTimeout <= 0 && c.h1.prog == nil {
		return c.Conn.Write(b)
	}
	forRequest := c.forRequest()
	if forRequest {
		c.h1.prog.waits(1)
		defer c.h1.prog.waits(-1)
	}
	if len(b) <= writeChunk {
		c.armWrite()
		n, err := c.Conn.Write(b)
		c.moved(forRequest, int64(n))
		return n, err
	}
	var total int
	for len(b) > 0 {
		c.rearmWrite()
		chunk := b[:min(len(b), writeChunk)]
		n, err := c.Conn.Write(chunk)
		c.moved(forRequest, int64(n))
		total += n
		if err != nil {
			return total, err
		}
		b = b[n:]
	}
	return total, nil
}

// forRequest reports whether a write now is on an HTTP/1 request's
// behalf, which progress.go counts, in a worker the parent probes: the
// connection has a request open, or was hijacked by one. A TLS
// handshake is not, nor an idle connection's write; an HTTP/2
// connection's progress is its streams' (streamWriter), not its
// frames'. Such a write, while it blocks, waits on the client.
func (c *limitConn) forRequest() bool {
	return c.h1.prog != nil && c.h1.idleSince.Load() < 0 && !c.h1.h2.Load()
}

// moved counts n bytes written on a request's behalf as progress.
func (c *limitConn) moved(forRequest bool, n int64) {
	if forRequest && n > 0 {
		c.h1.progressed()
	}
}

// ReadFrom keeps net/http's sendfile path for large files, which an
// embedded net.Conn would hide, and sends in chunks so a slow but steady
// reader is not cut off by a deadline set for the whole file, and each
// chunk the kernel takes is progress.
func (c *limitConn) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := c.Conn.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{c}, r)
	}
	if c.writeTimeout <= 0 && c.h1.prog == nil {
		return rf.ReadFrom(r)
	}
	forRequest := c.forRequest()
	if forRequest {
		c.h1.prog.waits(1)
		defer c.h1.prog.waits(-1)
	}
	src, remain := r, int64(math.MaxInt64)
	outer, limited := r.(*io.LimitedReader)
	if limited {
		src, remain = outer.R, outer.N // one level, so sendfile still sees the file
	}
	var total int64
	for remain > 0 {
		c.rearmWrite()
		want := min(remain, writeChunk)
		n, err := rf.ReadFrom(&io.LimitedReader{R: src, N: want})
		c.moved(forRequest, n)
		total, remain = total+n, remain-n
		if limited {
			outer.N -= n
		}
		if err != nil || n < want {
			return total, err
		}
	}
	return total, nil
}

// armWrite moves the write deadline writeTimeout ahead once less than half
// of it is left, or when there is none; nothing without a write timeout.
func (c *limitConn) armWrite() {
	if c.writeTimeout <= 0 {
		return
	}
	if d := c.deadline.Load(); d != 0 && time.Until(time.Unix(0, d)) > c.writeTimeout/2 {
		return
	}
	c.rearmWrite()
}

// rearmWrite moves the write deadline writeTimeout ahead; nothing
// without a write timeout.
func (c *limitConn) rearmWrite() {
	if c.writeTimeout <= 0 {
		return
	}
	d := time.Now().Add(c.writeTimeout)
	c.deadline.Store(d.UnixNano())
	c.ours.Store(true)
	c.Conn.SetWriteDeadline(d)
}

// SetWriteDeadline sets t and remembers it, so armWrite sees a moved
// deadline. Clearing one of ours (a zero t) keeps it in force instead:
// net/http clears the write deadline after every response, and the next
// write would arm ours again anyway, so keeping it spares each keep-alive
// response two deadline updates in the runtime's timers (a CPU profile
// against bare net/http showed them on the hot path). A write after a
// clear therefore still gets at least half the write timeout, as any
// write does. A deadline someone else set is cleared for real: kept, the
// TLS handshake's (the header timeout) bounded a client that stopped
// reading instead of the write timeout, since armWrite trusts a deadline
// with more than half the write timeout left. Hijacking clears both
// deadlines through SetDeadline, which passes a zero t on, so a hijacked
// connection inherits none.
func (c *limitConn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() && c.writeTimeout > 0 && c.ours.Load() {
		return nil
	}
	c.noteDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *limitConn) noteDeadline(t time.Time) {
	var d int64
	if !t.IsZero() {
		d = t.UnixNano()
	}
	c.deadline.Store(d)
	c.ours.Store(false)
}

// CloseWrite passes the connection's half-close through, which the
// embedded net.Conn would hide: net/http closes a connection it will not
// read again (after a 431, or a large body it will not read) by sending
// FIN first and lingering, so the client reads the whole answer; without
// it, the close discards unread input and the kernel sends a reset, which
// can destroy the answer before a client reads it.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.ln.connClosed(c) })
	return err
}

// bodies bounds the wait for each request body's next bytes by
// -body-timeout, as nginx's client_body_timeout does: a body that makes no
// progress for that long is cut. net/http has no such bound (ReadTimeout
// would bound the whole request, a long upload included), so a client
// that declared Content-Length: 100, sent 5 bytes and stalled held its
// connection for ever: before it answers, net/http reads what is left of
// a body the handler did not read, to keep the connection alive, with no
// read deadline. The request's read deadline is armed before the handler
// runs over HTTP/1 (bounding that discard when the handler answers
// without reading), before each read of the body (with limitConn's
// half-used rule), and once more over HTTP/1 when the handler returns
// with the body unread, for the discard that follows; it is cleared when
// the body ends, before net/http starts the background read that watches
// for a closed connection, which no deadline may cut. The HTTP/2 server
// discards nothing (once it has answered, it resets a stream whose body
// has not ended), so there the deadline waits for the first read: a GET's
// body is not http.NoBody over HTTP/2, and each future deadline is a
// message to the connection's serve goroutine and a timer, which, armed
// around the handler, cost every HTTP/2 request 8% of its CPU time.
// Requests without a body pass straight through, allocation-free; one
// with a body costs one allocation over HTTP/1 and none over HTTP/2 (its
// reader lives in the stream's writer).
//
// Over HTTP/1 the handler gets a shallow copy of the request with the
// wrapped body (bodyOf); net/http's own request keeps the body net/http
// gave it, because after the handler it looks at that body's type to
// decide what to do with what is left unread. Replaced there, the body
// hid net/http's
// expectContinueReader: a request with Expect: 100-continue whose handler
// answered without reading got no answer until the client, waiting for
// 100 Continue, gave up waiting and sent its body, or -body-timeout
// passed; with the body it knows, net/http closes after answering, as
// bare net/http does. It also decides again, as bare net/http does, that
// a body with 256 KiB or more unread is not worth discarding.
//
// In a worker the parent probes, the reader also counts each read that
// brings bytes as the request's progress, and the time a read blocks as
// waiting on the client (progress.go), with or without a timeout.
func (srv *server) bodies(h http.Handler) http.Handler {
	timeout := srv.cfg.BodyTimeout
	if timeout <= 0 && !srv.track {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if noBody(r) {
			h.ServeHTTP(w, r)
			return
		}
		b, req := srv.bodyOf(w, r)
		*b = bodyReader{ReadCloser: r.Body, rc: *http.NewResponseController(w), timeout: timeout}
		if srv.track {
			b.prog, b.request = progressOf(w, r)
		}
		req.Body = b
		discards := !servedByHTTP2(r)
		if discards {
			b.arm()
		}
		h.ServeHTTP(w, req)
		// net/http removes the temporary files of a multipart form the
		// handler parsed from its own request only.
		r.MultipartForm = req.MultipartForm
		if discards && !b.ended {
			b.deadline = time.Time{}
			b.arm()
		}
	})
}

// noBody reports whether r has no body to read. net/http gives an HTTP/1
// request without one http.NoBody, but every HTTP/2 request a reader of
// its own, which returns io.EOF at once when the client ended the stream
// with its headers (a GET, mostly): no read of it can block, and it needs
// neither deadline nor count. Such a request has ContentLength 0; one
// whose stream stays open has -1 without a Content-Length header, and
// what the header says with one (net/http's newWriterAndRequest). So only
// ContentLength 0 with no header is taken for no body; an ended stream
// that declares 0 (Go's client does, for an empty POST) is wrapped, which
// costs a little and is safe.
func noBody(r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	_, declared := r.Header["Content-Length"]
	return r.ProtoMajor == 2 && r.ContentLength == 0 && !declared
}

// bodyOf returns where r's body reader goes and the request the handler
// gets with it. Over HTTP/1 that is a copy of r (see bodies), allocated
// with the reader. Over HTTP/2 it is r itself, as http.MaxBytesReader's
// callers do: the HTTP/2 server looks at a request's body only before the
// handler, and the reader goes in the stream's writer, so an HTTP/2
// request costs one allocation, not two.
func (srv *server) bodyOf(w http.ResponseWriter, r *http.Request) (*bodyReader, *http.Request) {
	if sw, ok := w.(*streamWriter); ok {
		return &sw.body, r
	}
	br := &bodyRequest{req: *r}
	return &br.body, &br.req
}

// bodyRequest is the handler's copy of a request with a body, and the
// reader that wraps the body, allocated together.
type bodyRequest struct {
	req  http.Request
	body bodyReader
}

// bodyReader arms its request's read deadline before each read.
type bodyReader struct {
	io.ReadCloser
	rc       http.ResponseController
	timeout  time.Duration // 0: none
	deadline time.Time     // armed last; zero: none
	ended    bool          // read to its end
	// What its reads count as progress (progress.go): its server's, and
	// its request's; nil: not counted.
	prog    *progressCounts
	request *atomic.Int64
}

func (b *bodyReader) Read(p []byte) (int, error) {
	b.arm()
	b.prog.waits(1)
	n, err := b.ReadCloser.Read(p)
	b.prog.waits(-1)
	if n > 0 && b.prog != nil {
		b.request.Add(1)
		b.prog.moved.Add(1)
	}
	if err == io.EOF && !b.ended {
		b.ended = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// arm moves the read deadline timeout ahead once less than half of it
// is left.
func (b *bodyReader) arm() {
	if b.timeout <= 0 {
		return
	}
	now := time.Now()
	if b.ended || !b.deadline.IsZero() && b.deadline.Sub(now) > b.timeout/2 {
		return
	}
	b.deadline = now.Add(b.timeout)
	b.rc.SetReadDeadline(b.deadline)
}

// streams bounds each HTTP/2 response (-write-timeout) the way limitConn bounds an
// HTTP/1 connection. An HTTP/2 client can keep reading TCP while it never
// sends WINDOW_UPDATE: no socket write then blocks, so the connection's
// deadline never fires, the handler waits on flow control, and the idle
// timeout does not apply while a stream is open. The stream's own write
// deadline is what bounds that: net/http's HTTP/2 server resets the stream
// when it passes, which unblocks the handler.
//
// net/http arms that deadline itself as it opens the stream (http2Base),
// a write timeout ahead, and it covers the flush net/http does when the
// handler returns. Over the handler the writer moves it: before and after
// each chunk of at most writeChunk bytes, with limitConn's half-used rule,
// so a slow but steady reader is never cut; and, when the server's holds
// visit it, whenever the handler is not waiting on the client, so a
// handler that computes, or pauses between writes (a server-sent event
// stream), is not cut for it. Each move is a message to the connection's serve goroutine,
// so the rules matter: a response that takes less than a quarter of the
// write timeout sends none. HTTP/1 requests pass straight through,
// allocation-free.
//
// In a worker the parent probes, the writer also counts each write and
// flush that returns as the request's progress, and the time one blocks
// (on flow control, mostly) as waiting on the client (progress.go), with
// or without a timeout. Every stream gets the writer, timeout or not: it
// also keeps the status sent, for the request metrics (reqmetrics.go),
// and whether one was, for a panic's answer.
func (srv *server) streams(h http.Handler) http.Handler {
	timeout := srv.cfg.WriteTimeout
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dl, ok := w.(writeDeadliner)
		if !servedByHTTP2(r) || !ok {
			h.ServeHTTP(w, r)
			return
		}
		sw := &streamWriter{ResponseWriter: w, dl: dl, timeout: timeout}
		if srv.track {
			sw.prog = &srv.prog
		}
		if timeout > 0 {
			sw.deadline = time.Now().Add(timeout) // net/http's, armed a hair before
			srv.holds.add(sw)
			// Deferred: a visit that moved the deadline after a panic
			// ended the handler would reach a stream net/http let go of.
			defer srv.holds.remove(sw)
		}
		h.ServeHTTP(sw, r)
	})
}

// http2Base has net/http's HTTP/2 server arm each stream's write deadline
// itself, -write-timeout ahead, as it opens the stream in the connection's
// serve goroutine. Armed from the handler, the same deadline is a message
// to that goroutine and a wake-up of it: about 8% of the CPU time of a
// 1 KiB HTTP/2 request (h2load, one core), for a deadline almost no
// response comes near. net/http takes a stream's write timeout from the
// http.Server its h2 TLSNextProto hook is handed, and the server itself
// cannot carry one: net/http would then also set an HTTP/1 connection's
// write deadline per request, over limitConn's, and the TLS handshake's.
// So the hook, which net/http installs when Serve first runs, is
// installed here by a Serve on a listener that refuses at once, and
// wrapped to hand HTTP/2 connections a copy of the server's HTTP/2
// settings that has the write timeout. The copy is also what a request's
// http.ServerContextKey holds over HTTP/2, and what net/http asks whether
// the server is shutting down when an HTTP/2 stream ends, so drain tells
// it too: that is how a connection whose handshake ends after Shutdown
// began is told to go, Shutdown's own GOAWAY having gone to those it
// knew. Without net/http's HTTP/2 server (GODEBUG=http2server=0) there is
// no hook, and the server stops offering h2: a client that chose it would
// finish its handshake and get no answer.
func (srv *server) http2Base() {
	hs := srv.http
	hs.Serve(refusingListener{}) // net/http installs its HTTP/2 hook first
	serveH2 := hs.TLSNextProto["h2"]
	if serveH2 == nil {
		hs.TLSConfig.NextProtos = slices.DeleteFunc(slices.Clone(hs.TLSConfig.NextProtos), func(p string) bool { return p == "h2" })
		return
	}
	if srv.cfg.WriteTimeout <= 0 {
		return
	}
	base := &http.Server{
		WriteTimeout:   srv.cfg.WriteTimeout,
		MaxHeaderBytes: hs.MaxHeaderBytes,
		ConnState:      hs.ConnState,
		ErrorLog:       hs.ErrorLog,
		HTTP2:          hs.HTTP2,
	}
	hs.TLSNextProto["h2"] = func(_ *http.Server, c *tls.Conn, h http.Handler) {
		serveH2(base, c, h)
	}
	srv.h2base = base
}

// refusingListener fails every Accept, so Serve returns at once.
type refusingListener struct{}

func (refusingListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (refusingListener) Close() error              { return nil }
func (refusingListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// writeDeadliner is what net/http's HTTP/2 response writer offers for
// http.ResponseController.SetWriteDeadline.
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// streamWriter moves its stream's write deadline: before and after each
// chunk of at most writeChunk bytes, and when the server's holds visit it
// while the handler is not waiting on the client. The handler's goroutine
// and a visit's move share the deadline under mu.
type streamWriter struct {
	http.ResponseWriter
	dl      writeDeadliner
	timeout time.Duration // 0: none

	mu       sync.Mutex
	deadline time.Time // in force, as far as the writer knows
	waiting  bool      // a write or flush is under way
	moving   bool      // a visit's move is under way (holdOff)
	gone     bool      // the handler has returned: no move may reach it
	// Its place in the server's holds, while its handler runs.
	prev, next *streamWriter
	body       bodyReader // its request's, when it has one (server.bodies)
	// Its progress (progress.go): the server's counts, nil where the
	// parent does not probe; its own, which names it stuck or not; and
	// its place in the set of requests in flight.
	prog     *progressCounts
	progress atomic.Int64
	req      inflightReq
	// committed: the header may have gone out (a Write, a Flush, a final
	// WriteHeader), so a panic can no longer be answered 500; status is
	// the status it sent, for the request metrics.
	committed bool
	status    int
}

// due reports whether a visit at now must move the deadline: three
// quarters of the write timeout or less is left, and no write or flush
// waits on the client (that one the deadline must be free to cut). It
// marks the move under way, so a stream gets one at a time. A visit comes
// every quarter, so the deadline moves with at least half left, as far as
// the writer knows; since net/http armed it as the stream opened, before
// the writer's begin, a handler that net/http started up to half a write
// timeout late (behind others, on a busy box) is not cut either. It only
// tries mu: a handler's arm holds it while its message waits on the
// connection, and a write under way needs no move.
func (s *streamWriter) due(now time.Time) bool {
	if !s.mu.TryLock() {
		return false
	}
	defer s.mu.Unlock()
	if s.gone || s.moving || s.waiting || s.deadline.Sub(now) > s.timeout*3/4 {
		return false
	}
	s.moving = true
	return true
}

// holdOff moves the deadline a write timeout ahead, unless the handler
// returned or began a write since the visit found it due. It runs on a
// goroutine of its own: its message waits on the connection's serve
// goroutine, which can be stuck for a write timeout (closing the TLS
// connection of a client that stopped reading), and no other stream may
// wait with it.
func (s *streamWriter) holdOff() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.moving = false
	if s.gone || s.waiting {
		return
	}
	s.move(time.Now())
}

// move sets the deadline a write timeout past now; mu is held.
func (s *streamWriter) move(now time.Time) error {
	s.deadline = now.Add(s.timeout)
	return s.dl.SetWriteDeadline(s.deadline)
}

// streamHolds is the set of HTTP/2 handlers running under a write timeout.
// One timer visits them every quarter of it and starts a move of each
// deadline that is due; the timer runs only while the set is not empty. A
// timer per handler would do the same, at the cost of starting and
// stopping it for every response, which a CPU profile showed to be as
// dear as the message it saves. The set's lock is held only to add, to
// remove and to find who is due, never over a move: a connection slow to
// take a message holds up no other.
type streamHolds struct {
	mu     sync.Mutex
	head   *streamWriter
	period time.Duration
	timer  *time.Timer
	armed  bool // the timer will visit
}

// add puts s in the set, and arms the timer if it is not.
func (h *streamHolds) add(s *streamWriter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.next = h.head
	if h.head != nil {
		h.head.prev = s
	}
	h.head = s
	if h.armed {
		return
	}
	h.armed = true
	if h.timer == nil {
		h.timer = time.AfterFunc(h.period, h.visit)
	} else {
		h.timer.Reset(h.period)
	}
}

// remove takes s out of the set as its handler returns. It waits for a
// move under way, and marks s gone so none begins after: net/http reuses
// the stream's writer once the handler has returned.
func (h *streamHolds) remove(s *streamWriter) {
	h.mu.Lock()
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		h.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	}
	s.prev, s.next = nil, nil
	h.mu.Unlock()
	s.mu.Lock()
	s.gone = true
	s.mu.Unlock()
}

// visit starts a move of each deadline in the set that is due, and comes
// again if the set is not empty.
func (h *streamHolds) visit() {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	for s := h.head; s != nil; s = s.next {
		if s.due(now) {
			go s.holdOff()
		}
	}
	if h.head == nil {
		h.armed = false
		return
	}
	h.timer.Reset(h.period)
}

func (s *streamWriter) WriteHeader(code int) {
	if (code >= 200 || code == http.StatusSwitchingProtocols) && !s.committed {
		s.commit(code)
	}
	s.ResponseWriter.WriteHeader(code)
}

// commit notes that the header goes out now, with status code, and sets
// its Date (stampDate).
func (s *streamWriter) commit(code int) {
	s.committed, s.status = true, code
	stampDate(s.ResponseWriter.Header())
}

func (s *streamWriter) Write(b []byte) (int, error) {
	if !s.committed {
		s.commit(http.StatusOK)
	}
	var total int
	for {
		if err := s.arm(); err != nil {
			return total, err
		}
		chunk := b[:min(len(b), writeChunk)]
		s.prog.waits(1)
		n, err := s.ResponseWriter.Write(chunk)
		s.prog.waits(-1)
		s.settle()
		if n > 0 {
			s.progressed()
		}
		total += n
		b = b[n:]
		if err != nil || len(b) == 0 {
			return total, err
		}
	}
}

// Flush keeps http.Flusher, which the HTTP/2 writer has, visible; it is
// bounded like a write, since it waits on flow control too.
func (s *streamWriter) Flush() {
	if !s.committed {
		s.commit(http.StatusOK)
	}
	f, ok := s.ResponseWriter.(http.Flusher)
	if !ok {
		return
	}
	s.arm()
	s.prog.waits(1)
	f.Flush()
	s.prog.waits(-1)
	s.settle()
	s.progressed()
}

// arm moves the deadline timeout ahead once less than half of it is left,
// and marks a write or flush under way, which a visit leaves to the
// deadline.
func (s *streamWriter) arm() error {
	if s.timeout <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); s.deadline.Sub(now) <= s.timeout/2 {
		if err := s.move(now); err != nil {
			return err
		}
	}
	s.waiting = true
	return nil
}

// settle marks the write or flush arm began as over. A write that waited
// on the client's window can leave less than a visit's period of the
// deadline, and the handler may pause next (a server-sent event stream
// waits for its next event), so settle moves it by arm's rule too.
func (s *streamWriter) settle() {
	if s.timeout <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting = false
	if now := time.Now(); s.deadline.Sub(now) <= s.timeout/2 {
		s.move(now)
	}
}

// Unwrap lets http.ResponseController reach the stream underneath.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
