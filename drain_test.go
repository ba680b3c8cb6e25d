package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The drain's claims about what a client sees and when the App may stop:
// a keep-alive client is never cut under a request it may already have
// sent, every response whose header the handler commits during a drain
// tells its client to leave, and the drain ends only after every handler
// has returned, whatever became of its client.

// startDrainServer serves h on a loopback listener, as the direct mode
// and a worker do, with a drain timeout that no test here reaches unless
// it means to. The test drains it itself; a cleanup drain, without delay,
// covers a test that failed before.
func startDrainServer(t *testing.T, h http.Handler, edit ...func(*runtimeConfig)) (*server, string) {
	t.Helper()
	cfg := runtimeConfig{HeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, DrainTimeout: 10 * time.Second}
	for _, e := range edit {
		e(&cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveHandler(t, ln, h, cfg), ln.Addr().String()
}

// beginDrain starts srv's drain and returns once it has begun; the drain's
// result arrives on the channel.
func beginDrain(srv *server) <-chan error {
	done := make(chan error, 1)
	go func() { done <- srv.drain(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pollUntil(ctx, time.Millisecond, srv.draining.Load)
	return done
}

// keepAliveConn is a raw HTTP/1.1 client connection, so a test sees
// exactly what the server did with it: no client library retries.
type keepAliveConn struct {
	net.Conn
	br *bufio.Reader
}

func dialKeepAlive(addr string) (*keepAliveConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &keepAliveConn{Conn: c, br: bufio.NewReader(c)}, nil
}

// send writes GET path on the connection.
func (c *keepAliveConn) send(path string) error {
	_, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: servery\r\n\r\n")
	return err
}

// receive reads one whole response and its body.
func (c *keepAliveConn) receive() (*http.Response, string, error) {
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// ask sends GET path and reads the whole answer, which must be 200 with
// body want; it reports whether the answer said Connection: close.
func (c *keepAliveConn) ask(path, want string) (closing bool, err error) {
	if err := c.send(path); err != nil {
		return false, fmt.Errorf("send GET %s: %w", path, err)
	}
	resp, body, err := c.receive()
	switch {
	case err != nil:
		return false, fmt.Errorf("GET %s: %w", path, err)
	case resp.StatusCode != http.StatusOK || body != want:
		return false, fmt.Errorf("GET %s = %d %q; want 200 %q", path, resp.StatusCode, body, want)
	}
	return resp.Close, nil
}

// spanningDrain is how long after the drain began a response that spans
// it still runs: longer than closeGrace, so that it ends only once a
// drain that counted closeGrace from its own start had given up waiting.
const spanningDrain = closeGrace + closeGrace/2

// spanningHandler answers /fast at once, and on /slow sends its header and
// first line, reports that on begun, and sends the rest spanningDrain
// later.
func spanningHandler(begun chan<- struct{}) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/fast", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "begun\n")
		w.(http.Flusher).Flush()
		begun <- struct{}{}
		time.Sleep(spanningDrain)
		io.WriteString(w, "done\n")
	})
	return mux
}

func TestKeepAliveRequestAfterAResponseThatSpansADrainIsAnswered(t *testing.T) {
	const trials = 10
	results := make(chan error, trials)
	for range trials {
		begun := make(chan struct{}, 1)
		srv, addr := startDrainServer(t, spanningHandler(begun))
		go func() { results <- spanDrainOnce(srv, addr, begun) }()
	}
	lost := 0
	for range trials {
		if err := <-results; err != nil {
			lost++
			t.Log(err)
		}
	}
	if lost != 0 {
		t.Errorf("%d of %d keep-alive requests sent right after a response that spanned a drain were lost; want 0", lost, trials)
	}
}

// spanDrainOnce is one trial on a server of its own, whose /slow handler
// reports on begun. One client is in the middle of a long response when
// the drain begins: its header, sent before, could not say Connection:
// close, so the client sends its next request on the connection as soon
// as the response ends. Another client is idle when the drain begins and
// sends its next request a moment later. Both must be answered, with
// Connection: close, and the drain must then end cleanly.
func spanDrainOnce(srv *server, addr string, begun <-chan struct{}) error {
	long, err := dialKeepAlive(addr)
	if err != nil {
		return err
	}
	defer long.Close()
	idle, err := dialKeepAlive(addr)
	if err != nil {
		return err
	}
	defer idle.Close()
	if _, err := idle.ask("/fast", "ok"); err != nil {
		return fmt.Errorf("before the drain: %w", err)
	}
	if err := long.send("/slow"); err != nil {
		return err
	}
	<-begun
	drained := beginDrain(srv)
	time.Sleep(closeGrace / 10)
	if closing, err := idle.ask("/fast", "ok"); err != nil || !closing {
		return fmt.Errorf("connection idle when the drain began: Connection: close %v, %v; want an answer that closes", closing, err)
	}
	if resp, body, err := long.receive(); err != nil || body != "begun\ndone\n" {
		return fmt.Errorf("response spanning the drain: %q, %v; want it whole", body, err)
	} else if resp.Close {
		return errors.New("response whose header went out before the drain says Connection: close")
	}
	if closing, err := long.ask("/fast", "ok"); err != nil || !closing {
		return fmt.Errorf("next request after a response that spanned the drain: Connection: close %v, %v; want an answer that closes", closing, err)
	}
	if err := <-drained; err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	return nil
}

func TestResponseCommittedAfterADrainBeganSaysConnectionClose(t *testing.T) {
	// Each handler begins before the drain and commits its header only
	// after it began, in one of the ways a handler can.
	commits := map[string]func(w http.ResponseWriter){
		"WriteHeader": func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK); io.WriteString(w, "late") },
		"Write":       func(w http.ResponseWriter) { w.Write([]byte("late")) },
		"WriteString": func(w http.ResponseWriter) { io.WriteString(w, "late") },
		"ReadFrom":    func(w http.ResponseWriter) { w.(io.ReaderFrom).ReadFrom(strings.NewReader("late")) },
		"Flush":       func(w http.ResponseWriter) { w.(http.Flusher).Flush(); io.WriteString(w, "late") },
		"ResponseController.Flush": func(w http.ResponseWriter) {
			http.NewResponseController(w).Flush()
			io.WriteString(w, "late")
		},
		"nothing written": func(w http.ResponseWriter) {},
	}
	began, drainBegun := make(chan struct{}, len(commits)), make(chan struct{})
	mux := http.NewServeMux()
	for name, commit := range commits {
		mux.HandleFunc("/"+strings.ReplaceAll(name, " ", "-"), func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			began <- struct{}{}
			<-drainBegun
			commit(w)
		})
	}
	srv, addr := startDrainServer(t, mux)
	t.Cleanup(func() { closeOnce(drainBegun) })
	conns := map[string]*keepAliveConn{}
	for name := range commits {
		c, err := dialKeepAlive(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.send("/" + strings.ReplaceAll(name, " ", "-")); err != nil {
			t.Fatal(err)
		}
		conns[name] = c
	}
	for range commits {
		<-began
	}
	drained := beginDrain(srv)
	closeOnce(drainBegun)
	for name, c := range conns {
		resp, body, err := c.receive()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !resp.Close {
			t.Errorf("%s after the drain began: %q without Connection: close; want the client told to leave", name, body)
			continue
		}
		if n, err := c.br.ReadByte(); err != io.EOF {
			t.Errorf("%s: after a response that says Connection: close, read %q, %v; want the connection closed", name, n, err)
		}
	}
	if err := <-drained; err != nil {
		t.Errorf("drain: %v", err)
	}
}

