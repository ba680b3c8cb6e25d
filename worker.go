package main

// worker.go is the serving runtime and the worker's side of the protocol.
// The direct mode (-workers 1) runs one server in-process; with -workers N
// each worker process runs one, adopts the listener the parent passed it,
// and takes part in the startup barrier.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// runtimeConfig is one serving runtime's configuration. Every limit and
// cache in it is per runtime, so per worker process.
type runtimeConfig struct {
	Dir             string        `json:"dir"`
	MaxConns        int           `json:"max_conns"` // 0 = unlimited
	CacheBytes      int64         `json:"cache_bytes"`
	CacheRevalidate time.Duration `json:"cache_revalidate"`
	HeaderTimeout   time.Duration `json:"header_timeout"`
	IdleTimeout     time.Duration `json:"idle_timeout"`
	WriteTimeout    time.Duration `json:"write_timeout"` // 0: none
	DrainTimeout    time.Duration `json:"drain_timeout"`
	AccessLog       string        `json:"access_log"`  // "", "-" for stderr, or a path (direct mode only)
	AcceptPace      time.Duration `json:"accept_pace"` // see limitListener; 0 in direct mode
	TLS             *tlsIdentity  `json:"tls,omitempty"`
}

// maxHeaderBytes caps a request's header block well under net/http's 1 MiB
// default; past it the client gets 431.
const maxHeaderBytes = 16 << 10

// server is one serving runtime: the static handler behind an http.Server,
// a connection limit and the counters a worker reports when it exits.
type server struct {
	cfg      runtimeConfig
	static   *staticHandler
	http     *http.Server
	logFile  io.WriteCloser // the access log, when it is a file
	accepted atomic.Int64
	served   atomic.Int64
}

// newServer builds a runtime for cfg. It opens the directory and parses
// the TLS identity, so every error a worker can have before serving shows
// up here, before it reports prepared.
func newServer(cfg runtimeConfig, log *slog.Logger) (*server, error) {
	static, err := newStaticHandler(cfg.Dir, staticOptions{CacheBytes: cfg.CacheBytes, Revalidate: cfg.CacheRevalidate})
	if err != nil {
		return nil, err
	}
	srv := &server{cfg: cfg, static: static}
	srv.http = &http.Server{
		Handler:           srv.counting(static),
		ReadHeaderTimeout: cfg.HeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// Accept errors, handler panics, handshake failures: an operator
		// must see them.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if err := srv.setAccessLog(); err != nil {
		static.Close()
		return nil, err
	}
	if cfg.TLS != nil {
		if srv.http.TLSConfig, err = cfg.TLS.serverConfig(); err != nil {
			static.Close()
			return nil, err
		}
	}
	return srv, nil
}

// counting wraps h to count answered requests.
func (srv *server) counting(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		srv.served.Add(1)
	})
}

