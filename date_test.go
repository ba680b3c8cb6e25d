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

// TestEveryResponseCarriesTheDateOfTheSecondItIsAnswered: the Date
// servery sets from its cache is the second's own, over HTTP/1.1 and
// HTTP/2, across a change of second; a Date the handler sets or adds is
// the only one.
func TestEveryResponseCarriesTheDateOfTheSecondItIsAnswered(t *testing.T) {
	id, err := selfSignedIdentity("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const own = "Tue, 01 Jan 2030 00:00:00 GMT"
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/own":
			w.Header().Set("Date", own)
		case "/add": // as httputil.ReverseProxy copies its upstream's header
			w.Header().Add("Date", own)
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
			get := func(path string) (dates []string, before, after time.Time) {
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
				return resp.Header["Date"], before, time.Now()
			}
			// Until two seconds' Dates are seen, each within the time
			// its request took, to the second.
			seen := map[string]bool{}
			for deadline := time.Now().Add(10 * time.Second); len(seen) < 2; {
				dates, before, after := get("/")
				if len(dates) != 1 {
					t.Fatalf("Dates %q; want one", dates)
				}
				d, err := http.ParseTime(dates[0])
				if err != nil || d.Before(before.Truncate(time.Second)) || d.After(after) {
					t.Fatalf("Date %q (%v) for a request sent at %v and answered at %v; want the second it was answered in", dates[0], err, before.UTC(), after.UTC())
				}
				seen[dates[0]] = true
				if time.Now().After(deadline) {
					t.Fatalf("Dates %v in 10s; want a second's change among them", seen)
				}
			}
			for _, path := range []string{"/own", "/add"} {
				if dates, _, _ := get(path); len(dates) != 1 || dates[0] != own {
					t.Errorf("a handler whose %s sets Date %q: the response has %q; want its own alone", path, own, dates)
				}
			}
		})
	}
}

// TestServerySetsTheDateSoNetHTTPNeedNot: servery's writer puts the Date
// in the header as the handler commits it, or as it returns without a
// word, which is what spares net/http its own.
func TestServerySetsTheDateSoNetHTTPNeedNot(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler func(http.ResponseWriter)
	}{
		{"a write", func(w http.ResponseWriter) { io.WriteString(w, "hello") }},
		{"a status", func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }},
		{"nothing", func(http.ResponseWriter) {}},
	} {
		srv := &server{}
		r := httptest.NewRequest("GET", "/", nil)
		r = r.WithContext(srv.connContext(r.Context(), &limitConn{}))
		rec := httptest.NewRecorder()
		srv.counting(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { tc.handler(w) })).ServeHTTP(rec, r)
		if date := rec.Result().Header.Get("Date"); date == "" {
			t.Errorf("a handler that answers with %s: no Date in the header it committed; want servery's", tc.name)
		} else if _, err := http.ParseTime(date); err != nil {
			t.Errorf("a handler that answers with %s: Date %q: %v", tc.name, date, err)
		}
	}
}

// BenchmarkDate compares what the HTTP/2 server does for a response
// without a Date (format the time into a new string) with stampDate, per
// response; net/http's HTTP/1 writer formats into a buffer, without the
// new string. go test -run '^$' -bench Date -count 5
func BenchmarkDate(b *testing.B) {
	b.Run("formatted", func(b *testing.B) {
		b.ReportAllocs()
		h := http.Header{}
		for b.Loop() {
			h["Date"] = []string{time.Now().UTC().Format(http.TimeFormat)}
		}
	})
	b.Run("stamped", func(b *testing.B) {
		b.ReportAllocs()
		h := http.Header{}
		for b.Loop() {
			delete(h, "Date")
			stampDate(h)
		}
	})
}