func TestHTTP1ResponseBegunDuringADrainDoesNotHoldBackShutdown(t *testing.T) {
	// Shutdown is what tells HTTP/2 clients to leave, so the drain must
	// not keep it waiting for an HTTP/1 client that has been told.
	begun, release := make(chan struct{}, 1), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/fast", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "begun\n")
		w.(http.Flusher).Flush()
		begun <- struct{}{}
		<-release
		io.WriteString(w, "done\n")
	})
	srv, addr := startDrainServer(t, mux)
	t.Cleanup(func() { closeOnce(release) })
	shutdown := make(chan struct{})
	var once sync.Once // the cleanup drains again
	srv.http.RegisterOnShutdown(func() { once.Do(func() { close(shutdown) }) })
	c, err := dialKeepAlive(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ask("/fast", "ok"); err != nil {
		t.Fatal(err)
	}
	drained := beginDrain(srv)
	if err := c.send("/slow"); err != nil {
		t.Fatal(err)
	}
	<-begun
	select {
	case <-shutdown:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown waited for an HTTP/1 response that says Connection: close")
	}
	closeOnce(release)
	if resp, body, err := c.receive(); err != nil || body != "begun\ndone\n" || !resp.Close {
		t.Errorf("response begun during the drain: %q, %v; want it whole, with Connection: close", body, err)
	}
	if err := <-drained; err != nil {
		t.Errorf("drain: %v", err)
	}
}

