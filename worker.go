package main

// worker.go is the serving runtime and the worker's side of the protocol.
// The direct mode (-workers 1) runs one server in-process; with -workers N
// each worker process runs one, adopts the listener the parent passed it,
// and takes part in the startup barrier.

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// runtimeConfig is one serving runtime's configuration. Every limit and
// cache in it is per runtime, so per worker process.
type runtimeConfig struct {
	MaxConns      int           `json:"max_conns"` // 0 = unlimited
	HeaderTimeout time.Duration `json:"header_timeout"`
	IdleTimeout   time.Duration `json:"idle_timeout"`
	WriteTimeout  time.Duration `json:"write_timeout"` // 0: none
	BodyTimeout   time.Duration `json:"body_timeout"`  // 0: none
	DrainTimeout  time.Duration `json:"drain_timeout"`
	AccessLog     string        `json:"access_log"`      // "", "-" for stderr, or a path, which the parent writes (accesslog.go)
	AccessLogJSON bool          `json:"access_log_json"` // JSON lines (-log-format json), not the combined format
	AccessLogSkip []string      `json:"access_log_skip"` // paths whose requests are not logged
	AccessPipe    bool          `json:"access_pipe"`     // a worker's access lines go to the parent on its fd 6
	AcceptPace    time.Duration `json:"accept_pace"`     // see limitListener; 0 in direct mode
	TLS           *tlsIdentity  `json:"tls,omitempty"`
	TicketKeys    [][]byte      `json:"ticket_keys"` // shared session ticket keys, newest first; with TLS
}

// maxHeaderBytes is http.Server.MaxHeaderBytes, chosen so that an HTTP/1
// request head (request line, header lines and the blank line, CRLFs
// included) of up to 16 KiB is read and one byte more gets 431, as the
// README says: net/http reads MaxHeaderBytes plus 4096 bytes of bufio
// slack before it gives up (initialReadLimitSize in net/http/server.go).
// HTTP/2 counts its header list differently: each field's name and value
// plus 32 bytes, up to MaxHeaderBytes plus 320.
const maxHeaderBytes = 16<<10 - 4096

// server is one serving runtime: the App's handler behind an http.Server,
// a connection limit and the counters a worker reports when it exits. The
// handler belongs to the App, which releases it in its stop step.
type server struct {
	cfg      runtimeConfig
	log      *slog.Logger
	http     *http.Server
	tls      *tls.Config                     // nil without TLS; not http.TLSConfig, which Serve may set
	cert     atomic.Pointer[tls.Certificate] // what every handshake gets; a direct-mode reload swaps it
	access   *accessLog                      // nil without -access-log
	reqs     requestCounts                   // by status class and duration (reqmetrics.go)
	accepted atomic.Int64
	served   atomic.Int64
	inflight atomic.Int64 // handlers running (counting), which a drain waits for
	// Progress (progress.go), kept while track is set: in a worker the
	// parent probes, set before serve. requests lists those in flight.
	prog     progressCounts
	stuck    atomic.Int64 // requests found stuck
	stalled  atomic.Int64 // how long, as a time.Duration, no progress with requests in flight
	track    bool
	requests inflight
	holds    streamHolds                  // HTTP/2 handlers under a write timeout (listener.go)
	h2base   *http.Server                 // what HTTP/2 connections are served with (http2Base); nil: srv.http
	h1       h1Conns                      // HTTP/1 connections not yet closed (trackConns)
	ln       atomic.Pointer[net.Listener] // what serve accepts on, for drain to close
	draining atomic.Bool                  // drain closed ln: serve's end is not an error
	// drainBegan is when the drain began; it is set once, before
	// draining, and nil until then.
	drainBegan atomic.Pointer[time.Time]
	serving    chan struct{} // closed when serve returns
	// recycleAt is the request count at which limitReached closes; 0
	// never. Set before serve, not changed after.
	recycleAt    int64
	limitReached chan struct{}
}

