package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The -write-timeout claims: a client that stops reading loses its slot
// whatever it did before (an earlier response, a TLS handshake, an HTTP/2
// stream it never opens the window of), and a client that reads slowly but
// steadily is never cut.

// writeTimeoutSite is a site with two small files, a cached 1 MiB file and an
// uncached 2 MiB one, which goes out by sendfile.
func writeTimeoutSite(t *testing.T) (dir string, cached, streamed []byte) {
	dir = t.TempDir()
	writeFile(t, dir, "index.html", "hello")
	writeFile(t, dir, "1k.bin", strings.Repeat("s", 1<<10))
	writeFile(t, dir, "60k.bin", strings.Repeat("m", 60<<10))
	cached = patterned(maxCacheEntryBytes)
	streamed = patterned(2 << 20)
	for name, b := range map[string][]byte{"cached.bin": cached, "streamed.bin": streamed, "big.bin": patterned(32 << 20)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, cached, streamed
}

func patterned(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>16)
	}
	return b
}

// stallingConn dials addr with a small receive buffer, so a response that
// is not read stalls the server's writes soon.
func stallingConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).SetReadBuffer(16 << 10)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestWriteTimeoutHoldsAfterTheFirstResponse(t *testing.T) {
	dir, _, _ := writeTimeoutSite(t)
	addr := startRuntime(t, dir, runtimeConfig{MaxConns: 1, WriteTimeout: 300 * time.Millisecond})
	// The first response is written whole, and net/http then clears the
	// write deadline; the small writes of the responses after it stall with
	// no deadline unless ours is re-armed.
	c := stallingConn(t, addr)
	reqs := "GET /1k.bin HTTP/1.1\r\nHost: x\r\n\r\n" + strings.Repeat("GET /60k.bin HTTP/1.1\r\nHost: x\r\n\r\n", 300)
	go io.WriteString(c, reqs) // the server stops reading it once it stalls
	code, body, err := get(addr, "/")
	if err != nil || code != 200 || body != "hello" {
		t.Fatalf("GET / behind a pipelining client that stopped reading = %d %q %v; want 200 once the write timeout frees the slot", code, body, err)
	}
}

func TestWriteTimeoutHoldsOverTLS(t *testing.T) {
	dir, _, _ := writeTimeoutSite(t)
	id, err := selfSignedIdentity("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	addr := startRuntime(t, dir, runtimeConfig{MaxConns: 1, WriteTimeout: 300 * time.Millisecond, TLS: id})
	// crypto/tls clears the write deadline after the handshake, so even
	// the first response stalled with none.
	raw := stallingConn(t, addr)
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	code, body, err := getTLS(addr, "/")
	if err != nil || code != 200 || body != "hello" {
		t.Fatalf("GET / behind a TLS client that stopped reading = %d %q %v; want 200 once the write timeout frees the slot", code, body, err)
	}
}

// getTLS fetches path over a new HTTP/1.1 TLS connection.
func getTLS(addr, path string) (int, string, error) {
	return fetch(&http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, "https://"+addr+path)
}

func TestSteadySlowReaderIsNeverCut(t *testing.T) {
	dir, cached, streamed := writeTimeoutSite(t)
	// Each file takes several write timeouts to read at this pace, while
	// every 64 KiB takes a fraction of one. Small socket buffers on both
	// sides keep the kernel from taking the whole file at once, as it can
	// on loopback.
	const timeout = 500 * time.Millisecond
	addr := serveRuntime(t, smallSendBuffers(t), dir, runtimeConfig{WriteTimeout: timeout})
	for _, tc := range []struct {
		path string
		want []byte
	}{{"/cached.bin", cached}, {"/streamed.bin", streamed}} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Above twice loopback's 64 KiB segment, or the window would open
		// only in bursts.
		c.(*net.TCPConn).SetReadBuffer(128 << 10)
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", tc.path)
		got, err := readSlowly(c, 100<<10, 100*time.Millisecond)
		_, body, _ := bytes.Cut(got, []byte("\r\n\r\n"))
		if !bytes.Equal(body, tc.want) {
			t.Errorf("GET %s read at 1 MB/s = %d of %d bytes (%v); want all of it", tc.path, len(body), len(tc.want), err)
		}
	}
}

// smallSendBuffers is a loopback listener whose connections have 32 KiB
// send buffers (Linux doubles it), inherited from the listening socket.
func smallSendBuffers(t *testing.T) net.Listener {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		rc.Control(func(fd uintptr) {
			err = setSendBuffer(fd, 32<<10)
		})
		return err
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// readSlowly reads c to EOF, at most n bytes every pause.
func readSlowly(c net.Conn, n int, pause time.Duration) ([]byte, error) {
	var out bytes.Buffer
	buf := make([]byte, n)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		k, err := c.Read(buf)
		out.Write(buf[:k])
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return out.Bytes(), err
		}
		time.Sleep(pause)
	}
}

