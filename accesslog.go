package main

// accesslog.go is the access log: one line per request, in the combined
// log format, or a JSON object with -log-format json. Where a line goes
// is the process's to say: a worker hands its lines to the parent on a
// pipe of their own (its fd 6), and the parent writes every worker's
// lines, whole and once, to stderr or to the one file, which SIGUSR1
// reopens for logrotate (output.go); direct mode writes its own the
// same way.
//
// A request never waits on a write: its line goes into a buffer that a
// goroutine writes out every accessFlush, or sooner once accessBatch
// bytes wait. Past accessBufMax bytes waiting (the reader is stuck),
// lines are dropped and counted, never left to block a handler.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	accessFlush  = 50 * time.Millisecond
	accessBatch  = 32 << 10
	accessBufMax = 1 << 20
	// maxAccessField caps each field a client chooses (the request line,
	// Referer, User-Agent), so a line stays under 8 KiB.
	maxAccessField = 2 << 10
)

// accessCutMark ends a field cut at maxAccessField.
const accessCutMark = "[cut]"

// setAccessLog wraps the handler with the access log when one is asked
// for, writing to w: the parent's pipe in a worker, stderr or the file
// in direct mode.
func (srv *server) setAccessLog(w io.Writer) {
	if srv.cfg.AccessLog == "" || w == nil {
		return
	}
	al := newAccessLog(w, srv.cfg.AccessLogJSON, srv.cfg.AccessLogSkip)
	srv.access = al
	next := srv.http.Handler
	srv.http.Handler = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if al.skip[r.URL.Path] {
			next.ServeHTTP(rw, r)
			return
		}
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
				al.log(r, rec, start)
				panic(p)
			}
			al.log(r, rec, start)
		}()
		next.ServeHTTP(rec, r)
	})
}

// accessLog buffers the lines of requests and writes them out.
type accessLog struct {
	w    io.Writer
	json bool
	skip map[string]bool

	mu      sync.Mutex
	buf     []byte // lines waiting
	spare   []byte // the other buffer, which the writer swaps in
	closed  bool
	dropped atomic.Int64 // lines dropped: accessBufMax bytes were waiting

	kick chan struct{} // accessBatch bytes wait
	stop chan struct{} // close: write what waits and end
	done chan struct{} // the writer has ended
}

func newAccessLog(w io.Writer, asJSON bool, skip []string) *accessLog {
	al := &accessLog{w: w, json: asJSON, skip: map[string]bool{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	for _, p := range skip {
		al.skip[p] = true
	}
	go al.writer()
	return al
}

// log adds the request's line.
func (al *accessLog) log(r *http.Request, rec *statusRecorder, start time.Time) {
	now := time.Now()
	al.mu.Lock()
	if al.closed || len(al.buf) > accessBufMax {
		al.mu.Unlock()
		al.dropped.Add(1)
		return
	}
	// Formatted in place, at the end of the buffer: no line of its own
	// to allocate and copy.
	if al.json {
		al.buf = appendJSONAccess(al.buf, r, rec, now, now.Sub(start))
	} else {
		al.buf = appendCombined(al.buf, r, rec, now, now.Sub(start))
	}
	full := len(al.buf) >= accessBatch
	al.mu.Unlock()
	if full {
		select {
		case al.kick <- struct{}{}:
		default:
		}
	}
}

// writer writes what waits every accessFlush, at a kick, and once more
// at close.
func (al *accessLog) writer() {
	defer close(al.done)
	t := time.NewTicker(accessFlush)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-al.kick:
		case <-al.stop:
			al.flush()
			return
		}
		al.flush()
	}
}

// flush writes the lines waiting, in one write.
func (al *accessLog) flush() {
	al.mu.Lock()
	b := al.buf
	al.buf = al.spare[:0]
	al.mu.Unlock()
	if len(b) > 0 {
		al.w.Write(b)
	}
	al.mu.Lock()
	al.spare = b[:0]
	al.mu.Unlock()
}