// newServer builds a runtime for cfg that serves h. It opens the access
// log and parses the TLS identity, so every error a worker can have before
// serving shows up here, before it reports prepared.
func newServer(cfg runtimeConfig, h http.Handler, log *slog.Logger, access io.Writer) (*server, error) {
	srv := &server{cfg: cfg, log: log, serving: make(chan struct{}), limitReached: make(chan struct{})}
	srv.holds.period = cfg.WriteTimeout / 4
	srv.http = &http.Server{
		Handler:           srv.streams(srv.bodies(srv.counting(h))),
		ReadHeaderTimeout: cfg.HeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         srv.trackConns,
		ConnContext:       srv.connContext,
		// Accept errors, handshake failures: an operator must see them.
		ErrorLog: httpErrorLog(log),
	}
	if cfg.TLS != nil {
		tc, err := cfg.TLS.serverConfig()
		if err != nil {
			return nil, err
		}
		// A certificate behind GetCertificate, not Certificates, so it can
		// be replaced under live connections without a data race.
		srv.cert.Store(&tc.Certificates[0])
		tc.Certificates = nil
		tc.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return srv.cert.Load(), nil }
		tc.GetConfigForClient = srv.helloH2
		srv.http.TLSConfig, srv.tls = tc, tc
		srv.http2Base()
		if len(cfg.TicketKeys) > 0 {
			if err := setTicketKeys(srv.tls, cfg.TicketKeys); err != nil {
				return nil, err
			}
		}
	}
	srv.setAccessLog(access)
	return srv, nil
}

// setIdentity replaces the certificate new handshakes get.
func (srv *server) setIdentity(id *tlsIdentity) error {
	if srv.tls == nil || id == nil {
		return nil
	}
	cert, err := id.certificate()
	if err != nil {
		return err
	}
	srv.cert.Store(&cert)
	return nil
}

// counting wraps h to count the handlers running, which a drain waits
// for, and the requests answered. It answers each HTTP/1 request through
// its connection's drainWriter, which marks the response Connection: close
// when its header is committed during a drain (see drain). A request
// whose connection was closed to make room before the request began
// (evict.go) is dropped before its handler runs: the client, which sees
// the connection close without an answer, may send it again. Per request
// that costs three atomic adds, a context lookup, an atomic load, one
// comparison (the -max-requests limit, reached once) and no allocation.
// Its writers set each response's Date as the header is committed
// (stampDate, date.go). In a worker the parent probes, each request is also in the set of
// those in flight (progress.go) while its handler runs: two short holds
// of a lock, and for HTTP/2 one allocation.
func (srv *server) counting(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, _ := r.Context().Value(connKey{}).(*limitConn)
		if lc.evicted() {
			return
		}
		srv.inflight.Add(1)
		var dw *drainWriter
		var c *h1Conn
		if lc != nil {
			c = &lc.h1
		}
		if !servedByHTTP2(r) && c != nil {
			dw = c.answer(w)
			w = dw
		}
		var q *inflightReq
		if srv.track {
			q = srv.track1(w, r, c)
		}
		// Deferred, so a handler that panics is answered as far as the
		// counts and the drain know too, and answered 500 if it can be.
		defer srv.answered(w, dw, q, time.Now())
		defer srv.answerPanic(w, r)
		h.ServeHTTP(w, r)
	})
}

// answerPanic, deferred around a handler, answers a request whose
// handler panicked: 500 if the handler had committed nothing yet, as
// nginx answers for a failed upstream; if it had, the response is cut
// off (http.ErrAbortHandler), since a status already sent cannot be
// taken back. Either way one ERROR line says what and where, with the
// stack in a field of its own. net/http would recover the panic too,
// but close the connection without an answer, so the client saw an
// empty reply and the access log nothing, and it logs the stack inside
// the message. http.ErrAbortHandler itself passes through unlogged: it
// is a handler's way to abort. Where servery did not wrap the writer (a
// writer it does not know) it cannot tell whether the header went out,
// and cuts the response off.
func (srv *server) answerPanic(w http.ResponseWriter, r *http.Request) {
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler {
		panic(p)
	}
	srv.log.Error("handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	if !uncommitted(w) {
		panic(http.ErrAbortHandler)
	}
	h := w.Header()
	clear(h) // what the handler set was for an answer it never gave
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	if !servedByHTTP2(r) {
		h.Set("Connection", "close") // its body may be half read
	}
	w.WriteHeader(http.StatusInternalServerError)
	io.WriteString(w, "500 Internal Server Error\n")
}