func TestHTTP2StreamWithoutWindowUpdateIsCut(t *testing.T) {
	dir, _, _ := writeTimeoutSite(t)
	addr := startRuntime(t, dir, runtimeConfig{MaxConns: 1, WriteTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond, TLS: testIdentity(t)})
	// The client reads every byte the server sends, but never opens the
	// 64 KiB flow-control window again, so the stream stalls with no
	// socket write pending, in one of the handler's writes.
	streamUntilReset(t, addr, "/big.bin", nil)
	// With the stream gone the connection is idle, so the idle timeout
	// ends it and frees the only slot.
	code, body, err := getTLS(addr, "/")
	if err != nil || code != 200 || body != "hello" {
		t.Fatalf("GET / behind a stalled HTTP/2 client = %d %q %v; want 200 once its connection is freed", code, body, err)
	}
}

func TestHTTP2ResponseStalledAtItsLastFlushIsCut(t *testing.T) {
	dir, _, _ := writeTimeoutSite(t)
	addr := startRuntime(t, dir, runtimeConfig{MaxConns: 1, WriteTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond, TLS: testIdentity(t)})
	// A stream window of 0 (SETTINGS_INITIAL_WINDOW_SIZE): the handler's
	// 1 KiB fits net/http's buffer, so the handler returns, and the stream
	// stalls in the flush net/http does after it, outside servery's writer.
	if data := streamUntilReset(t, addr, "/1k.bin", []byte{0, 4, 0, 0, 0, 0}); data != 0 {
		t.Fatalf("%d bytes of DATA through a window of 0", data)
	}
}

func TestHTTP2HandlerSlowerThanTheWriteTimeoutIsNotCut(t *testing.T) {
	const timeout = 200 * time.Millisecond
	// It computes before its first write and between its writes, without
	// a flush, each time for longer than the write timeout: no write waits
	// on the client meanwhile, so no deadline may cut it.
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * timeout)
		io.WriteString(w, "computed ")
		time.Sleep(2 * timeout)
		io.WriteString(w, "slowly")
	})
	body, proto, err := getHTTP2(t, slow, runtimeConfig{WriteTimeout: timeout})
	if proto != 2 || err != nil || body != "computed slowly" {
		t.Errorf("HTTP/%d handler computing %v before and between its writes: %q, %v; want its whole answer", proto, 2*timeout, body, err)
	}
}

// testIdentity is a self-signed identity for 127.0.0.1.
func testIdentity(t *testing.T) *tlsIdentity {
	t.Helper()
	id, err := selfSignedIdentity("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// streamUntilReset speaks HTTP/2 to addr as a client that sends settings
// (a SETTINGS payload; nil: none) and asks for path, then reads every
// frame the server sends but never sends WINDOW_UPDATE. It returns the
// DATA bytes that came before the server reset the stream, and fails t if
// the connection ends, or 10 s pass, first.
func streamUntilReset(t *testing.T, addr, path string, settings []byte) int {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN = %q; want h2", p)
	}
	c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	writeFrame(c, 0x4, 0, 0, settings)
	writeFrame(c, 0x1, 0x5, 1, getHeaderBlock(path, "127.0.0.1"))
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var data int
	for {
		typ, flags, stream, payload, err := readFrame(r)
		if err != nil {
			t.Fatalf("after %d bytes of DATA: %v; want the stream reset by the write timeout", data, err)
		}
		switch {
		case typ == 0x4 && flags&0x1 == 0: // SETTINGS: acknowledge
			writeFrame(c, 0x4, 0x1, 0, nil)
		case typ == 0x0:
			data += len(payload)
		case typ == 0x3 && stream == 1: // RST_STREAM
			return data
		case typ == 0x7: // GOAWAY
			t.Fatalf("GOAWAY after %d bytes of DATA before the stream was reset", data)
		}
	}
}

// writeFrame writes one HTTP/2 frame (RFC 9113 §4.1).
func writeFrame(w io.Writer, typ, flags byte, stream uint32, payload []byte) error {
	hdr := make([]byte, 9, 9+len(payload))
	hdr[0], hdr[1], hdr[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	hdr[3], hdr[4] = typ, flags
	binary.BigEndian.PutUint32(hdr[5:], stream)
	_, err := w.Write(append(hdr, payload...))
	return err
}

// readFrame reads one HTTP/2 frame.
func readFrame(r io.Reader) (typ, flags byte, stream uint32, payload []byte, err error) {
	var hdr [9]byte
	if _, err = io.ReadFull(r, hdr[:]); err != nil {
		return
	}
	n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
	payload = make([]byte, n)
	_, err = io.ReadFull(r, payload)
	return hdr[3], hdr[4], binary.BigEndian.Uint32(hdr[5:]) & 0x7fffffff, payload, err
}

// getHeaderBlock is the HPACK block (RFC 7541) of GET https://authority/path:
// two fields from the static table, two literals without indexing whose
// names are in it, no Huffman coding.
func getHeaderBlock(path, authority string) []byte {
	b := []byte{0x82, 0x87} // :method GET, :scheme https
	b = append(append(b, 0x04, byte(len(path))), path...)
	return append(append(b, 0x01, byte(len(authority))), authority...)
}

func TestHTTP2StreamThatPausesAfterAFlushIsNotCut(t *testing.T) {
	const timeout = 200 * time.Millisecond
	events := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			fmt.Fprintf(w, "event %d\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(2 * timeout) // longer than the write timeout, between writes
		}
	})
	body, proto, err := getHTTP2(t, events, runtimeConfig{WriteTimeout: timeout})
	if proto != 2 || err != nil || body != "event 0\nevent 1\nevent 2\n" {
		t.Errorf("HTTP/%d stream pausing %v after each flush: %q, %v; want all three events", proto, 2*timeout, body, err)
	}
}

