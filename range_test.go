package main

import (
	"fmt"
	"strings"
	"testing"
)

// The tests of Range requests where net/http alone answers wrongly, on
// the cached and the streamed path.

func TestZeroSuffixRangeIsUnsatisfiable(t *testing.T) {
	content := strings.Repeat("0123456789", 40)
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, map[string]string{"r.txt": content})
			h := newTestHandler(t, root, cfg.opts)
			for _, spec := range []string{"bytes=-0", "bytes=-000", "bytes=-0, -0,"} {
				w := serve(h, "GET", "/r.txt", "Range", spec)
				if want := fmt.Sprintf("bytes */%d", len(content)); w.Code != 416 || w.Header().Get("Content-Range") != want {
					t.Errorf("Range %s: %d Content-Range %q; want 416 %q", spec, w.Code, w.Header().Get("Content-Range"), want)
				}
			}
			// The satisfiable rest of a set is served.
			w := serve(h, "GET", "/r.txt", "Range", "bytes=-0,0-1")
			if w.Code != 206 || w.Body.String() != "01" || w.Header().Get("Content-Range") != fmt.Sprintf("bytes 0-1/%d", len(content)) {
				t.Errorf("Range bytes=-0,0-1: %d Content-Range %q body %.20q; want 206 of bytes 0-1", w.Code, w.Header().Get("Content-Range"), w.Body)
			}
			if w := serve(h, "GET", "/r.txt", "Range", "bytes=-0,0-1,5-6"); len(multipartBodies(t, w)) != 2 {
				t.Errorf("Range bytes=-0,0-1,5-6: want the two other ranges")
			}
			// Preconditions come first (RFC 9110 §13.2.2).
			if w := serve(h, "GET", "/r.txt", "Range", "bytes=-0", "If-Match", `"other"`); w.Code != 412 {
				t.Errorf("Range bytes=-0 with a failing If-Match: %d; want 412", w.Code)
			}
			if w := serve(h, "GET", "/r.txt", "Range", "bytes=-0", "If-Range", `"other"`); w.Code != 200 || w.Body.String() != content {
				t.Errorf("Range bytes=-0 with a failing If-Range: %d, %d bytes; want 200 and the whole file", w.Code, w.Body.Len())
			}
		})
	}
}

func TestRangeOfAnEmptyFileGetsTheWholeFile(t *testing.T) {
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, map[string]string{"empty.txt": ""})
			h := newTestHandler(t, root, cfg.opts)
			for _, spec := range []string{"bytes=-0", "bytes=-5", "bytes=0-", "bytes=0-0"} {
				w := serve(h, "GET", "/empty.txt", "Range", spec)
				if w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Range") != "" {
					t.Errorf("Range %s of an empty file: %d Content-Range %q; want 200 and no Content-Range", spec, w.Code, w.Header().Get("Content-Range"))
				}
			}
		})
	}
}

func TestRangeOfAnotherUnitIsIgnored(t *testing.T) {
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			h := newTestHandler(t, sidecarSite(t), cfg.opts)
			identity := serve(h, "GET", "/app.js").Body.String()
			w := serve(h, "GET", "/app.js", "Range", "items=0-1")
			if w.Code != 200 || w.Body.String() != identity || w.Header().Get("Content-Range") != "" {
				t.Errorf("Range items=0-1: %d Content-Range %q, %d bytes; want 200 and the whole file", w.Code, w.Header().Get("Content-Range"), w.Body.Len())
			}
			// Ignored means as if absent: the client's coding still applies.
			w = serve(h, "GET", "/app.js", "Range", "items=0-1", "Accept-Encoding", "br")
			if w.Code != 200 || w.Body.String() != "BROTLI-BYTES" {
				t.Errorf("Range items=0-1 with br accepted: %d %.20q; want 200 and the br sidecar", w.Code, w.Body)
			}
			// The unit is case-insensitive (RFC 9110 §14.1).
			w = serve(h, "GET", "/app.js", "Range", "Bytes=0-6")
			if w.Code != 206 || w.Body.String() != "console" {
				t.Errorf("Range Bytes=0-6: %d %.20q; want 206 \"console\"", w.Code, w.Body)
			}
		})
	}
}