// uncommitted reports whether w is known to have sent no header yet.
func uncommitted(w http.ResponseWriter) bool {
	switch w := w.(type) {
	case *drainWriter:
		return !w.committed
	case *streamWriter:
		return !w.committed
	}
	return false
}

// track1 puts a request in the set of those in flight (progress.go),
// with what counts its progress, and returns its place there: its HTTP/1
// connection's, its HTTP/2 stream writer's (streams), or, for a request
// servery did not wrap, one of its own, which nothing moves.
func (srv *server) track1(w http.ResponseWriter, r *http.Request, c *h1Conn) *inflightReq {
	var q *inflightReq
	var moved *atomic.Int64
	switch sw, ok := w.(*streamWriter); {
	case ok:
		q, moved = &sw.req, &sw.progress
	case !servedByHTTP2(r) && c != nil:
		q, moved = &c.req, &c.progress
	default:
		q, moved = new(inflightReq), new(atomic.Int64)
	}
	srv.requests.add(q, r, moved)
	return q
}

// answered ends a request counting began at start, answered through w.
func (srv *server) answered(w http.ResponseWriter, dw *drainWriter, q *inflightReq, start time.Time) {
	if q != nil {
		srv.requests.remove(q)
	}
	status, hijacked := 0, false
	if dw != nil {
		hijacked = dw.committed && dw.status == 0 // only Hijack commits without a status
		dw.done()
		status = dw.status
	} else if sw, ok := w.(*streamWriter); ok {
		if !sw.committed {
			stampDate(sw.Header()) // the HTTP/2 server commits it next
		}
		status = sw.status
	}
	if !hijacked { // a hijacked connection's status and length are its own
		srv.reqs.observe(status, time.Since(start))
	}
	srv.inflight.Add(-1)
	if srv.served.Add(1) == srv.recycleAt {
		close(srv.limitReached)
	}
}

// hdrClose is the shared Connection: close value; never modify it.
var hdrClose = []string{"close"}

// serve accepts on ln until the server is shut down. It blocks, and
// returns nil after a drain.
func (srv *server) serve(ln net.Listener) error {
	defer close(srv.serving)
	ll := newLimitListener(ln, srv.cfg.MaxConns, srv.cfg.AcceptPace, srv.cfg.WriteTimeout, &srv.accepted)
	if srv.track {
		ll.prog = &srv.prog // progress counts only where the parent probes
	}
	ll.readSpan = srv.cfg.HeaderTimeout
	ln = ll
	if srv.tls != nil {
		// Our own TLS listener rather than ServeTLS, which serves a clone
		// of the config: rotated ticket keys must reach the one in use.
		ln = tls.NewListener(ln, srv.tls)
	}
	srv.ln.Store(&ln)
	err := srv.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) || srv.draining.Load() {
		return nil
	}
	return fmt.Errorf("serve: %w", err)
}

// trackConns keeps what a drain knows of each connection (see drain.go):
// the set of open HTTP/1 connections, and whether each is answering a
// request or since when it has been idle; and, for -max-conns, which
// connections are idle (HTTP/1 and HTTP/2) and may be closed to make
// room (evict.go). Outside a drain a request costs it two stores, and
// with -max-conns an atomic add and three compare-and-swaps or loads; no
// clock read.
func (srv *server) trackConns(c net.Conn, state http.ConnState) {
	lc := asLimitConn(c)
	if lc == nil {
		return
	}
	switch state {
	case http.StateNew:
		srv.h1.add(&lc.h1)
	case http.StateActive:
		lc.h1.idleSince.Store(connBusy)
		lc.markBusy()
	case http.StateIdle:
		var idle time.Duration
		if began := srv.drainBegan.Load(); began != nil {
			idle = time.Since(*began)
		}
		lc.h1.idleSince.Store(int64(idle))
		lc.markIdle()
	case http.StateClosed, http.StateHijacked:
		srv.h1.remove(&lc.h1)
	}
}