// serve accepts on ln until the server is shut down. It blocks, and
// returns nil after a drain.
func (srv *server) serve(ln net.Listener) error {
	ln = newLimitListener(ln, srv.cfg.MaxConns, srv.cfg.AcceptPace, srv.cfg.WriteTimeout, &srv.accepted)
	var err error
	if srv.http.TLSConfig != nil {
		err = srv.http.ServeTLS(ln, "", "")
	} else {
		err = srv.http.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve: %w", err)
}

// stats returns the counters so far.
func (srv *server) stats() workerStats {
	return workerStats{Accepted: srv.accepted.Load(), Served: srv.served.Load()}
}

// close releases the static root and the access log file once serving is over.
func (srv *server) close() error {
	srv.static.Close()
	if srv.logFile != nil {
		return srv.logFile.Close()
	}
	return nil
}

// workerMain is a worker process's main: it speaks the protocol on stdin
// and stdout and serves on the listener inherited as fd 3. It returns the
// exit status.
func workerMain(log *slog.Logger) int {
	// The final done message goes to stdout after the parent may have died;
	// without this a write to the broken pipe would kill the worker with
	// SIGPIPE before it finished draining.
	signal.Ignore(syscall.SIGPIPE)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	return runWorker(workerIO{
		in:       os.Stdin,
		out:      os.Stdout,
		listener: os.NewFile(3, "listener"),
		term:     term,
		log:      log,
	})
}

// workerIO is what a worker talks through. Tests swap fields to inject
// faults: a writer that delays a message, a term channel that never fires.
type workerIO struct {
	in       io.Reader
	out      io.Writer
	listener *os.File // the parent's listening socket; the worker owns it
	term     <-chan os.Signal
	log      *slog.Logger
}

// runWorker runs a worker through its whole life: config, prepared,
// commit, ready, serving, drain, done. It blocks until the worker should
// exit and returns the exit status.
func runWorker(wio workerIO) int {
	in := newLineReader(wio.in)
	out := &lineWriter{w: wio.out}
	stopWatch := exitOnTermUntilServing(wio.term, wio.log)
	srv, ln, log, err := prepare(in, wio)
	if err != nil {
		wio.log.Error("worker failed", "err", err)
		out.send(message{Type: msgFailed, Reason: err.Error()})
		return 1
	}
	if err := out.send(message{Type: msgPrepared, PID: os.Getpid()}); err != nil {
		log.Error("worker failed", "err", err)
		return 1
	}
	msgs := readAll(in)
	if ok, err := awaitCommit(msgs); !ok {
		// Never accepted anything: the parent rolled back or died.
		log.Info("worker cancelled before commit", "why", err)
		return 0
	}
	stopWatch()
	served := make(chan error, 1)
	go func() { served <- srv.serve(ln) }()
	if err := out.send(message{Type: msgReady}); err != nil {
		log.Warn("report ready", "err", err)
	}
	return serveUntilDrain(srv, out, msgs, served, wio.term, log)
}

// prepare reads the config message, builds the runtime and adopts the
// listener, accepting nothing yet.
func prepare(in *lineReader, wio workerIO) (*server, net.Listener, *slog.Logger, error) {
	m, err := in.next()
	if err != nil {
		return nil, nil, wio.log, fmt.Errorf("read config: %w", err)
	}
	if m.Type != msgConfig {
		return nil, nil, wio.log, fmt.Errorf("first message %q, want %q: %w", m.Type, msgConfig, errProtocol)
	}
	log := wio.log.With("worker", m.Config.Index, "pid", os.Getpid())
	srv, err := newServer(m.Config.runtimeConfig, log)
	if err != nil {
		return nil, nil, log, fmt.Errorf("build runtime: %w", err)
	}
	ln, err := net.FileListener(wio.listener)
	// The runtime's listener is a duplicate; this copy is not needed.
	wio.listener.Close()
	if err != nil {
		srv.close()
		return nil, nil, log, fmt.Errorf("adopt listener: %w", err)
	}
	return srv, ln, log, nil
}

// readAll forwards messages from the parent until its stdin ends; the
// channel then closes. A read error or a bad line ends it too: a parent
// that cannot be understood is treated like one that is gone.
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
// to drain, and a rollback should not wait on a slow prepare. stop returns
// only once the watch has ended, so the worker never starts serving while
// it might still exit.
func exitOnTermUntilServing(term <-chan os.Signal, log *slog.Logger) (stop func()) {
	serving, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-term:
			log.Info("worker terminated before serving")
			os.Exit(1)
		case <-serving:
		}
	}()
	return func() {
		close(serving)
		<-done
	}
}

// awaitCommit blocks until the parent commits (true), or its stdin ends or
// it sends anything else (false, with the reason).
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

// serveUntilDrain serves until stdin ends (a stop, or the parent died) and
// then drains; SIGTERM during the drain closes every connection at once.
// It reports the counters in a done message and returns the exit status.
func serveUntilDrain(srv *server, out *lineWriter, msgs <-chan message, served <-chan error, term <-chan os.Signal, log *slog.Logger) int {
	hurry, cut := context.WithCancel(context.Background())
	defer cut()
	select {
	case err := <-served:
		log.Error("serving stopped", "err", err)
		return 1
	case <-term:
		cut()
	case <-drainSignal(msgs, log):
	}
	go func() {
		select {
		case <-term:
			cut()
		case <-hurry.Done():
		}
	}()
	log.Info("worker draining")
	err := srv.drain(hurry)
	st := srv.stats()
	out.send(message{Type: msgDone, Stats: &st})
	log.Info("worker drained", "accepted", st.Accepted, "served", st.Served, "err", err)
	if err != nil {
		return 1
	}
	return 0
}

// drainSignal closes when the parent's stdin ends. A message after commit
// breaks the protocol; it is logged and ignored, since stopping on it
// would let a confused parent cut requests short.
func drainSignal(msgs <-chan message, log *slog.Logger) <-chan struct{} {
	eof := make(chan struct{})
	go func() {
		for m := range msgs {
			log.Warn("unexpected message after commit", "type", m.Type)
		}
		close(eof)
	}()
	return eof
}

// workerEntry runs worker mode after checking that the parent speaks this
// build's protocol; a mismatch is reported as a failed message.
func workerEntry(version string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if version != strconv.Itoa(protocolVersion) {
		reason := fmt.Sprintf("protocol version %q, want %d", version, protocolVersion)
		log.Error("worker refused", "err", reason)
		(&lineWriter{w: os.Stdout}).send(message{Type: msgFailed, Reason: reason})
		return 1
	}
	return workerMain(log)
}
