package main

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// panicking answers /early by panicking before it writes (with a header
// set that must not leak), /late by panicking after a flushed part of
// its body, /abort with http.ErrAbortHandler, and anything else 200.
var panicking = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/early":
		w.Header().Set("X-Half-Done", "1")
		panic("boom")
	case "/late":
		io.WriteString(w, "part of an answer")
		w.(http.Flusher).Flush()
		panic("boom after the header")
	case "/abort":
		panic(http.ErrAbortHandler)
	}
	io.WriteString(w, "ok")
})

func TestHandlerPanicIsAnswered500OrCutOffAndLoggedOnce(t *testing.T) {
	id, err := selfSignedIdentity("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h1 := func() *http.Client { return &http.Client{Timeout: 10 * time.Second} }
	h2 := func() *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	}
	for _, tc := range []struct {
		name      string
		proto     string
		tls       bool
		client    *http.Client
		accessLog bool // the access log wraps every writer servery makes
	}{
		{"HTTP/1.1", "HTTP/1.1", false, h1(), false},
		{"HTTP/2", "HTTP/2", true, h2(), false},
		{"HTTP/1.1 with an access log", "HTTP/1.1", false, h1(), true},
		{"HTTP/2 with an access log", "HTTP/2", true, h2(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "log")
			logf, err := os.Create(logPath)
			if err != nil {
				t.Fatal(err)
			}
			defer logf.Close()
			cfg := runtimeConfig{HeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, DrainTimeout: 5 * time.Second, WriteTimeout: 10 * time.Second}
			scheme := "http"
			if tc.tls {
				cfg.TLS, scheme = id, "https"
			}
			accessPath := filepath.Join(t.TempDir(), "access.log")
			var access io.Writer
			if tc.accessLog {
				cfg.AccessLog = accessPath
				f, err := openAccessFile(accessPath)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				access = f
			}
			srv, err := newServer(cfg, panicking, slog.New(slog.NewTextHandler(logf, nil)), access)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.serve(ln)
			t.Cleanup(func() { srv.drain(context.Background()); srv.close() })
			get := func(path string) (*http.Response, string, error) {
				resp, err := tc.client.Get(scheme + "://" + ln.Addr().String() + path)
				if err != nil {
					return nil, "", err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				return resp, string(b), err
			}

			resp, body, err := get("/early")
			if err != nil || resp.StatusCode != 500 || body != "500 Internal Server Error\n" || resp.Header.Get("X-Half-Done") != "" {
				t.Errorf("a panic before any write: %v %q %v (X-Half-Done %q); want 500, its text, no header the handler set", status(resp), body, err, header(resp, "X-Half-Done"))
			}
			if resp, _, err := get("/late"); err == nil {
				t.Errorf("a panic after a flushed part of the body gave a whole response (%v); want it cut off", status(resp))
			}
			if resp, _, err := get("/abort"); err == nil {
				t.Errorf("http.ErrAbortHandler gave a whole response (%v); want it cut off", status(resp))
			}
			if resp, body, err := get("/"); err != nil || resp.StatusCode != 200 || body != "ok" || !strings.HasPrefix(resp.Proto, tc.proto) {
				t.Errorf("after the panics GET / = %v %q %v over %s; want 200 ok over %s", status(resp), body, err, proto(resp), tc.proto)
			}
			b, _ := os.ReadFile(logPath)
			logs := string(b)
			for _, want := range []string{
				`level=ERROR msg="handler panicked" method=GET path=/early panic=boom stack="goroutine `,
				`level=ERROR msg="handler panicked" method=GET path=/late panic="boom after the header" stack="goroutine `,
			} {
				if strings.Count(logs, want) != 1 {
					t.Errorf("want one line with %s in the log:\n%s", want, logs)
				}
			}
			if strings.Contains(logs, "/abort") || strings.Contains(logs, "http: panic serving") {
				t.Errorf("an abort was logged, or net/http logged a panic servery answered:\n%s", logs)
			}
			if !tc.accessLog {
				return
			}
			srv.drain(context.Background())
			srv.close() // every line written
			b, _ = os.ReadFile(accessPath)
			// The cut response's line has the status it sent and what
			// got out; the abort, which sent nothing, nginx's 444.
			for _, want := range []string{`/early HTTP/\S+" 500 26 `, `/late HTTP/\S+" 200 17 `, `/abort HTTP/\S+" 444 0 `, `"GET / HTTP/\S+" 200 2 `} {
				if !regexp.MustCompile(want).Match(b) {
					t.Errorf("no access line matching %s:\n%s", want, b)
				}
			}
		})
	}
}

func status(resp *http.Response) string {
	if resp == nil {
		return "no response"
	}
	return resp.Status
}

func proto(resp *http.Response) string {
	if resp == nil {
		return "nothing"
	}
	return resp.Proto
}

func header(resp *http.Response, name string) string {
	if resp == nil {
		return ""
	}
	return resp.Header.Get(name)
}