// helloH2 takes a TLS connection out of the HTTP/1 set when it will speak
// HTTP/2 (the client offers h2, which the server offers and prefers):
// HTTP/2 has its own graceful shutdown (GOAWAY, then refused streams,
// which clients retry), which Shutdown runs. It returns no config, so the
// server's is used.
func (srv *server) helloH2(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	if lc := asLimitConn(hello.Conn); lc != nil && slices.Contains(hello.SupportedProtos, "h2") && slices.Contains(srv.tls.NextProtos, "h2") {
		srv.h1.remove(&lc.h1)
		// Its progress is its streams' (streamWriter), not its frames':
		// a PING's answer is no request's.
		lc.h1.h2.Store(true)
	}
	return nil, nil
}

// servedByHTTP2 reports whether net/http's HTTP/2 server answers r: its
// connection chose h2 in the TLS handshake (servery serves no cleartext
// HTTP/2). The request line does not tell: the HTTP/1 server also answers
// "PRI * HTTP/2.0" sent with headers, as an HTTP/1 request whose
// ProtoMajor is 2, and then discards its unread body as it does any.
func servedByHTTP2(r *http.Request) bool {
	return r.ProtoMajor == 2 && r.TLS != nil && r.TLS.NegotiatedProtocol == "h2"
}

// asLimitConn returns the limitConn under c, which serve's listener
// wraps every connection in, or nil.
func asLimitConn(c net.Conn) *limitConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, _ := c.(*limitConn)
	return lc
}

// stats returns the counters so far.
func (srv *server) stats() workerStats {
	served := srv.served.Load()
	return workerStats{Accepted: srv.accepted.Load(), Served: served,
		Progress: served + srv.prog.moved.Load(), Stuck: srv.stuck.Load(), Stalled: time.Duration(srv.stalled.Load()),
		Requests: srv.reqs.stats()}
}

// close writes out the access log's last lines once serving is over.
func (srv *server) close() error {
	if srv.access == nil {
		return nil
	}
	if n := srv.access.close(); n > 0 {
		srv.log.Warn("access log lines dropped", "lines", n)
	}
	return nil
}

// workerMain is a worker process's main: it speaks the protocol on in
// and out, the pipes the parent passed as its fds 4 and 5 (protocolPipes),
// serves app on the listener inherited as fd 3, and returns the exit
// status.
func workerMain(log, named *slog.Logger, app App, in, out *os.File) int {
	// The final done message goes to fd 5, the protocol pipe, after the
	// parent may have died; Go fails that write with EPIPE by itself. The
	// log is another matter, survivePipeBreaks' (workerEntry).
	//
	// A reload is the parent's business; a stray SIGHUP must not end a
	// worker, which Go's default would.
	signal.Ignore(syscall.SIGHUP)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	return runWorker(workerIO{
		in:       in,
		out:      out,
		listener: os.NewFile(listenerFD, "listener"),
		term:     term,
		log:      log,
		named:    named,
	}, app)
}

// workerIO is what a worker talks through. Tests swap fields to inject
// faults: a writer that delays a message, a term channel that never fires.
type workerIO struct {
	in       io.Reader
	out      io.Writer
	listener *os.File // the parent's listening socket; the worker owns it
	term     <-chan os.Signal
	log      *slog.Logger // the base; the config adds the worker's name
	named    *slog.Logger // log named from the environment, until then; may be nil
}

