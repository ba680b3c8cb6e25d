package main

// hostileclients_test.go: one table of hostile clients, each run over
// plain HTTP/1.1, HTTP/1.1 over TLS and HTTP/2. With -max-conns 1 the
// hostile client holds the only slot; the protection it meets must free
// it within a few of its short timeouts, while every other timeout is
// long, so a protection missing over one transport shows as a client
// served only after 10 s, or never. The good client comes only once the
// server has closed the hostile connection, since at -max-conns an idle
// one would be closed to make room for it: that protection has its own
// row, where every timeout is long. Any change to deadlines or
// connection handling runs this table (DESIGN.md, "Before a release").

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostileShort is the timeout under test; hostileLong every other one.
const (
	hostileShort = 300 * time.Millisecond
	hostileLong  = 10 * time.Second
	// hostileWithin is how soon the hostile connection must close and
	// the good client be served: well below a long timeout, which is
	// what a broken short one gives, with room for a busy box (a TLS
	// pipelining non-reader, whose server must first fill megabytes of
	// buffers under -race beside two CPU-bound loops, took over 3 s).
	hostileWithin = 6 * time.Second
)

// hostileTransport is how a client reaches the server.
type hostileTransport struct {
	name string
	tls  bool
	alpn string // over TLS: http/1.1 or h2
}

var hostileTransports = []hostileTransport{{"http1", false, ""}, {"tls-http1", true, "http/1.1"}, {"http2", true, "h2"}}

// hostileClient is one way of misbehaving: short sets the timeout it
// must meet; act misbehaves on a connection that has completed its TLS
// handshake and, for HTTP/2, sent its preface and SETTINGS (raw: on the
// bare TCP connection, before any of that). transports limits it to
// those named; none: every one. evicted: no timeout frees the slot, the
// good client's arrival does (evict.go), so the good client does not
// wait for the hostile connection to close first.
type hostileClient struct {
	name       string
	short      func(*runtimeConfig)
	raw        bool
	transports []string
	evicted    bool
	act        func(c net.Conn, h2 bool)
}