// outlivingHandler is a handler that ignores its request's context: once
// it sees its client gone it reports that on left and keeps running until
// release closes; then it sets returned.
func outlivingHandler(started, left chan<- struct{}, release <-chan struct{}, returned *atomic.Bool, proto *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		proto.Store(int32(r.ProtoMajor))
		started <- struct{}{}
		<-r.Context().Done()
		left <- struct{}{}
		<-release
		returned.Store(true)
	}
}

func TestDrainEndsOnlyAfterEveryHandlerReturned(t *testing.T) {
	id, err := selfSignedIdentity("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		tls   bool
		proto int32
		ask   func(t *testing.T, addr string, keep bool) (leave func()) // starts a request
		keep  bool                                                      // the client keeps its connection
		// outlive is how long the handler runs on once its client has
		// left: longer than a drain that waited only for connections
		// would take.
		outlive time.Duration
	}{
		"HTTP/2 stream reset, connection closed": {tls: true, proto: 2, ask: askH2, outlive: 700 * time.Millisecond},
		// net/http closes an HTTP/2 connection a second after its
		// GOAWAY, once no stream is open.
		"HTTP/2 stream reset, connection kept": {tls: true, proto: 2, ask: askH2, keep: true, outlive: 2500 * time.Millisecond},
		"HTTP/1 client gone":                   {proto: 1, ask: askH1, outlive: 700 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			started, left, release := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
			var returned atomic.Bool
			var proto atomic.Int32
			srv, addr := startDrainServer(t, outlivingHandler(started, left, release, &returned, &proto), func(cfg *runtimeConfig) {
				if tc.tls {
					cfg.TLS = id
				}
			})
			t.Cleanup(func() { closeOnce(release) })
			leave := tc.ask(t, addr, tc.keep)
			<-started
			leave()
			<-left
			drained := drainHeldFor(t, srv, tc.outlive, "a handler whose client left")
			closeOnce(release)
			if err := <-drained; err != nil || !returned.Load() || proto.Load() != tc.proto {
				t.Errorf("drain over HTTP/%d = %v, handler returned %v; want HTTP/%d, nil, true", proto.Load(), err, returned.Load(), tc.proto)
			}
		})
	}
}

// askH2 starts an HTTP/2 request; leave cancels it, which resets its
// stream. Unless keep is set leave then closes the client's connection,
// as a closed browser tab does, so the server has no connection left to
// wait for.
func askH2(t *testing.T, addr string, keep bool) (leave func()) {
	conns := make(chan net.Conn, 1)
	tr := &http.Transport{ForceAttemptHTTP2: true, DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}}).DialContext(ctx, network, addr)
		if err == nil {
			conns <- c
		}
		return c, err
	}}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+addr+"/", nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := (&http.Client{Transport: tr}).Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		tr.CloseIdleConnections()
	})
	return func() {
		cancel()
		<-done
		if !keep {
			(<-conns).Close()
		}
	}
}

