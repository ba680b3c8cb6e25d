package main

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestEveryResponseCarriesTheDateOfTheSecondItsRequestBegan: the Date
// servery sets from its cache is the second's own, over HTTP/1.1 and
// HTTP/2, across a change of second; a handler's own Date wins.
func TestEveryResponseCarriesTheDateOfTheSecondItsRequestBegan(t *testing.T) {
	id, err := selfSignedIdentity("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const own = "Tue, 01 Jan 2030 00:00:00 GMT"
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/own" {
			w.Header().Set("Date", own)
		}
		io.WriteString(w, "hello")
	})
	for _, tc := range []struct {
		name   string
		tls    bool
		client *http.Client
	}{
		{"HTTP/1.1", false, &http.Client{Timeout: 10 * time.Second}},
		{"HTTP/2.0", true, &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := runtimeConfig{HeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, DrainTimeout: 5 * time.Second, WriteTimeout: 10 * time.Second}
			scheme := "http"
			if tc.tls {
				cfg.TLS, scheme = id, "https"
			}
			srv, err := newServer(cfg, h, slog.New(slog.DiscardHandler), nil)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.serve(ln)
			t.Cleanup(func() { srv.drain(context.Background()); srv.close() })
			get := func(path string) (date string, before, after time.Time) {
				before = time.Now()
				resp, err := tc.client.Get(scheme + "://" + ln.Addr().String() + path)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.Proto != tc.name {
					t.Fatalf("answered over %s; want %s", resp.Proto, tc.name)
				}
				return resp.Header.Get("Date"), before, time.Now()
			}
			// Until two seconds' Dates are seen, each within the time
			// its request took, to the second.
			seen := map[string]bool{}
			for deadline := time.Now().Add(10 * time.Second); len(seen) < 2; {
				date, before, after := get("/")
				d, err := http.ParseTime(date)
				if err != nil || d.Before(before.Truncate(time.Second)) || d.After(after) {
					t.Fatalf("Date %q (%v) for a request sent at %v and answered at %v; want the second it began", date, err, before.UTC(), after.UTC())
				}
				seen[date] = true
				if time.Now().After(deadline) {
					t.Fatalf("Dates %v in 10s; want a second's change among them", seen)
				}
			}
			if date, _, _ := get("/own"); date != own {
				t.Errorf("a handler that sets Date %q: the response has %q", own, date)
			}
		})
	}
}

// TestCountingSetsTheDateSoNetHTTPNeedNot: the Date is in the header map
// before the handler runs, which is what spares net/http its own.
func TestCountingSetsTheDateSoNetHTTPNeedNot(t *testing.T) {
	srv := &server{}
	var date string
	rec := httptest.NewRecorder()
	srv.counting(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		date = w.Header().Get("Date")
	})).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if _, err := http.ParseTime(date); err != nil {
		t.Errorf("the handler saw Date %q (%v); want servery's, set before it runs", date, err)
	}
}
