package main

import (
	"bytes"
	"testing"
	"time"
)

// TestRequestWithBothLengthsIsFramedByTransferEncoding pins what the
// README says servery does not promise: a request with both
// Content-Length and Transfer-Encoding is framed by Transfer-Encoding
// alone (so what follows its last chunk is read as the next request, not
// as its body), and net/http neither rejects it nor closes the connection
// after answering, as RFC 9112 §6.1 asks. Should net/http change, this
// fails, and the README's line must change with it.
func TestRequestWithBothLengthsIsFramedByTransferEncoding(t *testing.T) {
	h := newHarness(t, 1, nil)
	h.start()
	req := "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
		"GET /index.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
	code, resp, err := rawResponse(h.addr, []byte(req), 5*time.Second)
	if err != nil || code != 405 {
		t.Fatalf("POST with both lengths: %d %q, %v; want 405 (only GET and HEAD)", code, resp, err)
	}
	if n := bytes.Count(resp, []byte("HTTP/1.1 ")); n != 2 || !bytes.HasSuffix(resp, []byte("hello")) {
		t.Errorf("got %d responses %q; want 2 on one connection, the second the GET's 200 hello", n, resp)
	}
}