// askH1 sends an HTTP/1 request; leave closes its connection, which is
// how an HTTP/1 client leaves.
func askH1(t *testing.T, addr string, _ bool) (leave func()) {
	c, err := dialKeepAlive(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.send("/"); err != nil {
		t.Fatal(err)
	}
	return func() { c.Close() }
}

func TestDirectReloadRetiresAHandlerOnlyAfterItsResetStreamsReturned(t *testing.T) {
	id, err := selfSignedIdentity("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	started, left, release := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	var returned atomic.Bool
	var proto atomic.Int32
	old := &directApp{h: outlivingHandler(started, left, release, &returned, &proto), generation: 1}
	apps := &directSwap{}
	apps.current.Store(old)
	_, addr := startDrainServer(t, apps, func(cfg *runtimeConfig) { cfg.TLS = id })
	t.Cleanup(func() { closeOnce(release) })
	leave := askH2(t, addr, true)
	<-started
	leave()
	<-left
	apps.current.Swap(&directApp{h: http.NotFoundHandler(), generation: 2})
	// What directReload.retire waits for before the old handler's stop.
	idle := make(chan error, 1)
	go func() { idle <- old.idle(context.Background()) }()
	select {
	case err := <-idle:
		t.Fatalf("replaced handler idle (%v) while its reset HTTP/%d stream's handler still ran; its stop would run under it", err, proto.Load())
	case <-time.After(700 * time.Millisecond):
	}
	closeOnce(release)
	if err := <-idle; err != nil || !returned.Load() {
		t.Errorf("replaced handler idle = %v, handler returned %v; want nil, true", err, returned.Load())
	}
}

func TestDrainWaitsForAHandlerThatHijackedItsConnection(t *testing.T) {
	var returned atomic.Bool
	started, release := make(chan struct{}, 1), make(chan struct{})
	srv, addr := startDrainServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer c.Close()
		started <- struct{}{}
		<-release
		returned.Store(true)
	}))
	t.Cleanup(func() { closeOnce(release) })
	c, err := dialKeepAlive(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.send("/")
	<-started
	drained := drainHeldFor(t, srv, 700*time.Millisecond, "a handler that hijacked its connection")
	closeOnce(release)
	if err := <-drained; err != nil || !returned.Load() {
		t.Errorf("drain = %v, handler returned %v; want nil, true", err, returned.Load())
	}
}

// drainHeldFor begins srv's drain and fails the test if it returns within
// hold, while the handler (what) still runs: the worker, or the direct
// mode, would run the App's stop under it. It returns the drain's result.
func drainHeldFor(t *testing.T, srv *server, hold time.Duration, what string) <-chan error {
	t.Helper()
	drained := make(chan error, 1)
	go func() { drained <- srv.drain(context.Background()) }()
	select {
	case err := <-drained:
		t.Fatalf("drain returned (%v) while %s still ran; the App's stop would run under it", err, what)
	case <-time.After(hold):
	}
	return drained
}

// closeOnce closes ch unless it is closed already.
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func TestDrainGivesUpOnAHandlerThatOutlivesTheDrainTimeout(t *testing.T) {
	id, err := selfSignedIdentity("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}, 1), make(chan struct{})
	t.Cleanup(func() { close(release) })
	const timeout = 200 * time.Millisecond
	srv, addr := startDrainServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
		<-release // until the test ends
	}), func(cfg *runtimeConfig) { cfg.TLS, cfg.DrainTimeout = id, timeout })
	leave := askH2(t, addr, false)
	<-started
	leave()
	began := time.Now()
	err = srv.drain(context.Background())
	// Generous: the claim is that the drain ends, at about its timeout,
	// rather than waiting for the handler.
	if took := time.Since(began); !errors.Is(err, errDrainCut) || took > timeout+5*time.Second {
		t.Errorf("drain with a handler that never returns = %v after %v; want %v after about %v", err, took, errDrainCut, timeout)
	}
}

