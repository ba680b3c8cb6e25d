package main

// hostile_test.go sends workers what an attacker or a broken client would:
// slow and malformed requests, oversized headers, connection floods and
// escape attempts, over raw TCP; and it checks what a worker process holds
// that it should not: key material and inherited descriptors.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rawResponse sends req on a new connection and returns what comes back
// until the server closes it or within passes; status is that of the first
// response, 0 if there was none. A reset after a response is not an error:
// a server that answers and closes before reading all of a bad request
// resets the connection, and Linux still delivers what came before.
func rawResponse(addr string, req []byte, within time.Duration) (status int, resp []byte, err error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(within))
	if _, err := conn.Write(req); err != nil {
		return 0, nil, err
	}
	resp, err = io.ReadAll(conn)
	if len(resp) > 0 && errors.Is(err, syscall.ECONNRESET) {
		err = nil
	}
	return statusOf(resp), resp, err
}

// statusOf returns the status code of the response at the start of b.
func statusOf(b []byte) int {
	line, _, _ := bytes.Cut(b, []byte("\r\n"))
	proto, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok || !bytes.HasPrefix(proto, []byte("HTTP/1.")) || len(rest) < 3 {
		return 0
	}
	code, err := strconv.Atoi(string(rest[:3]))
	if err != nil {
		return 0
	}
	return code
}

// assertStillServes fails unless a plain GET / on a new connection is
// answered 200 "hello" (the harness's index).
func assertStillServes(t *testing.T, addr, after string) {
	t.Helper()
	if code, body, err := get(addr, "/"); err != nil || code != 200 || body != "hello" {
		t.Errorf("after %s: GET / = %d %q %v; want 200 hello", after, code, body, err)
	}
}