// getHTTP2 serves h with cfg over TLS and gets / from it with net/http's
// HTTP/2 client: the body, the protocol's major version and the error.
func getHTTP2(t *testing.T, h http.Handler, cfg runtimeConfig) (string, int, error) {
	t.Helper()
	cfg.IdleTimeout, cfg.DrainTimeout, cfg.TLS = 5*time.Second, time.Second, testIdentity(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveHandler(t, ln, h, cfg)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true,
	}}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Get("https://" + ln.Addr().String() + "/")
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), resp.ProtoMajor, err
}

func TestHTTP2HandlerStartedLateIsNotCutWhileItComputes(t *testing.T) {
	const timeout = 2 * time.Second
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			<-release
			return
		}
		time.Sleep(2 * timeout)
		io.WriteString(w, "computed")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveHandler(t, ln, h, runtimeConfig{WriteTimeout: timeout, IdleTimeout: 10 * time.Second, DrainTimeout: time.Second, TLS: testIdentity(t)})
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	writeFrame(c, 0x4, 0, 0, nil)
	// 250 handlers (net/http's limit per connection) that outlive their
	// streams, reset by the client: the next stream's handler waits in
	// net/http's queue until one returns, while the deadline net/http
	// armed as that stream opened runs down.
	for id := uint32(1); id < 500; id += 2 {
		writeFrame(c, 0x1, 0x5, id, getHeaderBlock("/block", "127.0.0.1"))
	}
	for id := uint32(1); id < 500; id += 2 {
		writeFrame(c, 0x3, 0, id, []byte{0, 0, 0, 8}) // RST_STREAM CANCEL
	}
	// The visits keep the phase of the first handler's arrival; the late
	// stream opens an eighth of a write timeout after it, so the visit
	// that must move its deadline comes an eighth before the deadline, and
	// one a move at half left would wait for, an eighth after.
	time.Sleep(timeout / 8)
	const late = 501
	writeFrame(c, 0x1, 0x5, late, getHeaderBlock("/compute", "127.0.0.1"))
	// Started 0.4 write timeouts late: more than a visit every quarter
	// with a move at half left could bear, less than half.
	time.AfterFunc(timeout*4/10, func() { close(release) })
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		typ, flags, stream, payload, err := readFrame(r)
		if err != nil {
			t.Fatalf("no answer from a handler that computes: %v", err)
		}
		switch {
		case typ == 0x4 && flags&0x1 == 0:
			writeFrame(c, 0x4, 0x1, 0, nil)
		case typ == 0x0 && stream == late && len(payload) > 0:
			return
		case typ == 0x3 && stream == late:
			t.Fatal("the stream of a handler started late, which computes without writing, was reset")
		}
	}
}

// blockingDeadliner is a stream whose connection does not take a
// message: SetWriteDeadline blocks until unblock closes. entered closes
// at the first call; calls counts them, done those that returned.
type blockingDeadliner struct {
	entered, unblock chan struct{}
	once             sync.Once
	calls, done      atomic.Int64
}

