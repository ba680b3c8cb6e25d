package main

// logging.go owns the log every part of a process writes through, the
// parent's and each worker's alike: one sink per process, built once, in
// text (log/slog's key=value lines) or JSON (one object a line, with the
// same keys), as -log-format says. The format is known only once the
// command line is parsed, and some loggers are made before that (the
// signal front end's, which must exist before the first SIGHUP), so every
// logger writes through the sink, which takes the format when it is set.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// logFormats are -log-format's values, logLevels -log-level's.
var (
	logFormats = []string{"text", "json"}
	logLevels  = []string{"info", "debug"}
)

// logSink is the process's one log output, its format and its level.
type logSink struct {
	w     *lockedWriter
	h     atomic.Pointer[slog.Handler] // text until setFormat
	json  atomic.Bool                  // the format is JSON
	level slog.LevelVar                // info until setLevel
}

func newLogSink(w io.Writer) *logSink {
	s := &logSink{w: &lockedWriter{w: w}}
	var h slog.Handler = slog.NewTextHandler(s.w, s.options())
	s.h.Store(&h)
	return s
}

// lockedWriter writes each Write whole, one at a time: the parent's own
// records and the batches of its workers' lines (output.go) never land
// inside one another.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// handler returns a new handler of the sink's format and level that
// writes to w, for a record made elsewhere (output.go).
func (s *logSink) handler(w io.Writer) slog.Handler {
	if s.json.Load() {
		return slog.NewJSONHandler(w, s.options())
	}
	return slog.NewTextHandler(w, s.options())
}

// isRecord reports whether line is a record of a logger of the sink's
// format, as every record begins: its time.
func (s *logSink) isRecord(line []byte) bool {
	if s.json.Load() {
		return bytes.HasPrefix(line, []byte(`{"time":`)) && bytes.HasSuffix(line, []byte("}"))
	}
	return bytes.HasPrefix(line, []byte("time="))
}

// options are the sink's handlers': its level, which setLevel changes
// under every handler at once.
func (s *logSink) options() *slog.HandlerOptions { return &slog.HandlerOptions{Level: &s.level} }

// setLevel makes every logger of the sink write records of level and
// above from now on: "info" or "debug" (logLevels).
func (s *logSink) setLevel(level string) error {
	switch level {
	case "info":
		s.level.Set(slog.LevelInfo)
	case "debug":
		s.level.Set(slog.LevelDebug)
	default:
		return fmt.Errorf("log level %q: want info or debug", level)
	}
	return nil
}

// logger returns a logger that writes through the sink.
func (s *logSink) logger() *slog.Logger { return slog.New(sinkHandler{sink: s}) }

// setFormat makes every logger of the sink write format from now on.
func (s *logSink) setFormat(format string) error {
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(s.w, s.options())
	case "json":
		h = slog.NewJSONHandler(s.w, s.options())
	default:
		return fmt.Errorf("log format %q: want text or json", format)
	}
	s.h.Store(&h)
	s.json.Store(format == "json")
	return nil
}

// sinkHandler is a handler of the sink's, with the attributes and groups
// a logger's With and WithGroup added, applied to the sink's handler of
// the moment at each record: a lifecycle line, not a request's.
type sinkHandler struct {
	sink *logSink
	with []func(slog.Handler) slog.Handler
}

func (h sinkHandler) current() slog.Handler {
	cur := *h.sink.h.Load()
	for _, w := range h.with {
		cur = w(cur)
	}
	return cur
}

func (h sinkHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return (*h.sink.h.Load()).Enabled(ctx, l)
}

func (h sinkHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.current().Handle(ctx, r)
}

func (h sinkHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return h.and(func(c slog.Handler) slog.Handler { return c.WithAttrs(as) })
}

func (h sinkHandler) WithGroup(name string) slog.Handler {
	return h.and(func(c slog.Handler) slog.Handler { return c.WithGroup(name) })
}

func (h sinkHandler) and(w func(slog.Handler) slog.Handler) slog.Handler {
	with := append(append([]func(slog.Handler) slog.Handler(nil), h.with...), w)
	return sinkHandler{sink: h.sink, with: with}
}

// httpErrorLog is an http.Server's ErrorLog: net/http's own messages as
// records of log, at WARN. A failed TLS handshake ("http: TLS handshake
// error from ADDR: ERR": a scanner, a client that does not trust the
// certificate) is `tls handshake failed`, at most one a
// handshakeLogEvery, with how many were left out since, so a flood of
// them cannot flood the log; one the client only closed early is at
// DEBUG (closedEarly); any other message is `http server error`.
func httpErrorLog(log *slog.Logger) *stdlog.Logger {
	return stdlog.New(&httpErrors{log: log}, "", 0)
}

// closedEarly reports whether a handshake failed only because the client
// closed the connection before it finished: a load balancer's TCP check,
// a load test's last connections, a browser's spare connection. That is
// no fault of anyone's; nginx logs it at info. It is logged at DEBUG and
// leaves the WARN lines' rate to the failures that say something.
func closedEarly(err string) bool {
	return err == "EOF" || strings.HasSuffix(err, "connection reset by peer")
}

// handshakeLogEvery is how often a failed TLS handshake is logged.
const handshakeLogEvery = time.Second

// httpErrors turns net/http's messages into records.
type httpErrors struct {
	log     *slog.Logger
	mu      sync.Mutex
	last    time.Time // when a failed handshake was logged last
	leftOut int64     // failed handshakes since then, not logged
}

func (h *httpErrors) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	rest, ok := strings.CutPrefix(msg, "http: TLS handshake error from ")
	if !ok {
		h.log.Warn("http server error", "err", msg)
		return len(p), nil
	}
	remote, err, _ := strings.Cut(rest, ": ")
	if closedEarly(err) {
		h.log.Debug("tls handshake failed", "remote", remote, "err", err)
		return len(p), nil
	}
	now := time.Now()
	h.mu.Lock()
	if !h.last.IsZero() && now.Sub(h.last) < handshakeLogEvery {
		h.leftOut++
		h.mu.Unlock()
		return len(p), nil
	}
	leftOut := h.leftOut
	h.last, h.leftOut = now, 0
	h.mu.Unlock()
	h.log.Warn("tls handshake failed", "remote", remote, "err", err, "left_out", leftOut)
	return len(p), nil
}