func TestSlowHeaderClientsDoNotBlockNormalRequests(t *testing.T) {
	const (
		slow          = 200
		headerTimeout = time.Second
		margin        = 3 * time.Second
	)
	h := newHarness(t, 2, nil, func(c *supervisorConfig) {
		c.Runtime.HeaderTimeout = headerTimeout
		c.Runtime.MaxConns = 300
	})
	h.start()

	type slowConn struct {
		conn   net.Conn
		dialed time.Time // before the dial, so before the server's clock starts
		closed time.Time // when the server's end of the connection arrived
		got    []byte
		err    error
	}
	conns := make([]*slowConn, slow)
	for i := range conns {
		began := time.Now()
		c, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
		if err != nil {
			t.Fatalf("slow connection %d: %v", i, err)
		}
		defer c.Close()
		conns[i] = &slowConn{conn: c, dialed: began}
	}
	var readers sync.WaitGroup
	for _, sc := range conns {
		sc.conn.SetReadDeadline(sc.dialed.Add(headerTimeout + margin))
		readers.Go(func() {
			sc.got, sc.err = io.ReadAll(sc.conn)
			sc.closed = time.Now()
		})
	}
	// Dribble the headers one byte per connection every 100 ms: 2.5 s for
	// the whole header, never finished within the header timeout.
	stopDribble := make(chan struct{})
	var dribbler sync.WaitGroup
	dribbler.Go(func() {
		header := "GET / HTTP/1.1\r\nHost: x\r\n"
		for i := range len(header) {
			for _, sc := range conns {
				sc.conn.Write([]byte{header[i]}) // fails once the server has closed it
			}
			select {
			case <-stopDribble:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	defer dribbler.Wait()
	defer close(stopDribble)

	for i := range 5 {
		began := time.Now()
		code, body, err := get(h.addr, "/")
		if took := time.Since(began); err != nil || code != 200 || body != "hello" || took > 2*time.Second {
			t.Errorf("GET %d among %d slow clients = %d %q %v after %v; want 200 hello within 2s", i, slow, code, body, err, took)
		}
	}

	// At the header timeout the worker closes each slow connection: with
	// a 400 if a partial line was pending (bufio hands it over as a line),
	// without a word otherwise.
	readers.Wait()
	bad := 0
	for i, sc := range conns {
		took := sc.closed.Sub(sc.dialed)
		var problem string
		switch {
		case isTimeout(sc.err):
			problem = "still open"
		case sc.err != nil && !errors.Is(sc.err, syscall.ECONNRESET):
			problem = "failed: " + sc.err.Error()
		case len(sc.got) > 0 && statusOf(sc.got) != 400:
			problem = fmt.Sprintf("answered %.60q", sc.got)
		case took < headerTimeout-50*time.Millisecond:
			problem = "closed before the header timeout"
		}
		if problem != "" {
			bad++
			if bad <= 5 {
				t.Errorf("slow connection %d: %s %v after it connected; want closed (with a 400 or nothing) after the header timeout (%v), within %v more", i, problem, took.Round(time.Millisecond), headerTimeout, margin)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d slow connections misbehaved", bad, slow)
	}
}

// TestMaxConnsHoldsExtraConnectionUntilOneFrees: while every slot holds
// a request in flight, none is closed to make room (an idle one would
// be: TestIdleKeepAliveConnectionsMakeRoomAtMaxConns), and connection
// N+1 waits until one closes.
func TestMaxConnsHoldsExtraConnectionUntilOneFrees(t *testing.T) {
	const maxConns = 5
	h := newHarness(t, 1, nil, func(c *supervisorConfig) {
		c.Runtime.MaxConns = maxConns
		c.Runtime.IdleTimeout = time.Minute
		c.Runtime.HeaderTimeout = time.Minute
	})
	writeFile(t, h.dir, "big.bin", strings.Repeat("y", 32<<20))
	h.start()
	// Each holder is answered once, so it is accepted and holds a slot,
	// then asks for a file far larger than the socket buffers and, once
	// the answer's header is in, stops reading: its request stays in
	// flight (there is no -write-timeout here).
	holders := make([]*rawClient, maxConns)
	for i := range holders {
		c, err := dialRaw(h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.conn.Close()
		if o, note, reuse := c.exchange("/", []byte("hello")); o != outComplete || !reuse {
			t.Fatalf("holder %d: %s %s (reuse %v); want a complete keep-alive response", i, outcomeNames[o], note, reuse)
		}
		io.WriteString(c.conn, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, err := http.ReadResponse(c.br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("holder %d: GET /big.bin: %v, %v; want 200 under way", i, resp, err)
		}
		holders[i] = c
	}
	extra, err := dialRaw(h.addr) // the kernel completes the handshake; the worker does not accept
	if err != nil {
		t.Fatal(err)
	}
	defer extra.conn.Close()
	if _, err := io.WriteString(extra.conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// Waiting can only show an answer that should not come; a correct
	// server passes however slow the machine.
	extra.conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, err := extra.br.Peek(1); len(n) > 0 || !isTimeout(err) {
		t.Fatalf("connection %d of %d was answered (%v) while every slot was held; want it held back", maxConns+1, maxConns, err)
	}
	holders[0].conn.Close()
	extra.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(extra.br, nil)
	if err != nil {
		t.Fatalf("connection %d after a slot freed: %v; want it answered", maxConns+1, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("connection %d after a slot freed: status %d; want 200", maxConns+1, resp.StatusCode)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// hostileRequests are requests no worker can answer as a file: each is
// answered with the status given, on a connection the server then closes.
var hostileRequests = []struct {
	name string
	req  string
	want int
}{
	{"malformed request line", "GARBAGE\r\n\r\n", 400},
	{"request line without version", "GET /\r\nHost: x\r\n\r\n", 400},
	{"malformed version", "GET / HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400},
	{"unknown major version", "GET / HTTP/9.9\r\nHost: x\r\n\r\n", 505},
	{"HTTP/1.1 without Host", "GET / HTTP/1.1\r\n\r\n", 400},
	{"two Host headers", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
	{"header without colon", "GET / HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n", 400},
	{"space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400},
	{"control byte in header value", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", 400},
	{"NUL in target", "GET /in\x00dex.html HTTP/1.1\r\nHost: x\r\n\r\n", 400},
	{"conflicting Content-Length", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
	{"negative Content-Length", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400},
	{"unknown transfer coding", "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
	{"binary junk", "\x00\x01\x02\x7f\xff\xfe\x80 \x90\xc3\x28 \xa0\xa1\r\n\r\n", 400},
	{"TLS record with a line feed", "\x16\x03\x01\x00\x2f\x01\x00\x00\x2b\x03\x03\n\r\n\r\n", 400},
	{"HTTP/2 preface (h2c is off: the handler refuses method PRI)", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 405},
}

func TestMalformedRequestsGet400AndServingContinues(t *testing.T) {
	h := newHarness(t, 1, nil, func(c *supervisorConfig) { c.Runtime.HeaderTimeout = time.Second })
	h.start()
	for _, tc := range hostileRequests {
		t.Run(tc.name, func(t *testing.T) {
			code, resp, err := rawResponse(h.addr, []byte(tc.req), 5*time.Second)
			if err != nil || code != tc.want {
				t.Errorf("%q: %d %q, %v; want %d and the connection closed", tc.req, code, resp, err, tc.want)
			}
			assertStillServes(t, h.addr, tc.name)
		})
	}
	// A ClientHello is not a request line: answered 400 at once if its
	// random bytes hold a line feed, and otherwise at the header timeout,
	// when bufio hands the worker the partial line it has.
	t.Run("TLS ClientHello without a line feed", func(t *testing.T) {
		hello := bytes.ReplaceAll(clientHello(t), []byte("\n"), []byte("\v"))
		began := time.Now()
		code, resp, err := rawResponse(h.addr, hello, 5*time.Second)
		if took := time.Since(began); err != nil || code != 400 || took < time.Second-50*time.Millisecond {
			t.Errorf("ClientHello: %d %q, %v after %v; want 400 once the header timeout (1s) passed", code, resp, err, took)
		}
		assertStillServes(t, h.addr, "a TLS ClientHello")
	})
}

// clientHello returns the first flight crypto/tls sends to a server.
func clientHello(t *testing.T) []byte {
	t.Helper()
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		tls.Client(client, &tls.Config{ServerName: "localhost"}).Handshake() // fails once server closes
		client.Close()
	}()
	server.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(server)
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(br, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(br, body); err != nil {
		t.Fatal(err)
	}
	return append(hdr, body...)
}

func TestOversizedHeadersGet431(t *testing.T) {
	h := newHarness(t, 1, nil)
	h.start()
	// Well past the cap is refused, just under it is served; the exact
	// boundary is TestRequestHeadOf16KiBIsServedAndOneByteMoreGets431.
	over := requestHeadLimit + 8<<10
	for _, tc := range []struct {
		name string
		req  string
		want int
	}{
		{"one huge header", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", over) + "\r\n\r\n", 431},
		{"many headers", "GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-Many: aaaaaaaaaaaaaaaaaaaa\r\n", over/30) + "\r\n", 431},
		{"huge request line", "GET /" + strings.Repeat("a", over) + " HTTP/1.1\r\nHost: x\r\n\r\n", 431},
		{"no end of headers", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", over), 431},
		{"just under the cap", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: " + strings.Repeat("a", requestHeadLimit-1<<10) + "\r\n\r\n", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, resp, err := rawResponse(h.addr, []byte(tc.req), 5*time.Second)
			if code != tc.want {
				t.Errorf("%d-byte request: %d %.200q, %v; want %d", len(tc.req), code, resp, err, tc.want)
			}
			assertStillServes(t, h.addr, tc.name)
		})
	}
}

func TestRefusedRequestEndsInACloseNotAReset(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "index.html", "hello")
	addr := startRuntime(t, dir, runtimeConfig{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A head far past the cap: the server answers 431 with most of it
	// unread, and closes.
	go c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 256<<10) + "\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := io.ReadAll(c)
	// net/http half-closes (FIN) and lingers before it closes, so the
	// client reads the answer and then EOF; a close with input unread
	// sends a reset, which may destroy the answer before it is read.
	if err != nil || statusOf(resp) != 431 {
		t.Errorf("after the answer %.40q: %v; want 431 and then EOF, not a reset", resp, err)
	}
}

// requestHeadLimit is the README's cap on an HTTP/1 request head: the
// request line, the header lines and the blank line that ends them, each
// with its CRLF.
const requestHeadLimit = 16 << 10

func TestRequestHeadOf16KiBIsServedAndOneByteMoreGets431(t *testing.T) {
	h := newHarness(t, 1, nil)
	h.start()
	// head returns a request of exactly n bytes whose padding is in the
	// request line (a query, so the index still answers) or in a header.
	head := func(n int, inLine bool) string {
		line, hdrs := "GET /? HTTP/1.1\r\n", "Host: x\r\nConnection: close\r\nX-Pad: \r\n\r\n"
		pad := strings.Repeat("a", n-len(line)-len(hdrs))
		if inLine {
			return "GET /?" + pad + " HTTP/1.1\r\n" + hdrs
		}
		return line + strings.Replace(hdrs, "X-Pad: ", "X-Pad: "+pad, 1)
	}
	for _, inLine := range []bool{false, true} {
		for n, want := range map[int]int{requestHeadLimit: 200, requestHeadLimit + 1: 431} {
			req := head(n, inLine)
			if len(req) != n {
				t.Fatalf("built a %d-byte request; want %d", len(req), n)
			}
			code, resp, err := rawResponse(h.addr, []byte(req), 5*time.Second)
			if code != want {
				t.Errorf("%d-byte request head (padding in the request line: %v): %d %.100q, %v; want %d", n, inLine, code, resp, err, want)
			}
		}
	}
	assertStillServes(t, h.addr, "requests at the header limit")
}

// TestHTTP2AdvertisesAHeaderListOf12608Bytes checks the HTTP/2 header
// limit the docs give: net/http counts the header list (each field's name
// and value plus 32 bytes) and announces its limit in its first SETTINGS
// frame, where a client (Go's among them) keeps below it.
func TestHTTP2AdvertisesAHeaderListOf12608Bytes(t *testing.T) {
	id, err := selfSignedIdentity("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, dir, "index.html", "hello")
	addr := startRuntime(t, dir, runtimeConfig{HeaderTimeout: time.Second, IdleTimeout: time.Second, TLS: id})
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	writeFrame(c, 0x4, 0, 0, nil) // SETTINGS, none
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, flags, _, payload, err := readFrame(bufio.NewReader(c))
	if err != nil || typ != 0x4 || flags&0x1 != 0 {
		t.Fatalf("first frame: type %#x flags %#x, %v; want the server's SETTINGS", typ, flags, err)
	}
	const maxHeaderListSize = 0x6
	for i := 0; i+6 <= len(payload); i += 6 {
		if uint16(payload[i])<<8|uint16(payload[i+1]) == maxHeaderListSize {
			got := uint32(payload[i+2])<<24 | uint32(payload[i+3])<<16 | uint32(payload[i+4])<<8 | uint32(payload[i+5])
			if got != 12608 {
				t.Errorf("SETTINGS_MAX_HEADER_LIST_SIZE = %d; want 12608", got)
			}
			return
		}
	}
	t.Errorf("the server's SETTINGS %x announce no SETTINGS_MAX_HEADER_LIST_SIZE", payload)
}

// pathEscapes are request targets, sent as raw bytes, that try to reach a
// file outside the root or a hidden one: the handler-level hostilePaths
// (static_test.go) plus forms only the wire has, which net/http parses
// before the handler sees a path.
var pathEscapes = []string{
	"http://x/../secret.txt",
	"http://x/%2e%2e/secret.txt",
	"//../secret.txt",
	"/./../secret.txt",
	"/.%2e/secret.txt",
	"/%2e./secret.txt",
	"/%2e%2e%2f%2e%2e%2fsecret.txt",
	"/%2E%2E%2Fsecret.txt",
	"/..%2f..%2fsecret.txt",
	"/..%252fsecret.txt",
	"/%c0%ae%c0%ae/secret.txt",
	"/%uff0e%uff0e/secret.txt",
	"/..;/secret.txt",
	"/escape-dir%2fsecret.txt",
	"//escape-dir/secret.txt",
	"/escape-dir/./secret.txt",
	"/escape-dir/../escape-dir/secret.txt",
	"/sub/..%2f..%2f..%2fsecret.txt",
	"/%2e%65nv",
	"/%2Eenv",
	"/.git%2fconfig",
	"/.well-known/..%2f.env",
	"/.well-known/%2e%2e/.env",
	"/.well-known/../.env",
	"../secret.txt",
	"*",
	"secret.txt",
	"/escape-file?x=/../secret.txt",
	"/escape-file#/../secret.txt",
	"/public.txt/../../secret.txt",
}

func TestPathEscapesOverTheWireStayInsideRoot(t *testing.T) {
	h := newHarness(t, 1, nil, func(c *supervisorConfig) { c.Args = []string{"-dir", hostileSite(t)} })
	h.start()
	var targets []string
	for _, tc := range hostilePaths {
		targets = append(targets, tc.target)
	}
	targets = append(targets, pathEscapes...)
	tried, statuses := 0, map[int]int{}
	for _, target := range targets {
		for _, method := range []string{"GET", "HEAD"} {
			req := method + " " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
			code, resp, err := rawResponse(h.addr, []byte(req), 5*time.Second)
			tried++
			statuses[code]++
			if err != nil || code == 0 {
				t.Errorf("%s %.80q: %d %.200q, %v; want an answer", method, target, code, resp, err)
				continue
			}
			if code == 200 || code >= 500 || bytes.Contains(resp, []byte(outsideSecret)) || bytes.Contains(resp, []byte(dotSecret)) {
				t.Errorf("%s %.80q: %d %.300q; want no file, no secret and no server error", method, target, code, resp)
			}
		}
	}
	t.Logf("escapes tried: %d; answered with status: count %v", tried, statuses)
	if code, resp, _ := rawResponse(h.addr, []byte("GET /public.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 5*time.Second); code != 200 || !bytes.HasSuffix(resp, []byte("public")) {
		t.Errorf("GET /public.txt after the escapes = %d %q; want 200 public", code, resp)
	}
}

// procFDs returns pid's open descriptors and what each links to.
func procFDs(t *testing.T, pid int) map[int]string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fds := map[int]string{}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed since the listing
		}
		fds[fd] = target
	}
	return fds
}

// formatFDs lists fds for a failure message, in descriptor order.
func formatFDs(fds map[int]string) string {
	var b strings.Builder
	for _, fd := range slices.Sorted(maps.Keys(fds)) {
		fmt.Fprintf(&b, "\n\t%d -> %s", fd, fds[fd])
	}
	return b.String()
}

// listeningInodes returns the socket inodes in LISTEN state in pid's
// network namespace.
func listeningInodes(t *testing.T, pid int) map[string]bool {
	t.Helper()
	inodes := map[string]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) >= 10 && f[3] == "0A" {
				inodes[f[9]] = true
			}
		}
	}
	return inodes
}

func skipWithoutProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc")
	}
}

// checkWorkerFDs fails unless pid holds only what a worker should: stdin
// on /dev/null, stdout and stderr the two pipes the parent reads
// (output.go), or both the one file a test harness gave, the protocol's
// two pipes (fds 4 and 5, protocolPipes),
// exactly one descriptor for the listening socket (not fd 3, which it
// closes once adopted), the served directory (its os.Root), and what the
// Go runtime opens for itself: epoll, eventfd and pidfd inodes and the
// cgroup files it reads the CPU limit from.
func checkWorkerFDs(t *testing.T, pid int, dir string) {
	t.Helper()
	fds := procFDs(t, pid)
	listening := listeningInodes(t, pid)
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	listeners, pipes := 0, 0
	for _, fd := range slices.Sorted(maps.Keys(fds)) {
		target := fds[fd]
		switch {
		case fd == 0:
			if target != os.DevNull {
				bad = append(bad, fmt.Sprintf("fd 0 is %s, want %s", target, os.DevNull))
			}
		case fd == 1:
			bothPipes := strings.HasPrefix(target, "pipe:") && strings.HasPrefix(fds[2], "pipe:") && target != fds[2]
			if target != fds[2] && !bothPipes {
				bad = append(bad, fmt.Sprintf("fd 1 is %s, want stderr's %s or a pipe of its own", target, fds[2]))
			}
		case fd == 2:
		case strings.HasPrefix(target, "pipe:"):
			pipes++
		case target == "anon_inode:[eventpoll]", target == "anon_inode:[eventfd]", target == "anon_inode:[pidfd]":
		case strings.HasPrefix(target, "/sys/fs/cgroup/"):
		case strings.HasPrefix(target, "socket:["):
			inode := strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")
			if !listening[inode] {
				bad = append(bad, fmt.Sprintf("fd %d is a socket that is not listening", fd))
			}
			listeners++
			if fd == 3 {
				bad = append(bad, "fd 3, the inherited listener, is still open after adoption")
			}
		case target == realDir || target == dir:
		default:
			bad = append(bad, fmt.Sprintf("fd %d -> %s was not expected", fd, target))
		}
	}
	if listeners != 1 {
		bad = append(bad, fmt.Sprintf("%d descriptors on listening sockets, want 1", listeners))
	}
	if pipes != 2 {
		bad = append(bad, fmt.Sprintf("%d pipes, want the protocol's 2", pipes))
	}
	if len(bad) > 0 {
		t.Errorf("worker pid %d: %s; its descriptors:%s", pid, strings.Join(bad, "; "), formatFDs(fds))
	}
}

func TestWorkersInheritOnlyTheirDescriptors(t *testing.T) {
	skipWithoutProc(t)
	h := newHarness(t, 2, nil)
	h.start()
	for _, pid := range h.sup.pids() {
		checkWorkerFDs(t, pid, h.dir)
	}
}

func TestWorkersChildrenInheritNoProtocolPipe(t *testing.T) {
	skipWithoutProc(t)
	// Worker 0 starts a child of its own, with nothing but /dev/null as
	// its stdio: any pipe it holds came from the protocol.
	h := newHarness(t, 2, map[int]string{0: faultGrandchild}, func(c *supervisorConfig) {
		c.DrainTimeout, c.ForceTimeout = 200*time.Millisecond, 500*time.Millisecond
	})
	h.start()
	pid := h.grandchild()
	if pid == 0 {
		t.Fatal("the worker recorded no child")
	}
	for fd, target := range procFDs(t, pid) {
		if strings.HasPrefix(target, "pipe:") {
			t.Errorf("the worker's child holds fd %d -> %s, a protocol pipe", fd, target)
		}
	}
	h.stop(context.Background())
}

func TestWorkersDoNotInheritStrayDescriptors(t *testing.T) {
	skipWithoutProc(t)
	dir := t.TempDir()
	writeFile(t, dir, "index.html", "hello")
	// servery started with two stray descriptors, as a careless shell or
	// service manager would: fds 3 and 4, without close-on-exec.
	var strays []*os.File
	for _, name := range []string{"stray3", "stray4"} {
		writeFile(t, dir, name, "not for workers")
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		strays = append(strays, f)
	}
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-dir", dir, "-workers", "2")
	cmd.Env = append(withoutEnv(withoutEnv(os.Environ(), "LISTEN_FDS"), "LISTEN_PID"), mainEnv+"=1")
	cmd.ExtraFiles = strays
	s := launchServery(t, cmd)
	for _, pid := range s.workerPIDs() {
		checkWorkerFDs(t, pid, dir)
	}
}

// keyLines returns the base64 lines of a PEM block's body: any one of them
// found somewhere means the key was copied there.
func keyLines(pemBytes []byte) []string {
	var lines []string
	for line := range strings.Lines(string(pemBytes)) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "-----") {
			lines = append(lines, line)
		}
	}
	return lines
}

// leaksKey returns what of the key b holds, or "".
func leaksKey(b []byte, lines []string) string {
	if bytes.Contains(b, []byte("PRIVATE KEY")) {
		return `"PRIVATE KEY"`
	}
	for _, l := range lines {
		if bytes.Contains(b, []byte(l)) {
			return fmt.Sprintf("the key line %q", l)
		}
	}
	return ""
}

func TestNoKeyMaterialInArgvOrEnvironment(t *testing.T) {
	skipWithoutProc(t)
	id, err := selfSignedIdentity("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	lines := keyLines(id.KeyPEM)
	if len(lines) == 0 {
		t.Fatal("the key PEM has no body")
	}
	began := time.Now()
	h := newHarness(t, 2, nil, func(c *supervisorConfig) { c.Runtime.TLS = id })
	h.start()
	for _, pid := range h.sup.pids() {
		for _, what := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, what))
			if err != nil {
				t.Fatal(err)
			}
			if leak := leaksKey(b, lines); leak != "" {
				t.Errorf("worker pid %d: /proc/%d/%s holds %s", pid, pid, what, leak)
			}
		}
		// Every regular file the worker holds open: its stderr log among
		// them, which must not carry the configuration either.
		for fd, target := range procFDs(t, pid) {
			path := fmt.Sprintf("/proc/%d/fd/%d", pid, fd)
			if !strings.HasPrefix(target, "/") {
				continue // a pipe, socket or anonymous inode
			}
			if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("worker pid %d: read fd %d (%s): %v", pid, fd, target, err)
				continue
			}
			if leak := leaksKey(b, lines); leak != "" {
				t.Errorf("worker pid %d: fd %d (%s) holds %s", pid, fd, target, leak)
			}
		}
	}
	// Nor a file a worker wrote and closed: look at what changed in the
	// temporary directory, and one level below it, since the test began.
	tmp := os.TempDir()
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		paths := []string{filepath.Join(tmp, e.Name())}
		if e.IsDir() {
			sub, _ := os.ReadDir(paths[0])
			paths = paths[:0]
			for _, s := range sub {
				paths = append(paths, filepath.Join(tmp, e.Name(), s.Name()))
			}
		}
		for _, p := range paths {
			fi, err := os.Lstat(p)
			if err != nil || !fi.Mode().IsRegular() || fi.ModTime().Before(began) || fi.Size() > 1<<20 {
				continue
			}
			if b, err := os.ReadFile(p); err == nil {
				if leak := leaksKey(b, lines); leak != "" {
					t.Errorf("%s holds %s", p, leak)
				}
			}
		}
	}
	// The workers do hold the key, where it belongs: in memory.
	conn, err := tls.Dial("tcp", h.addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS handshake with a worker: %v", err)
	}
	conn.Close()
}
