package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// evictWithin is how soon a new client must be served at -max-conns while
// a connection is idle: far below the tests' -idle-timeout (10 min), which
// is how long it would wait if nothing made room.
const evictWithin = 10 * time.Second

// evictRuntime serves h with -max-conns maxConns and every other timeout
// far longer than the test.
func evictRuntime(t *testing.T, h http.Handler, maxConns int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveHandler(t, ln, h, runtimeConfig{MaxConns: maxConns, HeaderTimeout: 10 * time.Minute,
		IdleTimeout: 10 * time.Minute, BodyTimeout: 10 * time.Minute, DrainTimeout: time.Second})
	return ln.Addr().String()
}

// hello answers hello.
var hello = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") })

// closedByServer reports whether the server closed c: a read finds EOF
// within evictWithin.
func closedByServer(c *keepAliveConn) bool {
	c.SetReadDeadline(time.Now().Add(evictWithin))
	_, err := c.br.ReadByte()
	return err == io.EOF
}

func TestIdleKeepAliveConnectionsMakeRoomAtMaxConns(t *testing.T) {
	const maxConns = 3
	addr := evictRuntime(t, hello, maxConns)
	// Each holder is answered once, so it holds a slot, then stays open
	// and idle.
	holders := make([]*keepAliveConn, maxConns)
	for i := range holders {
		c, err := dialKeepAlive(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.ask("/", "hello"); err != nil {
			t.Fatalf("holder %d: %v", i, err)
		}
		holders[i] = c
	}
	began := time.Now()
	code, body, err := get(addr, "/")
	if err != nil || code != 200 || body != "hello" {
		t.Fatalf("a new client while %d idle keep-alive connections hold every slot: %d %q, %v after %v; want 200 at once, not at -idle-timeout",
			maxConns, code, body, err, time.Since(began).Round(time.Millisecond))
	}
	// One made room, closed before the new client was accepted; the
	// others still serve.
	var lost []error
	for _, c := range holders {
		c.SetDeadline(time.Now().Add(evictWithin))
		if _, err := c.ask("/", "hello"); err != nil {
			lost = append(lost, err)
		}
	}
	if len(lost) != 1 {
		t.Errorf("%d of %d idle connections closed for one new client (%v); want 1", len(lost), maxConns, lost)
	}
}

// TestEvictionClosesTheConnectionIdleLongest: idle connections are
// ordered by when they went idle, and the new client's room comes from
// the first.
func TestEvictionClosesTheConnectionIdleLongest(t *testing.T) {
	l := newTestLimitListener(t, 3, 0)
	conns := make([]*limitConn, 3)
	for i := range conns {
		dialOrFail(t, l)
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c.(*limitConn)
	}
	for _, i := range []int{1, 0, 2} { // 1 goes idle first
		conns[i].markIdle()
	}
	dialOrFail(t, l)
	select {
	case err := <-acceptAsync(l):
		if err != nil {
			t.Fatalf("Accept() with every slot held, three idle = %v", err)
		}
	case <-time.After(evictWithin):
		t.Fatalf("Accept() with every slot held, three idle, still waits after %v; want it to make room", evictWithin)
	}
	for i, c := range conns {
		if want := i == 1; c.evicted() != want {
			t.Errorf("connection %d (idle %s) evicted = %v; want %v", i, map[bool]string{true: "first", false: "later"}[i == 1], c.evicted(), want)
		}
	}
}

func TestRequestInFlightIsNeverEvicted(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	defer closeOnce(release)
	addr := evictRuntime(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		io.WriteString(w, "hello")
	}), 2)
	busy, err := dialKeepAlive(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if err := busy.send("/slow"); err != nil {
		t.Fatal(err)
	}
	<-started
	idle, err := dialKeepAlive(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := idle.ask("/", "hello"); err != nil {
		t.Fatal(err)
	}
	// Every slot is held, one by a request in flight: the idle one makes
	// room.
	if code, body, err := get(addr, "/"); err != nil || code != 200 || body != "hello" {
		t.Fatalf("a new client while one connection is idle and one answers: %d %q, %v; want 200 at once", code, body, err)
	}
	if !closedByServer(idle) {
		t.Errorf("the idle connection is still open after a new client was served; want it closed to make room")
	}
	closeOnce(release)
	if resp, body, err := busy.receive(); err != nil || resp.StatusCode != 200 || body != "hello" {
		t.Errorf("the request in flight as the new client came: %v, %q, %v; want 200 hello, whole", resp, body, err)
	}
}

// TestRequestOnAnEvictedConnectionNeverRuns: a request read from a
// connection after it was chosen to make room (its client sent it as the
// connection was closed) is dropped before its handler runs, so the
// close never lands under a running request.
func TestRequestOnAnEvictedConnectionNeverRuns(t *testing.T) {
	srv := &server{}
	lc := &limitConn{}
	lc.idle.Store(connEvicted)
	r := httptest.NewRequest("GET", "/", nil)
	r = r.WithContext(srv.connContext(r.Context(), lc))
	ran := false
	srv.counting(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true })).ServeHTTP(httptest.NewRecorder(), r)
	if ran || srv.served.Load() != 0 {
		t.Errorf("request on an evicted connection: handler ran %v, counted %d; want neither", ran, srv.served.Load())
	}
}