// close writes the lines still waiting and ends the writer; lines logged
// after it are dropped. It returns how many lines were dropped in all.
func (al *accessLog) close() int64 {
	al.mu.Lock()
	already := al.closed
	al.closed = true
	al.mu.Unlock()
	if !already {
		close(al.stop)
	}
	<-al.done
	return al.dropped.Load()
}

// appendCombined appends the request's line in the combined log format,
// with the duration appended, to b. Quoted as Go quotes a string, which
// escapes whatever a client put in the request line or its headers.
func appendCombined(b []byte, r *http.Request, rec *statusRecorder, now time.Time, took time.Duration) []byte {
	b = append(b, r.RemoteAddr...)
	b = append(b, " - - ["...)
	b = append(b, clfTime(now)...)
	b = append(b, "] "...)
	b = strconv.AppendQuote(b, capField(r.Method+" "+r.RequestURI+" "+r.Proto))
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(rec.status), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, rec.bytes, 10)
	b = append(b, ' ')
	b = strconv.AppendQuote(b, capField(orDash(r.Referer())))
	b = append(b, ' ')
	b = strconv.AppendQuote(b, capField(orDash(r.UserAgent())))
	b = append(b, ' ')
	b = strconv.AppendInt(b, took.Microseconds(), 10)
	return append(b, "us\n"...)
}

// clfStamp is the combined format's time of one second.
type clfStamp struct {
	sec int64
	s   string
}

// clfNow is the last second formatted: a time is formatted once a
// second, not once a request.
var clfNow atomic.Pointer[clfStamp]

// clfTime returns now as the combined format writes it.
func clfTime(now time.Time) string {
	sec := now.Unix()
	if c := clfNow.Load(); c != nil && c.sec == sec {
		return c.s
	}
	s := now.Format("02/Jan/2006:15:04:05 -0700")
	clfNow.Store(&clfStamp{sec: sec, s: s})
	return s
}

// accessRecord is a JSON access line: the keys of a log record (time,
// level, msg), then the request's.
type accessRecord struct {
	Time       string `json:"time"`
	Level      string `json:"level"`
	Msg        string `json:"msg"`
	Remote     string `json:"remote"`
	Method     string `json:"method"`
	URI        string `json:"uri"`
	Proto      string `json:"proto"`
	Status     int    `json:"status"`
	Bytes      int64  `json:"bytes"`
	Referer    string `json:"referer"`
	UserAgent  string `json:"user_agent"`
	DurationUS int64  `json:"duration_us"`
}

// appendJSONAccess appends the request's line as a JSON object to b.
func appendJSONAccess(b []byte, r *http.Request, rec *statusRecorder, now time.Time, took time.Duration) []byte {
	line, _ := json.Marshal(accessRecord{Time: now.Format(time.RFC3339Nano), Level: "INFO", Msg: "access",
		Remote: r.RemoteAddr, Method: capField(r.Method), URI: capField(r.RequestURI), Proto: r.Proto,
		Status: rec.status, Bytes: rec.bytes, Referer: capField(r.Referer()), UserAgent: capField(r.UserAgent()),
		DurationUS: took.Microseconds()})
	return append(append(b, line...), '\n')
}

// capField cuts a field a client chose at maxAccessField bytes, with a
// mark.
func capField(s string) string {
	if len(s) <= maxAccessField {
		return s
	}
	return strings.ToValidUTF8(s[:maxAccessField], "") + accessCutMark
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// accessFile is the access log file, which reopen opens again at its
// path: after logrotate moved it, new lines go to a new file, and no line
// is split or lost between the two.
type accessFile struct {
	path   string
	mu     sync.Mutex
	f      *os.File
	closed bool // Close ran: a reopen after it opens nothing
}

func openAccessFile(path string) (*accessFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open access log: %w", err)
	}
	return &accessFile{path: path, f: f}, nil
}

// Write writes b, whole lines, to the file open now.
func (a *accessFile) Write(b []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.f.Write(b)
}

// reopen opens the file at its path again and closes the one it
// replaces; if the open fails, the old file stays in use.
func (a *accessFile) reopen() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("reopen access log: %w", err)
	}
	old := a.f
	a.f = f
	return old.Close()
}

// Close closes the file; a reopen after it does nothing.
func (a *accessFile) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	return a.f.Close()
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
