package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// setAccessLog wraps the handler with an access log when one is asked for:
// "-" writes to stderr, a path appends to that file. A file is allowed
// only in direct mode: N workers appending to one file would need a single
// owner that servery does not have yet.
func (srv *server) setAccessLog() error {
	var w io.Writer
	switch srv.cfg.AccessLog {
	case "":
		return nil
	case "-":
		w = os.Stderr
	default:
		f, err := os.OpenFile(srv.cfg.AccessLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("open access log: %w", err)
		}
		srv.logFile, w = f, f
	}
	al := &accessLog{w: w}
	next := srv.http.Handler
	srv.http.Handler = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: rw, status: http.StatusOK}
		defer func() {
			// A response a panic cut off (answerPanic) is logged too: with
			// the status it sent and the bytes it got out, or, if it sent
			// nothing, nginx's 444 (closed without a response).
			if p := recover(); p != nil {
				if !rec.began {
					rec.status = statusNoResponse
				}
				al.write(r, rec, time.Since(start))
				panic(p)
			}
			al.write(r, rec, time.Since(start))
		}()
		next.ServeHTTP(rec, r)
	})
	return nil
}

// accessLog writes one line per request in the combined log format, with
// the duration appended. Lines are written whole under a lock so they
// never interleave.
type accessLog struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *accessLog) write(r *http.Request, rec *statusRecorder, took time.Duration) {
	line := fmt.Sprintf("%s - - [%s] %q %d %d %q %q %dus\n",
		r.RemoteAddr, time.Now().Format("02/Jan/2006:15:04:05 -0700"),
		r.Method+" "+r.RequestURI+" "+r.Proto, rec.status, rec.bytes,
		orDash(r.Referer()), orDash(r.UserAgent()), took.Microseconds())
	l.mu.Lock()
	defer l.mu.Unlock()
	io.WriteString(l.w, line)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// statusRecorder remembers the status and body size for the log line.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	began  bool // the header may have gone out
}

// statusNoResponse is what the access log says of a request that got no
// response at all, as nginx's 444 does.
const statusNoResponse = 444

func (r *statusRecorder) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		r.status, r.began = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.began = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// ReadFrom keeps the sendfile path of the writer underneath for large files.
func (r *statusRecorder) ReadFrom(src io.Reader) (int64, error) {
	r.began = true
	n, err := io.Copy(r.ResponseWriter, src)
	r.bytes += n
	return n, err
}

// Flush and SetWriteDeadline reach the writer underneath, so the handler
// and servery's own wrappers inside the access log (streams' HTTP/2
// write deadlines) find them as they would without it.
func (r *statusRecorder) Flush() {
	r.began = true
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) SetWriteDeadline(t time.Time) error {
	if d, ok := r.ResponseWriter.(writeDeadliner); ok {
		return d.SetWriteDeadline(t)
	}
	return http.ErrNotSupported
}

// Unwrap lets http.ResponseController reach the connection underneath.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