func TestHTTP1WriterAllocatesNothingAndKeepsTheWritersInterfaces(t *testing.T) {
	srv := &server{}
	r := httptest.NewRequest("GET", "/", nil)
	r = r.WithContext(srv.connContext(r.Context(), &limitConn{}))
	w := &discardStrings{discardWriter{hdr: http.Header{}}}
	var missing []string
	h := srv.counting(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		missing = missing[:0]
		if _, ok := w.(io.ReaderFrom); !ok {
			missing = append(missing, "io.ReaderFrom")
		}
		if _, ok := w.(io.StringWriter); !ok {
			missing = append(missing, "io.StringWriter")
		}
		if _, ok := w.(http.Flusher); !ok {
			missing = append(missing, "http.Flusher")
		}
		if _, ok := w.(http.Hijacker); !ok {
			missing = append(missing, "http.Hijacker")
		}
		if _, ok := w.(interface{ Unwrap() http.ResponseWriter }); !ok {
			missing = append(missing, "Unwrap")
		}
		io.WriteString(w, "hello")
	}))
	allocs := testing.AllocsPerRun(100, func() { h.ServeHTTP(w, r) })
	if allocs != 0 || len(missing) != 0 || w.hdr.Get("Connection") != "" {
		t.Errorf("HTTP/1 request outside a drain: %v allocs, lacks %v, Connection %q; want 0, none, none", allocs, missing, w.hdr.Get("Connection"))
	}
	srv.draining.Store(true)
	h.ServeHTTP(w, r)
	if got := w.hdr.Get("Connection"); got != "close" {
		t.Errorf("HTTP/1 request during a drain: Connection %q; want close", got)
	}
}

// discardStrings is a discardWriter with WriteString, as net/http's writer
// has.
type discardStrings struct{ discardWriter }

func (w *discardStrings) WriteString(s string) (int, error) { return len(s), nil }

func TestHTTP2ConnectionWhoseHandshakeEndsAfterShutdownBeganIsToldToGo(t *testing.T) {
	cfg := runtimeConfig{WriteTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second, HeaderTimeout: 10 * time.Second, DrainTimeout: 5 * time.Second, TLS: testIdentity(t)}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	srv, err := newServer(cfg, h, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	shutdown := make(chan struct{})
	srv.http.RegisterOnShutdown(func() { close(shutdown) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.serve(ln)
	t.Cleanup(func() { srv.http.Close() })
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// The client's Finished waits until Shutdown has begun: the server has
	// the connection, out of its HTTP/1 set (helloH2), but net/http's
	// HTTP/2 server does not yet, so Shutdown's own GOAWAY misses it.
	gc := &heldFinished{Conn: raw, held: make(chan struct{}), release: shutdown}
	tc := tls.Client(gc, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	handshake := make(chan error, 1)
	go func() { handshake <- tc.Handshake() }()
	<-gc.held
	drained := make(chan error, 1)
	go func() { drained <- srv.drain(context.Background()) }()
	if err := <-handshake; err != nil {
		t.Fatal(err)
	}
	tc.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	writeFrame(tc, 0x4, 0, 0, nil)
	writeFrame(tc, 0x1, 0x5, 1, getHeaderBlock("/", "127.0.0.1"))
	r := bufio.NewReader(tc)
	tc.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		typ, flags, _, _, err := readFrame(r)
		if err != nil {
			t.Fatalf("no GOAWAY before %v (drain: %v); want one once its stream ends", err, <-drained)
		}
		if typ == 0x4 && flags&0x1 == 0 {
			writeFrame(tc, 0x4, 0x1, 0, nil)
		}
		if typ == 0x7 {
			break
		}
	}
	if err := <-drained; err != nil {
		t.Errorf("drain = %v; want it to end once the told connection leaves", err)
	}
}

// heldFinished passes a TLS client's first write (its ClientHello) and
// holds the next (its Finished, sent once the server's answer is in)
// until release closes; held closes when it begins to hold.
type heldFinished struct {
	net.Conn
	writes  int
	held    chan struct{}
	release chan struct{}
}

func (c *heldFinished) Write(b []byte) (int, error) {
	if c.writes++; c.writes == 2 {
		close(c.held)
		<-c.release
	}
	return c.Conn.Write(b)
}
