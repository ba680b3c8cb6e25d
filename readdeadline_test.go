package main

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// countingConn counts the read deadlines that reach the socket, and
// tells reads, on its channel, as they reach it.
type countingConn struct {
	net.Conn
	sets  atomic.Int64
	reads chan struct{}
}

func (c *countingConn) Read(b []byte) (int, error) {
	select {
	case c.reads <- struct{}{}:
	default:
	}
	return c.Conn.Read(b)
}

func (c *countingConn) SetReadDeadline(t time.Time) error {
	c.sets.Add(1)
	return c.Conn.SetReadDeadline(t)
}

// lazyPair returns a limitConn over one end of a loopback TCP
// connection, the count of read deadlines it puts on its socket, and the
// other end.
func lazyPair(t *testing.T) (*limitConn, *countingConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		peer.Close()
		t.Fatal(err)
	}
	cc := &countingConn{Conn: c, reads: make(chan struct{}, 1)}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return &limitConn{Conn: cc}, cc, peer
}

// passed waits until the clock is past d: the event a lazily kept
// deadline is about.
func passed(d time.Time) {
	for time.Now().Before(d) {
		time.Sleep(time.Until(d))
	}
}

func TestReadDeadlinesLaterThanTheOneInForceReachNoTimer(t *testing.T) {
	c, cc, _ := lazyPair(t)
	now := time.Now()
	c.SetReadDeadline(now.Add(time.Hour)) // the header timeout: put on
	c.SetReadDeadline(time.Time{})        // header read: kept
	for i := 1; i <= 100; i++ {           // keep-alive requests: kept
		c.SetReadDeadline(now.Add(time.Hour + time.Duration(i)*time.Second))
		c.SetReadDeadline(time.Time{})
	}
	if n := cc.sets.Load(); n != 1 {
		t.Fatalf("%d read deadlines reached the socket, want 1", n)
	}
	c.SetReadDeadline(now.Add(time.Minute)) // earlier: put on at once
	if n := cc.sets.Load(); n != 2 {
		t.Fatalf("an earlier deadline: %d read deadlines reached the socket, want 2", n)
	}
}

// TestAReadDeadlineMovedLaterEndsTheReadNeitherSoonerNorLater moves a
// deadline on the socket later, and reads until it ends the read: first
// stepped on several times (a span shorter than the wait), then with a
// span far longer, which must not carry the deadline past the one wanted.
func TestAReadDeadlineMovedLaterEndsTheReadNeitherSoonerNorLater(t *testing.T) {
	c, _, peer := lazyPair(t)
	// Were a deadline carried an hour on, the read would block until the
	// peer gives up and end with EOF, not a timeout.
	giveUp := time.AfterFunc(20*time.Second, func() { peer.Close() })
	defer giveUp.Stop()
	for _, span := range []time.Duration{40 * time.Millisecond, time.Hour} {
		c.rd.span = int64(span)
		c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		want := time.Now().Add(300 * time.Millisecond)
		c.SetReadDeadline(want)
		_, err := c.Read(make([]byte, 1))
		if !isTimeout(err) {
			t.Fatalf("span %v: read: %v, want a timeout", span, err)
		}
		if at := time.Now(); at.Before(want) {
			t.Fatalf("span %v: the read timed out %v before its deadline, at the one it replaced", span, want.Sub(at))
		}
	}
}

func TestAClearedReadDeadlineNoLongerEndsAnyRead(t *testing.T) {
	c, _, peer := lazyPair(t)
	early := time.Now().Add(20 * time.Millisecond)
	c.SetReadDeadline(early)
	c.SetReadDeadline(time.Time{})
	passed(early)
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if n, err := c.Read(b); err != nil || n != 1 || b[0] != 'x' {
		t.Fatalf("read after a cleared deadline passed: %d %q %v, want the byte", n, b[:n], err)
	}
}

func TestAnEarlierReadDeadlineEndsABlockedReadAtOnce(t *testing.T) {
	c, cc, peer := lazyPair(t)
	c.SetReadDeadline(time.Now().Add(time.Hour))
	// Were the deadline kept lazily, the read would block until the peer
	// gives up and end with EOF, not a timeout.
	giveUp := time.AfterFunc(20*time.Second, func() { peer.Close() })
	defer giveUp.Stop()
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		done <- err
	}()
	<-cc.reads // the read has reached the socket
	// net/http ends its background read this way: a deadline long past.
	c.SetReadDeadline(time.Unix(1, 0))
	if err := <-done; !isTimeout(err) {
		t.Fatalf("blocked read after a deadline in the past: %v, want a timeout", err)
	}
	want := time.Now().Add(50 * time.Millisecond)
	c.SetReadDeadline(want)
	if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("read with an earlier deadline: %v, want a timeout", err)
	}
	if at := time.Now(); at.Before(want) {
		t.Fatalf("the read timed out %v before its deadline, at the past one it replaced", want.Sub(at))
	}
}