// runWorker runs a worker through its whole life: config, the App's
// start, prepared, commit, ready, serving, drain, the App's stop, done. It
// blocks until the worker should exit and returns the exit status.
func runWorker(wio workerIO, app App) int {
	in := newLineReader(wio.in)
	out := &lineWriter{w: wio.out}
	// The worker's logger gains its index and generation with its config.
	var logp atomic.Pointer[slog.Logger]
	logp.Store(cmp.Or(wio.named, wio.log))
	// started is set once the App's start has returned; from then on a
	// worker that leaves before serving runs the App's stop step first
	// (stopBeforeServing), hurried by the SIGTERM that ends it.
	var started atomic.Pointer[workerRuntime]
	hurry, hurried := context.WithCancel(context.Background())
	defer hurried()
	stopEarly := func() {
		if rt := started.Load(); rt != nil {
			rt.stopBeforeServing(hurry)
		}
	}
	stopWatch := exitOnTermUntilServing(wio.term, &logp, func() { hurried(); stopEarly() })
	rt, err := prepare(in, out, wio, app, &logp, &started)
	if errors.Is(err, errNoConfig) {
		// The parent closed the pipe before it sent the config: it rolls
		// back (a sibling failed to start, or the host refused one) or
		// died. Nothing failed here.
		logp.Load().Info("worker cancelled before its config")
		return 0
	}
	if err != nil {
		logp.Load().Error("worker failed", "err", err)
		out.send(message{Type: msgFailed, Reason: err.Error()})
		return 1
	}
	log := rt.log
	if err := out.send(message{Type: msgPrepared, PID: os.Getpid()}); err != nil {
		log.Error("worker failed", "err", err)
		rt.ln.Close()
		stopEarly()
		return 1
	}
	msgs := readAll(in)
	if ok, err := awaitCommit(msgs); !ok {
		// Never accepted anything: the parent rolled back or died. The
		// listener goes first, so a stop step that outlives a dead
		// parent holds no copy of the socket.
		log.Info("worker cancelled before commit", "why", err)
		rt.ln.Close()
		stopEarly()
		return 0
	}
	stopWatch()
	served := make(chan error, 1)
	go func() { served <- rt.srv.serve(rt.ln) }()
	if err := out.send(message{Type: msgReady}); err != nil {
		log.Warn("report ready", "err", err)
	}
	drainAsked := drainSignal(msgs, rt, out, log)
	go rt.watchProgress(rt.cfg.WorkerTimeout, out, drainAsked)
	if rt.cfg.RecycleRequests > 0 || rt.cfg.RecycleAge > 0 || rt.cfg.RecycleMemory > 0 {
		go askToRecycle(rt, out, drainAsked)
	}
	return serveUntilDrain(rt, out, drainAsked, served, wio.term)
}

// askToRecycle sends the parent one recycle message when the worker has
// served its -max-requests or for its -max-worker-age, whichever comes
// first, and returns; or returns when the drain begins. The worker serves
// on: the parent starts its replacement first and only then tells it to
// drain, so the service never has fewer workers ready.
func askToRecycle(rt *workerRuntime, out *lineWriter, drainAsked <-chan struct{}) {
	var aged <-chan time.Time
	if rt.cfg.RecycleAge > 0 {
		t := time.NewTimer(rt.cfg.RecycleAge)
		defer t.Stop()
		aged = t.C
	}
	bloated := memoryOver(rt.cfg.RecycleMemory, drainAsked)
	var limit, why string
	select {
	case <-rt.srv.limitReached:
		limit, why = "requests", fmt.Sprintf("served %d requests (its -max-requests, with jitter)", rt.cfg.RecycleRequests)
	case <-aged:
		limit, why = "age", fmt.Sprintf("served for %v (its -max-worker-age, with jitter)", rt.cfg.RecycleAge)
	case rss := <-bloated:
		limit, why = "memory", fmt.Sprintf("resident memory %d MiB, over its -max-worker-memory %d MiB", rss>>20, rt.cfg.RecycleMemory>>20)
	case <-drainAsked:
		return
	}
	rt.log.Info("worker at its limit, asking to be recycled", "reason", why)
	if err := out.send(message{Type: msgRecycle, Limit: limit, Reason: why}); err != nil {
		rt.log.Warn("ask to be recycled", "err", err)
	}
}

