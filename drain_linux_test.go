package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slowReaderSite serves a 2 MiB file (and a 1 KiB one) with an 8 s drain
// timeout, and returns the server with a connection to it whose receive
// window is 64 KiB: the handler is done once the kernel's send buffer
// holds the rest, long before a slow client has it.
func slowReaderSite(t *testing.T) (*server, net.Conn) {
	t.Helper()
	return slowReaderSiteBuffered(t, 64<<10)
}

// slowReaderSiteBuffered is slowReaderSite with a receive buffer of
// rcvbuf bytes on the client's side.
func slowReaderSiteBuffered(t *testing.T, rcvbuf int) (*server, net.Conn) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "1k.bin", strings.Repeat("k", 1<<10))
	writeFile(t, dir, "2m.bin", strings.Repeat("m", 2<<20))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serveStatic(t, ln, dir, runtimeConfig{HeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, DrainTimeout: 8 * time.Second})
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) })
		return nil
	}}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return srv, c
}

func TestSlowReadersNextRequestIsAnsweredAcrossADrain(t *testing.T) {
	srv, c := slowReaderSite(t)
	const size = 2 << 20
	io.WriteString(c, "GET /2m.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReaderSize(c, 32<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(300*time.Millisecond, func() { srv.drain(context.Background()) })
	// Read at about 1 MB/s.
	buf := make([]byte, 32<<10)
	read := 0
	for read < size {
		n, err := resp.Body.Read(buf)
		read += n
		if err != nil && read < size {
			t.Fatalf("after %d of %d bytes: %v", read, size, err)
		}
		time.Sleep(30 * time.Millisecond)
	}
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the 2 MiB answer, begun before the drain, said Connection: close")
	}
	// Its last byte read, the client asks again on the same connection.
	io.WriteString(c, "GET /1k.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	next, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the request sent on reading the last byte, during the drain: %v; want an answer with Connection: close", err)
	}
	body, _ := io.ReadAll(next.Body)
	if next.StatusCode != http.StatusOK || len(body) != 1<<10 || !next.Close {
		t.Errorf("the next request: %d, %d bytes, close %v; want 200, 1 KiB and Connection: close", next.StatusCode, len(body), next.Close)
	}
}

func TestAClientThatStopsReadingDoesNotHoldTheDrain(t *testing.T) {
	srv, c := slowReaderSite(t)
	io.WriteString(c, "GET /2m.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
		t.Fatal(err)
	}
	// It reads no more: its answer sits in the server's send queue,
	// which no longer shrinks.
	time.Sleep(300 * time.Millisecond)
	began := time.Now()
	srv.drain(context.Background())
	if took := time.Since(began); took > 4*time.Second {
		t.Errorf("the drain took %v behind a client that stopped reading; want about the one-second grace, not the drain timeout (8s)", took.Round(time.Millisecond))
	}
}

func TestSlowReaderPastItsGraceGetsItsWholeAnswerThenAClose(t *testing.T) {
	// The bound of the one above. 4 MiB of receive buffer, as clients'
	// kernels give by default: the whole 2 MiB answer leaves the server's
	// send queue at once, and the client's application reads it at
	// 512 KiB/s, for 4 s, far past the one-second grace that began when
	// the queue emptied. (The window the client advertises does not tell
	// either: Linux announces it only once it has doubled.) Its answer
	// arrives whole; its next request finds the connection closed before
	// any byte of an answer, as a client that retries (Go's Transport, a
	// browser) retries it, and the drain is not held past the grace.
	srv, c := slowReaderSiteBuffered(t, 4<<20)
	const size = 2 << 20
	io.WriteString(c, "GET /2m.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReaderSize(c, 16<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	drained := make(chan time.Duration, 1)
	time.AfterFunc(300*time.Millisecond, func() {
		began := time.Now()
		srv.drain(context.Background())
		drained <- time.Since(began)
	})
	buf := make([]byte, 16<<10)
	read := 0
	for read < size {
		n, err := resp.Body.Read(buf)
		read += n
		if err != nil {
			break
		}
		time.Sleep(30 * time.Millisecond)
	}
	resp.Body.Close()
	if read != size {
		t.Fatalf("the answer begun before the drain: %d of %d bytes; want all", read, size)
	}
	io.WriteString(c, "GET /1k.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	if next, err := http.ReadResponse(br, nil); err == nil {
		t.Fatalf("the request sent 4 s into the drain got %d; want the connection closed before an answer", next.StatusCode)
	}
	if took := <-drained; took > 4*time.Second {
		t.Errorf("the drain took %v; want about the one-second grace after the send queue emptied, not the reader's 4 s", took.Round(time.Millisecond))
	}
}