func (d *blockingDeadliner) SetWriteDeadline(time.Time) error {
	d.calls.Add(1)
	d.once.Do(func() { close(d.entered) })
	<-d.unblock
	d.done.Add(1)
	return nil
}

// dueWriter is a stream writer the next visit of holds finds due.
func dueWriter(dl writeDeadliner, timeout time.Duration) *streamWriter {
	return &streamWriter{dl: dl, timeout: timeout, deadline: time.Now()}
}

func TestAMoveWaitingOnOneConnectionHoldsUpNoOtherHandler(t *testing.T) {
	const timeout = 40 * time.Millisecond
	holds := &streamHolds{period: timeout / 4}
	stuck := &blockingDeadliner{entered: make(chan struct{}), unblock: make(chan struct{})}
	s := dueWriter(stuck, timeout)
	holds.add(s)
	<-stuck.entered
	others := make(chan struct{})
	go func() {
		for range 10 {
			free := &blockingDeadliner{entered: make(chan struct{}), unblock: make(chan struct{})}
			close(free.unblock) // their connections take a message at once
			o := dueWriter(free, timeout)
			holds.add(o)
			holds.remove(o)
		}
		close(others)
	}()
	select {
	case <-others:
	case <-time.After(20 * time.Second):
		t.Error("other handlers could not start or end while one stream's move waited on its connection")
	}
	close(stuck.unblock)
	holds.remove(s)
}

func TestAMoveNeverReachesAStreamWhoseHandlerReturned(t *testing.T) {
	const timeout = 40 * time.Millisecond
	holds := &streamHolds{period: timeout / 4}
	slow := &blockingDeadliner{entered: make(chan struct{}), unblock: make(chan struct{})}
	s := dueWriter(slow, timeout)
	holds.add(s)
	<-slow.entered // a move under way, which its connection holds up
	go func() {
		// Long enough for a remove that does not wait to return first.
		time.Sleep(50 * time.Millisecond)
		close(slow.unblock)
	}()
	holds.remove(s) // the handler returns
	if n, done := slow.calls.Load(), slow.done.Load(); n != done {
		t.Fatalf("the handler returned with %d deadline move(s) on its stream under way; want it to wait for them", n-done)
	}
}

func TestWithoutNetHTTPsHTTP2ServerTLSClientsGetHTTP1(t *testing.T) {
	t.Setenv("GODEBUG", "http2server=0")
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	body, proto, err := getHTTP2(t, ok, runtimeConfig{WriteTimeout: time.Second})
	if proto != 1 || err != nil || body != "ok" {
		t.Errorf("GODEBUG=http2server=0, a client offering h2: HTTP/%d %q, %v; want HTTP/1.1 \"ok\"", proto, body, err)
	}
}

func TestHTTP2PauseAfterAFlushItsClientHeldUpIsNotCut(t *testing.T) {
	const timeout = 3 * time.Second
	events := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "event 0\n")
		w.(http.Flusher).Flush() // waits for the client's WINDOW_UPDATE
		time.Sleep(timeout * 5 / 4)
		io.WriteString(w, "event 1\n")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveHandler(t, ln, events, runtimeConfig{WriteTimeout: timeout, IdleTimeout: 10 * time.Second, DrainTimeout: time.Second, TLS: testIdentity(t)})
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	writeFrame(c, 0x4, 0, 0, []byte{0, 4, 0, 0, 0, 0}) // a stream window of 0
	writeFrame(c, 0x1, 0x5, 1, getHeaderBlock("/", "127.0.0.1"))
	// The window opens after the last visit before the stream's deadline
	// and in time for the flush: the flush ends with less of the deadline
	// left than the pause after it lasts, and no visit comes before it
	// passes.
	time.AfterFunc(timeout*7/8, func() {
		writeFrame(c, 0x8, 0, 1, []byte{0, 0x10, 0, 0}) // WINDOW_UPDATE, 1 MiB
	})
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var data string
	for {
		typ, flags, stream, payload, err := readFrame(r)
		if err != nil {
			t.Fatalf("after %q: %v", data, err)
		}
		switch {
		case typ == 0x4 && flags&0x1 == 0:
			writeFrame(c, 0x4, 0x1, 0, nil)
		case typ == 0x0 && stream == 1:
			if data += string(payload); flags&0x1 != 0 {
				if data != "event 0\nevent 1\n" {
					t.Errorf("answer %q; want both events", data)
				}
				return
			}
		case typ == 0x3 && stream == 1:
			t.Fatalf("stream reset after %q: the pause after a flush its client let through in time was cut", data)
		}
	}
}
