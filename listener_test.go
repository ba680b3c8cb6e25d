package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// newTestLimitListener wraps a loopback listener.
func newTestLimitListener(t *testing.T, maxConns int, pace time.Duration) *limitListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(ln, maxConns, pace, 0, new(atomic.Int64))
	t.Cleanup(func() { l.Close() })
	return l
}

// acceptAsync accepts once in the background.
func acceptAsync(l *limitListener) <-chan error {
	done := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	return done
}

func dialOrFail(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestAcceptPaceNeverDelaysAnIdleWorker(t *testing.T) {
	l := newTestLimitListener(t, 0, time.Hour)
	dialOrFail(t, l)
	select {
	case err := <-acceptAsync(l):
		if err != nil {
			t.Fatalf("Accept() = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept with no open connection paused; want it immediate")
	}
}

func TestAcceptPacePausesABusyWorker(t *testing.T) {
	l := newTestLimitListener(t, 0, time.Hour)
	dialOrFail(t, l)
	dialOrFail(t, l)
	held, err := l.Accept() // one open connection: the next accept pauses
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	began := time.Now()
	c, err := l.Accept() // the second connection is already queued
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if waited := time.Since(began); waited < maxAcceptPause {
		t.Errorf("a busy worker accepted after %v; want a pause of at least %v", waited, maxAcceptPause)
	}
}

func TestAcceptPauseIsBoundedAndEndsOnClose(t *testing.T) {
	l := newTestLimitListener(t, 0, time.Hour)
	for range 3 {
		dialOrFail(t, l)
	}
	held, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// One open connection and an hour's pace: the pause is still capped.
	if err := <-acceptAsync(l); err != nil {
		t.Fatalf("Accept() = %v; want a connection after at most %v", err, maxAcceptPause)
	}
	l.Close()
	if err := <-acceptAsync(l); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept() after Close = %v; want net.ErrClosed", err)
	}
}

func TestMaxConnsSlotFreedWhenConnectionCloses(t *testing.T) {
	l := newTestLimitListener(t, 1, 0)
	dialOrFail(t, l)
	dialOrFail(t, l)
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	done := acceptAsync(l)
	select {
	case err := <-done:
		t.Fatalf("second Accept() = %v with the only slot taken; want it to wait", err)
	case <-time.After(50 * time.Millisecond):
	}
	first.Close()
	first.Close() // a second close must not free a second slot
	if err := <-done; err != nil {
		t.Fatalf("Accept() after a slot freed = %v", err)
	}
	if n := l.open.Load(); n != 0 {
		t.Errorf("open connections = %d after both closed; want 0", n)
	}
}

// startRuntime serves dir in this process, as direct mode does, on a
// loopback listener, and drains it when the test ends.
func startRuntime(t *testing.T, dir string, cfg runtimeConfig) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveRuntime(t, ln, dir, cfg)
}

// serveRuntime is startRuntime on a listener of the test's making.
func serveRuntime(t *testing.T, ln net.Listener, dir string, cfg runtimeConfig) string {
	t.Helper()
	cfg.HeaderTimeout, cfg.DrainTimeout = 5*time.Second, time.Second
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 5 * time.Second
	}
	serveStatic(t, ln, dir, cfg)
	return ln.Addr().String()
}

