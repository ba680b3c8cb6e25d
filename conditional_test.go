package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// The tests of conditional requests for a compressed form: RFC 9110
// §13.2.1 compares a validator with the representation the request
// selects, which is the coded form its Accept-Encoding picks.

// codedForms are, per cache setting, a compressed form of a sidecarSite
// file: the sidecars in both, and the gzip made on the fly where a cache
// makes one.
func codedForms(cached bool) []struct{ target, accept string } {
	forms := []struct{ target, accept string }{{"/app.js", "br"}, {"/app.js", "gzip"}}
	if cached {
		forms = append(forms, struct{ target, accept string }{"/only.js", "gzip"})
	}
	return forms
}

func TestIfMatchAndIfNoneMatchCompareTheFormServed(t *testing.T) {
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			h := newTestHandler(t, sidecarSite(t), cfg.opts)
			for _, f := range codedForms(cfg.opts.CacheBytes > 0) {
				first := serve(h, "GET", f.target, "Accept-Encoding", f.accept)
				tag, body := first.Header().Get("Etag"), first.Body.String()
				identityTag := serve(h, "GET", f.target).Header().Get("Etag")
				if first.Header().Get("Content-Encoding") != f.accept || tag == identityTag {
					t.Fatalf("%s with %s: Content-Encoding %q ETag %s; want the %s form with its own ETag", f.target, f.accept, first.Header().Get("Content-Encoding"), tag, f.accept)
				}
				for _, tc := range []struct {
					name, header, value string
					want                int
				}{
					{"If-Match with the form's ETag", "If-Match", tag, 200},
					{"If-Match with the form's ETag in a list", "If-Match", `"x", ` + tag, 200},
					{"If-Match with another ETag", "If-Match", `"other"`, 412},
					{"If-Match with the identity ETag", "If-Match", identityTag, 412},
					{"If-Unmodified-Since long ago", "If-Unmodified-Since", time.Unix(0, 0).UTC().Format(http.TimeFormat), 412},
					{"If-None-Match with the form's ETag", "If-None-Match", tag, 304},
					{"If-None-Match with the identity ETag", "If-None-Match", identityTag, 200},
				} {
					w := serve(h, "GET", f.target, "Accept-Encoding", f.accept, tc.header, tc.value)
					checkConditional(t, f.target+" "+f.accept+", "+tc.name, w, tc.want, f.accept, body)
				}
				// A range is of the file itself, so If-Range is weighed
				// against the file's ETag: a part of the coded form is
				// never mixed with the file's bytes.
				w := serve(h, "GET", f.target, "Accept-Encoding", f.accept, "Range", "bytes=0-6", "If-Range", tag)
				identity := serve(h, "GET", f.target).Body.String()
				if w.Code != 200 || w.Header().Get("Content-Encoding") != "" || w.Body.String() != identity {
					t.Errorf("%s %s, Range with the form's ETag in If-Range: %d Content-Encoding %q; want 200 and the whole file", f.target, f.accept, w.Code, w.Header().Get("Content-Encoding"))
				}
				if w := serve(h, "GET", f.target, "Accept-Encoding", f.accept, "Range", "bytes=0-6", "If-Range", identityTag); w.Code != 206 || w.Body.String() != identity[:7] {
					t.Errorf("%s %s, Range with the file's ETag in If-Range: %d %.20q; want 206 of the file", f.target, f.accept, w.Code, w.Body)
				}
			}
		})
	}
}

// checkConditional fails unless w has status want, and a 200 is the form
// in coding with body, and any other status has no body, no coding and no
// Content-Length that promises one.
func checkConditional(t *testing.T, what string, w *httptest.ResponseRecorder, want int, coding, body string) {
	t.Helper()
	enc, n := w.Header().Get("Content-Encoding"), w.Header().Get("Content-Length")
	switch {
	case w.Code != want:
		t.Errorf("%s: %d; want %d", what, w.Code, want)
	case want == 200 && (enc != coding || w.Body.String() != body || n != strconv.Itoa(len(body))):
		t.Errorf("%s: Content-Encoding %q Content-Length %s body %.20q; want the %s form, %d bytes", what, enc, n, w.Body, coding, len(body))
	case want != 200 && (w.Body.Len() != 0 || enc != "" || (n != "" && n != "0")):
		t.Errorf("%s: %d with Content-Encoding %q Content-Length %q and %d body bytes; want none", what, w.Code, enc, n, w.Body.Len())
	}
}

func TestFailedIfMatchOnACompressedFormIsAWellFormed412(t *testing.T) {
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			srv := httptest.NewServer(newTestHandler(t, sidecarSite(t), cfg.opts))
			defer srv.Close()
			// One connection for every request: a 412 that promised a body
			// it did not send would break the one after it.
			client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for _, f := range codedForms(cfg.opts.CacheBytes > 0) {
				for range 2 {
					req, _ := http.NewRequest("GET", srv.URL+f.target, nil)
					req.Header.Set("Accept-Encoding", f.accept)
					req.Header.Set("If-Match", `"other"`)
					resp, err := client.Do(req)
					if err != nil {
						t.Fatalf("%s %s with a failing If-Match: %v", f.target, f.accept, err)
					}
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 412 || err != nil || len(b) != 0 || resp.ContentLength > 0 {
						t.Errorf("%s %s with a failing If-Match: %d, Content-Length %d, %d body bytes, %v; want a 412 without a body", f.target, f.accept, resp.StatusCode, resp.ContentLength, len(b), err)
					}
				}
			}
		})
	}
}
