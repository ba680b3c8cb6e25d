package main

// logging.go owns the log every part of a process writes through, the
// parent's and each worker's alike: one sink per process, built once, in
// text (log/slog's key=value lines) or JSON (one object a line, with the
// same keys), as -log-format says. The format is known only once the
// command line is parsed, and some loggers are made before that (the
// signal front end's, which must exist before the first SIGHUP), so every
// logger writes through the sink, which takes the format when it is set.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
)

// logFormats are -log-format's values, logLevels -log-level's.
var (
	logFormats = []string{"text", "json"}
	logLevels  = []string{"info", "debug"}
)

// logSink is the process's one log output, its format and its level.
type logSink struct {
	w     io.Writer
	h     atomic.Pointer[slog.Handler] // text until setFormat
	level slog.LevelVar                // info until setLevel
}

func newLogSink(w io.Writer) *logSink {
	s := &logSink{w: w}
	var h slog.Handler = slog.NewTextHandler(w, s.options())
	s.h.Store(&h)
	return s
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