// serveStatic serves the static site in dir on ln with cfg as it is.
func serveStatic(t *testing.T, ln net.Listener, dir string, cfg runtimeConfig) *server {
	t.Helper()
	static, err := newStaticHandler(dir, staticOptions{CacheBytes: 64 << 20, Revalidate: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { static.Close() })
	return serveHandler(t, ln, static, cfg)
}

// serveHandler serves h on ln with a runtime built for cfg, as the direct
// mode and a worker do, until the test's cleanup drains it without delay.
func serveHandler(t *testing.T, ln net.Listener, h http.Handler, cfg runtimeConfig) *server {
	t.Helper()
	srv, err := newServer(cfg, h, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	go srv.serve(ln)
	t.Cleanup(func() {
		hurry, cancel := context.WithCancel(context.Background())
		cancel()
		srv.drain(hurry)
	})
	return srv
}

func TestStalledReaderIsCutOffAndFreesItsSlot(t *testing.T) {
	dir, _ := siteWithBigFile(t)
	addr := startRuntime(t, dir, runtimeConfig{MaxConns: 1, WriteTimeout: 300 * time.Millisecond})
	// This client asks for 32 MiB and never reads: the socket buffers fill
	// and the server's write stalls, holding the only slot.
	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	fmt.Fprintf(stalled, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	code, body, err := get(addr, "/")
	if err != nil || code != 200 || body != "hello" {
		t.Fatalf("GET / behind a stalled reader = %d %q %v; want 200 once the write timeout frees the slot", code, body, err)
	}
}

func TestLargeFilesAndRangesCrossSendChunks(t *testing.T) {
	dir := t.TempDir()
	content := make([]byte, 2*writeChunk+12345)
	for i := range content {
		content[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := startRuntime(t, dir, runtimeConfig{WriteTimeout: time.Minute})
	for _, tc := range []struct {
		rng        string
		start, end int // the bytes expected, [start, end)
	}{
		{"", 0, len(content)},
		{"bytes=1000-", 1000, len(content)},
		{fmt.Sprintf("bytes=5-%d", writeChunk+99), 5, writeChunk + 100},
	} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/big.bin", nil)
		if tc.rng != "" {
			req.Header.Set("Range", tc.rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, content[tc.start:tc.end]) {
			t.Errorf("GET Range %q: %d bytes, %v; want bytes %d-%d exactly", tc.rng, len(got), err, tc.start, tc.end)
		}
	}
}

// limitConn must offer ReadFrom, or net/http would copy files through a
// buffer instead of sendfile.
var _ io.ReaderFrom = (*limitConn)(nil)

// TestExpectContinueIsAnsweredAtOnce: a request with Expect: 100-continue
// is answered at once, as RFC 9110 §10.1.1 asks, with -body-timeout 60 s:
// by its final status when the handler answers without reading the body
// (net/http then closes the connection, as bare net/http does), and by
// 100 Continue when the handler reads it. The client sends its body only
// after 100 Continue, so an answer that waits for the body comes only at
// the body timeout, and the 10 s read deadline fails the test.
func TestExpectContinueIsAnsweredAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveHandler(t, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/echo" {
			http.Error(w, "not here", http.StatusNotFound) // the body unread
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}), runtimeConfig{BodyTimeout: time.Minute, HeaderTimeout: time.Minute, IdleTimeout: time.Minute, DrainTimeout: time.Second})
	addr := ln.Addr().String()
	const head = "POST %s HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"

	t.Run("handler does not read", func(t *testing.T) {
		c, br := dialWithin(t, addr, 10*time.Second)
		fmt.Fprintf(c, head, "/")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("answer before the body: %v, %v; want 404 at once, not at -body-timeout", resp, err)
		}
		resp.Body.Close()
		if !resp.Close {
			t.Errorf("answer without Connection: close; want it, as bare net/http: the body may yet come")
		}
	})
	t.Run("handler reads", func(t *testing.T) {
		c, br := dialWithin(t, addr, 10*time.Second)
		fmt.Fprintf(c, head, "/echo")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusContinue {
			t.Fatalf("answer before the body: %v, %v; want 100 Continue at once", resp, err)
		}
		io.WriteString(c, "hello")
		resp, err = http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(body) != "hello" {
			t.Errorf("answer after the body: %d %q, %v; want 200 hello", resp.StatusCode, body, err)
		}
	})
}

// dialWithin connects to addr with a deadline within from now on every
// read and write, closed when the test ends.
func dialWithin(t *testing.T, addr string, within time.Duration) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, within)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(within))
	return c, bufio.NewReader(c)
}

// readDeadlineRecorder is a response writer that counts the read
// deadlines http.ResponseController puts on its request.
type readDeadlineRecorder struct {
	httptest.ResponseRecorder
	set int
}

func (w *readDeadlineRecorder) SetReadDeadline(time.Time) error {
	w.set++
	return nil
}

// TestAnHTTP2BodyGetsADeadlineOnlyWhenItIsRead: the HTTP/2 server
// discards no unread body, so a request whose handler does not read it
// costs no read deadline (each one is a message to the connection's serve
// goroutine, and a GET's body is not http.NoBody over HTTP/2); one whose
// handler reads gets it before its first read. An HTTP/1 body left unread
// gets one before the handler and one after, for the discard net/http
// does before it reads the next request; so does a "PRI * HTTP/2.0"
// request with headers, which the HTTP/1 server answers. An HTTP/2
// request whose client ended the stream with its headers has nothing to
// read and is not wrapped at all (noBody).
func TestAnHTTP2BodyGetsADeadlineOnlyWhenItIsRead(t *testing.T) {
	srv := &server{cfg: runtimeConfig{BodyTimeout: time.Minute}}
	h2 := &tls.ConnectionState{NegotiatedProtocol: "h2"}
	for _, tc := range []struct {
		name string
		req  func(*http.Request)
		read bool
		want int
	}{
		{"HTTP/2, unread", func(r *http.Request) { r.ProtoMajor, r.TLS = 2, h2 }, false, 0},
		{"HTTP/2, read", func(r *http.Request) { r.ProtoMajor, r.TLS = 2, h2 }, true, 2}, // armed for the read, cleared at its end
		// A stream the client keeps open without declaring a length
		// (ContentLength -1), or declaring 0 (the header is there): its
		// reads can block, so each gets its deadline.
		{"HTTP/2, no length, read", func(r *http.Request) { r.ProtoMajor, r.TLS, r.ContentLength = 2, h2, -1 }, true, 2},
		{"HTTP/2, declared 0, read", func(r *http.Request) {
			r.ProtoMajor, r.TLS, r.ContentLength = 2, h2, 0
			r.Header.Set("Content-Length", "0")
		}, true, 2},
		// A stream the client ended with its headers (a GET): net/http's
		// reader returns io.EOF at once, and it passes unwrapped.
		{"HTTP/2, stream ended with the headers, read", func(r *http.Request) {
			r.ProtoMajor, r.TLS, r.ContentLength, r.Body = 2, h2, 0, io.NopCloser(strings.NewReader(""))
		}, true, 0},
		{"HTTP/1.1, unread", func(r *http.Request) {}, false, 2},
		{"PRI * HTTP/2.0 over HTTP/1, unread", func(r *http.Request) { r.ProtoMajor, r.Method = 2, "PRI" }, false, 2},
		{"PRI * HTTP/2.0 over TLS HTTP/1, unread", func(r *http.Request) {
			r.ProtoMajor, r.Method, r.TLS = 2, "PRI", &tls.ConnectionState{NegotiatedProtocol: "http/1.1"}
		}, false, 2},
	} {
		w := &readDeadlineRecorder{}
		h := srv.bodies(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			if tc.read {
				io.Copy(io.Discard, r.Body)
			}
		}))
		r := httptest.NewRequest("POST", "/", &deadlineFirst{r: strings.NewReader("hello"), w: w, t: t})
		tc.req(r)
		h.ServeHTTP(w, r)
		if w.set != tc.want {
			t.Errorf("%s: %d read deadlines set; want %d", tc.name, w.set, tc.want)
		}
	}
}