// workerRuntime is a prepared worker: its configuration, the App's
// handler and the server around it, and the adopted listener.
type workerRuntime struct {
	cfg *workerConfig
	app App
	h   http.Handler
	srv *server
	ln  net.Listener
	log *slog.Logger
	// checking: an App health check runs (answerStats, hang.go).
	checking atomic.Bool
	// stopOnce runs the App's stop step once (stopApp), whether the
	// drain, a rollback or a SIGTERM before serving asks first.
	stopOnce sync.Once
	stopErr  error
}

// errNoConfig is prepare's error when the parent closed the pipe before
// it sent the config, which is no failure of the worker's; only this, not
// an App's own error that wraps io.EOF.
var errNoConfig = errors.New("the parent closed the pipe before the config")

// prepare reads the config message, runs the App's start step within the
// startup timeout, builds the server around its handler and adopts the
// listener, accepting nothing yet. Once it has the config it stores the
// worker's logger in logp and says starting, so a parent whose startup
// times out can tell a slow App.Start from a worker that never got going.
// Once the App's start has returned it stores the runtime in started, so
// a SIGTERM from then on runs the App's stop step before the worker exits.
func prepare(in *lineReader, out *lineWriter, wio workerIO, app App, logp *atomic.Pointer[slog.Logger], started *atomic.Pointer[workerRuntime]) (*workerRuntime, error) {
	m, err := in.next()
	if err == io.EOF {
		err = errNoConfig
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if m.Type != msgConfig {
		return nil, fmt.Errorf("first message %q, want %q: %w", m.Type, msgConfig, errProtocol)
	}
	cfg := m.Config
	rt := &workerRuntime{cfg: cfg, app: app,
		log: wio.log.With("worker", cfg.Index, "pid", os.Getpid(), "generation", cfg.Generation)}
	logp.Store(rt.log)
	if err := out.send(message{Type: msgStarting}); err != nil {
		return nil, err
	}
	ctx, cancel := startupContext(context.Background(), cfg.StartupTimeout)
	defer cancel()
	rt.h, err = startApp(ctx, app, Worker{Index: cfg.Index, Count: cfg.Count, Generation: cfg.Generation, Log: rt.log})
	if err != nil {
		return nil, err
	}
	started.Store(rt)
	access, err := accessOutput(cfg.runtimeConfig)
	if err != nil {
		rt.stopApp(ctx)
		return nil, fmt.Errorf("build runtime: %w", err)
	}
	if rt.srv, err = newServer(cfg.runtimeConfig, rt.h, rt.log, access); err != nil {
		rt.stopApp(ctx)
		return nil, fmt.Errorf("build runtime: %w", err)
	}
	rt.srv.recycleAt, rt.srv.track = cfg.RecycleRequests, cfg.WorkerTimeout > 0
	rt.ln, err = net.FileListener(wio.listener)
	// The runtime's listener is a duplicate; this copy is not needed.
	wio.listener.Close()
	if err != nil {
		rt.srv.close()
		rt.stopApp(ctx)
		return nil, fmt.Errorf("adopt listener: %w", err)
	}
	return rt, nil
}

// stopApp runs the App's stop step, once, and logs its failure, which it
// returns. The parent's deadlines bound it. A second call, the SIGTERM
// watcher's beside a rollback's, waits for the first and returns its
// error.
func (rt *workerRuntime) stopApp(ctx context.Context) error {
	return rt.stopAppBy(ctx, time.Time{})
}

// stopBeforeServing runs the App's stop step of a worker that never
// served: its context ends at the SIGTERM that follows a rollback's EOF
// (hurry), or at -force-timeout from now, which also bounds the step
// when no SIGTERM will come because the parent died.
func (rt *workerRuntime) stopBeforeServing(hurry context.Context) {
	deadline := time.Now().Add(rt.cfg.ForceTimeout)
	ctx, cancel := context.WithDeadline(hurry, deadline)
	defer cancel()
	rt.stopAppBy(ctx, deadline)
}

// stopAppBy is stopApp, no longer waited for past deadline (zero: no
// limit).
func (rt *workerRuntime) stopAppBy(ctx context.Context, deadline time.Time) error {
	rt.stopOnce.Do(func() {
		rt.stopErr = stopApp(ctx, deadline, rt.app, rt.h)
		if rt.stopErr != nil {
			rt.log.Error("app stop failed", "err", rt.stopErr)
		}
	})
	return rt.stopErr
}

// readAll forwards messages from the parent until the protocol input
// ends (the worker's fd 4, which the parent writes); the channel then
// closes. A read error or a bad line ends it too: a parent that cannot be
// understood is treated like one that is gone.
func readAll(in *lineReader) <-chan message {
	msgs := make(chan message)
	go func() {
		defer close(msgs)
		for {
			m, err := in.next()
			if err != nil {
				return
			}
			msgs <- m
		}
	}()
	return msgs
}

// exitOnTermUntilServing makes SIGTERM end the worker at once until the
// returned stop is called, wherever it is: building its runtime, reporting
// prepared, or waiting for commit. Before it serves a worker has nothing
// to drain, and a rollback should not wait on a slow prepare; but once
// the App's start has returned, beforeExit runs its stop step first, so
// what the start took outside the process (a lock, a registration) is
// given back as a rollback promises. stop returns
// only once the watch has ended, so the worker never starts serving while
// it might still exit.
func exitOnTermUntilServing(term <-chan os.Signal, log *atomic.Pointer[slog.Logger], beforeExit func()) (stop func()) {
	serving, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-term:
			log.Load().Info("worker terminated before serving")
			// A rollback closes the pipe and sends SIGTERM together, so
			// this may run beside runWorker's own stop: the step runs
			// once, and both wait for it.
			beforeExit()
			os.Exit(1)
		case <-serving:
		}
	}()
	return func() {
		close(serving)
		<-done
	}
}