// deadlineCountingListener counts the read deadlines that reach its connections'
// sockets.
type deadlineCountingListener struct {
	net.Listener
	sets, timeouts atomic.Int64
}

func (l *deadlineCountingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sharedCountConn{Conn: c, sets: &l.sets, timeouts: &l.timeouts}, nil
}

type sharedCountConn struct {
	net.Conn
	sets, timeouts *atomic.Int64
}

func (c *sharedCountConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if isTimeout(err) {
		c.timeouts.Add(1)
	}
	return n, err
}

func (c *sharedCountConn) SetReadDeadline(t time.Time) error {
	c.sets.Add(1)
	return c.Conn.SetReadDeadline(t)
}

// readDeadlinesPerRequest serves keep-alive requests with srv over ln
// and returns how many read deadlines reached the socket per request
// after the first, and how many reads ended at a deadline in all.
func readDeadlinesPerRequest(t *testing.T, srv *http.Server, ln net.Listener, counted *deadlineCountingListener) (float64, int64) {
	t.Helper()
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	t.Cleanup(client.CloseIdleConnections)
	const requests = 200
	get := func() {
		resp, err := client.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get() // the connection, and its first deadlines
	before := counted.sets.Load()
	for range requests {
		get()
	}
	return float64(counted.sets.Load()-before) / requests, counted.timeouts.Load()
}

// TestAKeepAliveRequestPutsAtMostTwoReadDeadlinesOnTheSocket serves
// keep-alive requests with the header and idle timeouts on: net/http asks
// for a read deadline six times a request, and only two reach the
// socket, the one that ends its background read and the step after it;
// no read ends early for want of a re-arm, the first request's included.
// Bare net/http, which sets no timeouts, is measured beside it for the
// log.
func TestAKeepAliveRequestPutsAtMostTwoReadDeadlinesOnTheSocket(t *testing.T) {
	bareLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bareCounted := &deadlineCountingListener{Listener: bareLn}
	bare, _ := readDeadlinesPerRequest(t, &http.Server{}, bareCounted, bareCounted)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	counted := &deadlineCountingListener{Listener: ln}
	ll := newLimitListener(counted, 0, 0, time.Minute, new(atomic.Int64))
	ll.readSpan = 10 * time.Second
	timed := &http.Server{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	ours, early := readDeadlinesPerRequest(t, timed, ll, counted)

	t.Logf("read deadlines on the socket per request: %.2f with the header and idle timeouts, %.2f for bare net/http; reads ended early: %d", ours, bare, early)
	if ours > 2.05 {
		t.Errorf("%.2f read deadlines reached the socket per request, want at most 2", ours)
	}
	// A timeout that ends a background read is net/http's own; one more
	// per request would be a read that failed to re-arm.
	if requests := int64(201); early > requests {
		t.Errorf("%d reads ended at a deadline over %d requests: some failed for want of a re-arm", early, requests)
	}
}

// BenchmarkReadDeadlines times the read deadlines of a keep-alive
// request as net/http sets them: bare (no timeouts: none as it reads a
// request, its background read ended with a deadline in the past, and
// none again), with the header and idle timeouts on the socket (as
// servery's were before lazyRead), and with them through lazyRead. The
// reads themselves are left out: with lazyRead no read fails to re-arm
// a deadline (TestAKeepAliveRequestPutsAtMostTwoReadDeadlinesOnTheSocket
// counts the deadlines that reach the socket), so they cost the same.
func BenchmarkReadDeadlines(b *testing.B) {
	const header, idle = 10 * time.Second, time.Minute
	past := time.Unix(1, 0)
	request := func(c net.Conn, timeouts bool) {
		now := time.Now()
		if timeouts {
			c.SetReadDeadline(now.Add(header)) // readRequest
			c.SetReadDeadline(time.Time{})     // its header read
		} else {
			c.SetReadDeadline(time.Time{})
		}
		c.SetReadDeadline(past) // abortPendingRead
		c.SetReadDeadline(time.Time{})
		if timeouts {
			c.SetReadDeadline(now.Add(idle)) // idle
		} else {
			c.SetReadDeadline(time.Time{})
		}
	}
	for _, bc := range []struct {
		name     string
		lazy     bool
		timeouts bool
	}{{"bare", false, false}, {"timeouts-on-the-socket", false, true}, {"timeouts-lazy", true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			peer, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer peer.Close()
			raw, err := ln.Accept()
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()
			var c net.Conn = raw
			if bc.lazy {
				lc := &limitConn{Conn: raw}
				lc.rd.span = int64(header)
				c = lc
			}
			b.ReportAllocs()
			for b.Loop() {
				request(c, bc.timeouts)
			}
		})
	}
}