// TestAnHTTP2BodyLeftOpenWithoutALengthIsCutAtTheBodyTimeout holds
// noBody to what net/http's HTTP/2 server does, not to what a test builds
// by hand: a client that sends its headers without ending the stream, and
// no Content-Length (Go's client does so for a body of unknown length),
// then stalls, is cut at -body-timeout. Were such a request taken for one
// without a body, its read would block until the client gave up.
func TestAnHTTP2BodyLeftOpenWithoutALengthIsCutAtTheBodyTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		read <- err
	})
	cfg := runtimeConfig{TLS: testIdentity(t), BodyTimeout: 300 * time.Millisecond, WriteTimeout: time.Minute,
		HeaderTimeout: time.Minute, IdleTimeout: time.Minute, DrainTimeout: time.Second}
	serveHandler(t, ln, h, cfg)
	stalled, write := io.Pipe()
	t.Cleanup(func() { write.Close() })
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Post("https://"+ln.Addr().String()+"/", "text/plain", stalled)
		if err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case err := <-read:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the stalled body's read ended with %v; want the body timeout's deadline", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a stalled HTTP/2 body with no length was not cut at -body-timeout (300ms) within 30s")
	}
}

// deadlineFirst is a request body that fails its test when read before
// any read deadline was set on its response writer.
type deadlineFirst struct {
	r io.Reader
	w *readDeadlineRecorder
	t *testing.T
}

func (b *deadlineFirst) Read(p []byte) (int, error) {
	if b.w.set == 0 {
		b.t.Errorf("the body read before any read deadline: a stalled first read is never cut")
	}
	return b.r.Read(p)
}

func TestAMultipartFormsTemporaryFilesAreRemovedAfterItsRequest(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where mime/multipart puts a file part too big for memory
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseMultipartForm(1 << 10); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		io.WriteString(w, "parsed")
	})
	for _, tc := range []struct {
		name string
		cfg  runtimeConfig
	}{
		{"HTTP/1.1 with a body timeout", runtimeConfig{BodyTimeout: time.Minute}},
		{"HTTP/1.1 without one", runtimeConfig{}},
		{"HTTP/2", runtimeConfig{BodyTimeout: time.Minute, WriteTimeout: time.Minute, TLS: testIdentity(t)}},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tc.cfg.HeaderTimeout, tc.cfg.IdleTimeout, tc.cfg.DrainTimeout = 5*time.Second, 5*time.Second, time.Second
		serveHandler(t, ln, h, tc.cfg)
		var body bytes.Buffer
		form := multipart.NewWriter(&body)
		part, _ := form.CreateFormFile("upload", "upload.bin")
		part.Write(make([]byte, 64<<10))
		form.Close()
		scheme, tr := "http", &http.Transport{}
		if tc.cfg.TLS != nil {
			scheme, tr = "https", &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Post(scheme+"://"+ln.Addr().String()+"/", form.FormDataContentType(), &body)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		if string(got) != "parsed" {
			t.Fatalf("%s: %q; want the form parsed", tc.name, got)
		}
		// net/http removes them once the response is out, so wait for it.
		var left []string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if left, _ = filepath.Glob(filepath.Join(tmp, "multipart-*")); len(left) == 0 {
				break
			}
		}
		if len(left) > 0 {
			t.Errorf("%s: %d temporary file(s) of a parsed multipart form left after its request", tc.name, len(left))
			for _, f := range left {
				os.Remove(f)
			}
		}
	}
}