// awaitCommit blocks until the parent commits (true), or the protocol
// input (fd 4) ends or the parent sends anything else (false, with the
// reason). The reason's text still says stdin, the design record's name
// for that pipe.
func awaitCommit(msgs <-chan message) (bool, error) {
	m, ok := <-msgs
	switch {
	case !ok:
		return false, errors.New("stdin closed before commit")
	case m.Type != msgCommit:
		return false, fmt.Errorf("got %q before commit: %w", m.Type, errProtocol)
	}
	return true, nil
}

// serveUntilDrain serves until the protocol input (fd 4) ends (a stop, or
// the parent died) and then drains; SIGTERM during the drain closes every
// connection at once. The App's stop step runs after the drain, so after
// the last handler has returned unless the drain was cut, until SIGTERM or
// the force deadline, which the worker measures itself from the drain's
// start.
// It reports the counters, and the stop step's failure, in a
// done message and returns the exit status: 1 if the drain was cut or the
// stop step failed.
func serveUntilDrain(rt *workerRuntime, out *lineWriter, drainAsked <-chan struct{}, served <-chan error, term <-chan os.Signal) int {
	hurry, cut := context.WithCancel(context.Background())
	defer cut()
	select {
	case err := <-served:
		rt.log.Error("serving stopped", "err", err)
		rt.srv.close() // the access lines still buffered
		return 1
	case <-term:
		cut()
	case <-drainAsked:
	}
	began := time.Now()
	go func() {
		select {
		case <-term:
			cut()
		case <-hurry.Done():
		}
	}()
	rt.log.Info("worker draining")
	err := rt.srv.drain(hurry)
	// The stop step gets what is left until the force deadline, or until
	// SIGTERM. The parent kills the worker at its own force deadline too,
	// but a worker whose parent died has nobody to kill it: this deadline
	// of the worker's own is then the only bound on the stop step.
	stopCtx, cancel := context.WithDeadline(hurry, began.Add(rt.cfg.ForceTimeout))
	stopErr := rt.stopApp(stopCtx)
	cancel()
	st := rt.srv.stats()
	done := message{Type: msgDone, Stats: &st}
	if stopErr != nil {
		done.Reason = stopErr.Error()
	}
	out.send(done)
	rt.log.Info("worker drained", "accepted", st.Accepted, "served", st.Served, "err", err, "app_stopped", stopErr == nil)
	if err != nil || stopErr != nil {
		return 1
	}
	return 0
}