var hostileClients = []hostileClient{
	// Over HTTP/2 the write timeout resets the stalled stream, and the
	// connection, idle then, goes at the idle timeout.
	{name: "non-reader", short: func(c *runtimeConfig) { c.WriteTimeout, c.IdleTimeout = hostileShort, hostileShort },
		act: func(c net.Conn, h2 bool) { request(c, h2, 1, "GET", "/big.bin", true) }},
	{name: "pipelining non-reader", short: func(c *runtimeConfig) { c.WriteTimeout, c.IdleTimeout = hostileShort, hostileShort },
		act: func(c net.Conn, h2 bool) {
			// Both requests in one write; the first answer fits the
			// buffers, the second does not.
			var b strings.Builder
			request(&b, h2, 1, "GET", "/1k.bin", true)
			request(&b, h2, 3, "GET", "/4m.bin", true)
			io.WriteString(c, b.String())
		}},
	{name: "slowloris headers", short: func(c *runtimeConfig) { c.HeaderTimeout, c.IdleTimeout = hostileShort, hostileShort },
		act: func(c net.Conn, h2 bool) {
			if h2 {
				// A header block begun and never ended: no END_HEADERS,
				// no CONTINUATION.
				writeFrame(c, 0x1, 0x0, 1, getHeaderBlock("/", "127.0.0.1"))
				return
			}
			go func() {
				for _, b := range []byte("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa") {
					if _, err := c.Write([]byte{b}); err != nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}},
	{name: "stalled body", short: func(c *runtimeConfig) { c.BodyTimeout, c.IdleTimeout = hostileShort, hostileShort },
		act: func(c net.Conn, h2 bool) {
			// Content-Length: 100, five bytes of it, then nothing.
			if h2 {
				writeFrame(c, 0x1, 0x4, 1, postHeaderBlock("/", "127.0.0.1", 100))
				writeFrame(c, 0x0, 0x0, 1, []byte("hello"))
				return
			}
			io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nhello")
		}},
	{name: "stream window never opens", short: func(c *runtimeConfig) { c.WriteTimeout, c.IdleTimeout = hostileShort, hostileShort },
		transports: []string{"http2"},
		act: func(c net.Conn, h2 bool) {
			// Reads every byte, never sends WINDOW_UPDATE: the stream
			// stalls with no socket write pending.
			request(c, h2, 1, "GET", "/big.bin", true)
			go io.Copy(io.Discard, c)
		}},
	{name: "connects and sends nothing", short: func(c *runtimeConfig) { c.HeaderTimeout = hostileShort }, raw: true,
		act: func(net.Conn, bool) {}},
	{name: "handshakes and sends nothing", short: func(c *runtimeConfig) { c.HeaderTimeout, c.IdleTimeout = hostileShort, hostileShort },
		transports: []string{"tls-http1", "http2"},
		act:        func(net.Conn, bool) {}},
	{name: "idle after one request", short: func(c *runtimeConfig) { c.IdleTimeout = hostileShort },
		act: func(c net.Conn, h2 bool) {
			request(c, h2, 1, "GET", "/", true)
			go io.Copy(io.Discard, c)
		}},
	{name: "idle after one request, every timeout long", short: func(*runtimeConfig) {}, evicted: true,
		act: func(c net.Conn, h2 bool) {
			request(c, h2, 1, "GET", "/", true)
			go io.Copy(io.Discard, c)
		}},
}

// request writes one request on stream (HTTP/2) or as HTTP/1.1.
func request(w io.Writer, h2 bool, stream uint32, method, path string, end bool) {
	if h2 {
		flags := byte(0x4) // END_HEADERS
		if end {
			flags |= 0x1 // END_STREAM
		}
		writeFrame(w, 0x1, flags, stream, getHeaderBlock(path, "127.0.0.1"))
		return
	}
	fmt.Fprintf(w, "%s %s HTTP/1.1\r\nHost: x\r\n\r\n", method, path)
}

// postHeaderBlock is the HPACK block of POST https://authority/path with
// a content-length.
func postHeaderBlock(path, authority string, length int) []byte {
	b := []byte{0x83, 0x87} // :method POST, :scheme https
	b = append(append(b, 0x04, byte(len(path))), path...)
	b = append(append(b, 0x01, byte(len(authority))), authority...)
	n := fmt.Sprint(length)
	return append(append(b, 0x0f, 0x0d, byte(len(n))), n...) // content-length, static index 28
}

func TestHostileClientsLoseTheirSlotOverEveryTransport(t *testing.T) {
	dir, _, _ := writeTimeoutSite(t)
	writeFile(t, dir, "4m.bin", strings.Repeat("4", 4<<20))
	id, err := selfSignedIdentity("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, hc := range hostileClients {
		for _, tr := range hostileTransports {
			if hc.transports != nil && !containsString(hc.transports, tr.name) {
				continue
			}
			t.Run(hc.name+"/"+tr.name, func(t *testing.T) {
				cfg := runtimeConfig{MaxConns: 1, HeaderTimeout: hostileLong, IdleTimeout: hostileLong,
					WriteTimeout: hostileLong, BodyTimeout: hostileLong, DrainTimeout: time.Second}
				hc.short(&cfg)
				if tr.tls {
					cfg.TLS = id
				}
				addr, open := hostileRuntime(t, dir, cfg)
				c := dialHostile(t, addr, tr, hc.raw)
				hc.act(c, tr.alpn == "h2")
				if !hc.evicted {
					ctx, cancel := context.WithTimeout(context.Background(), hostileWithin)
					defer cancel()
					if pollUntil(ctx, 5*time.Millisecond, func() bool { return open.Load() == 0 }) != nil {
						t.Fatalf("the hostile connection still open after %v; want it closed within a few of its short timeout %v (the others %v)",
							hostileWithin, hostileShort, hostileLong)
					}
				}
				began := time.Now()
				code, err := goodClient(addr, tr)
				took := time.Since(began)
				if err != nil || code != http.StatusOK || took > hostileWithin {
					why := fmt.Sprintf("its short timeout %v, the others %v", hostileShort, hostileLong)
					if hc.evicted {
						why = fmt.Sprintf("every timeout %v: the idle connection makes room", hostileLong)
					}
					t.Errorf("a good client behind it: %d, %v after %v; want 200 within %v (%s)",
						code, err, took.Round(time.Millisecond), hostileWithin, why)
				}
			})
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hostileRuntime serves the static site in dir with cfg as it is, and
// counts the connections it has accepted and not yet closed in open.
func hostileRuntime(t *testing.T, dir string, cfg runtimeConfig) (addr string, open *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{TCPListener: ln.(*net.TCPListener)}
	serveStatic(t, cl, dir, cfg)
	return ln.Addr().String(), &cl.open
}

// countingListener counts the connections it accepted that are not yet
// closed. Its connections embed *net.TCPConn, so the server still finds
// ReadFrom (sendfile), CloseWrite and SyscallConn on them.
type countingListener struct {
	*net.TCPListener
	open atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.TCPListener.AcceptTCP()
	if err != nil {
		return nil, err
	}
	l.open.Add(1)
	return &countedConn{TCPConn: c, open: &l.open}, nil
}

// countedConn counts itself closed once, however often it is closed.
type countedConn struct {
	*net.TCPConn
	once sync.Once
	open *atomic.Int64
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.TCPConn.Close()
}

// dialHostile connects over tr with a small receive buffer, so what it
// does not read stalls the server soon; unless raw, it completes the TLS
// handshake and the HTTP/2 preface, answering the server's SETTINGS.
func dialHostile(t *testing.T, addr string, tr hostileTransport, raw bool) net.Conn {
	t.Helper()
	c := stallingConn(t, addr)
	if raw || !tr.tls {
		return c
	}
	tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{tr.alpn}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != tr.alpn {
		t.Fatalf("ALPN = %q; want %q", p, tr.alpn)
	}
	if tr.alpn == "h2" {
		io.WriteString(tc, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
		writeFrame(tc, 0x4, 0, 0, nil)   // SETTINGS, none
		writeFrame(tc, 0x4, 0x1, 0, nil) // and the server's, acknowledged unread
	}
	return tc
}

// goodClient fetches / over tr on a new connection.
func goodClient(addr string, tr hostileTransport) (int, error) {
	transport := &http.Transport{DisableKeepAlives: true}
	scheme := "http"
	if tr.tls {
		scheme = "https"
		transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, NextProtos: []string{tr.alpn}}
		transport.ForceAttemptHTTP2 = tr.alpn == "h2"
	}
	c := &http.Client{Timeout: 2 * hostileLong, Transport: transport}
	resp, err := c.Get(scheme + "://" + addr + "/")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	if want := map[bool]int{true: 2, false: 1}[tr.alpn == "h2"]; resp.ProtoMajor != want {
		return resp.StatusCode, fmt.Errorf("answered over HTTP/%d", resp.ProtoMajor)
	}
	return resp.StatusCode, nil
}