// drainSignal closes when the protocol input (fd 4) ends: the parent
// closed it, or died. Until then it installs the rotated ticket keys the
// parent sends and answers its requests for the counters. Any other
// message after commit breaks the protocol; it is logged and ignored,
// since stopping on it would let a confused parent cut requests short.
//
// The counters travel only when the parent asks, at its probe (every
// quarter of -worker-timeout, hang.go) and at a scrape of its status
// listener, or with the worker's own stall report (progress.go): a
// request costs the hot path nothing more than the atomic adds it
// already makes.
func drainSignal(msgs <-chan message, rt *workerRuntime, out *lineWriter, log *slog.Logger) <-chan struct{} {
	eof := make(chan struct{})
	go func() {
		// While the parent's upgrade holds this worker's lines (hold to
		// resume), a stats question waits for the resume: answering it
		// would block this reader on the held writer, and the resume
		// with it.
		held, asked := false, false
		for m := range msgs {
			switch {
			case m.Type == msgStats && held:
				asked = true
			case m.Type == msgStats:
				rt.answerStats(out)
			case m.Type == msgHold && !held:
				out.hold(message{Type: msgHeld})
				held = true
			case m.Type == msgResume && held:
				out.release()
				held = false
				if asked {
					asked = false
					rt.answerStats(out)
				}
			case m.Type == msgTicketKeys && rt.srv.tls != nil:
				if err := setTicketKeys(rt.srv.tls, m.Keys); err != nil {
					log.Warn("ticket keys", "err", err)
					continue
				}
				log.Info("ticket keys installed", "keys", len(m.Keys))
			default:
				log.Warn("unexpected message after commit", "type", m.Type)
			}
		}
		out.release() // a parent that died holding this worker: its done message must go out
		close(eof)
	}()
	return eof
}

// workerEntry runs worker mode after checking that the parent speaks this
// build's protocol and parsing the command line the parent passed, so the
// App's flags hold their values here too. Either failure is reported as a
// failed message.
func workerEntry(version string, args []string, appFlags *flag.FlagSet, app App) int {
	nameProcess(programName()) // the parent's, as ps and pgrep show it
	survivePipeBreaks()        // first: a refusal may be written to a broken pipe
	sink := newLogSink(os.Stderr)
	log := sink.logger()
	named := nameLogger(log, os.Getenv(workerNameEnv))
	in, out, err := protocolPipes()
	if err != nil {
		out = os.Stdout // where a parent of an earlier protocol reads, for the refusal
	}
	refuse := func(reason string) int {
		named.Error("worker refused", "err", reason)
		(&lineWriter{w: out}).send(message{Type: msgFailed, Reason: reason})
		return 1
	}
	if version != strconv.Itoa(protocolVersion) {
		return refuse(fmt.Sprintf("protocol version %q, want %d", version, protocolVersion))
	}
	if err != nil {
		return refuse(err.Error())
	}
	cfg, err := parseFlags(args, io.Discard, appFlags)
	if err == nil {
		err = errors.Join(sink.setFormat(cfg.LogFormat), sink.setLevel(cfg.LogLevel)) // the parent's: the same command line
	}
	if err != nil {
		return refuse(fmt.Sprintf("parse command line: %v", err))
	}
	return workerMain(log, named, app, in, out)
}

// nameLogger returns log with the worker, pid and generation that name
// (workerNameEnv's "generation index") gives, for the lines a worker logs
// before its config arrives; log itself if name is not one.
func nameLogger(log *slog.Logger, name string) *slog.Logger {
	var generation, index int
	if _, err := fmt.Sscanf(name, "%d %d", &generation, &index); err != nil {
		return log
	}
	return log.With("worker", index, "pid", os.Getpid(), "generation", generation)
}
