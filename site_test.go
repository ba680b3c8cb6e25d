package main

import (
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests of what a site owner expects besides files: precompressed
// sidecars, the 404 page, the single-page-app fallback, listings, the
// headers every response carries, and the caching policy.

// sidecarSite writes app.js with a sidecar for each coding, each with its
// own recognisable bytes, and returns the root.
func sidecarSite(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"app.js":        strings.Repeat("console.log('identity');\n", 40),
		"app.js.br":     "BROTLI-BYTES",
		"app.js.zst":    "ZSTD-BYTES",
		"app.js.gz":     "GZIP-SIDECAR-BYTES",
		"only.js":       strings.Repeat("let only = 'br sidecar only';\n", 40),
		"only.js.br":    "ONLY-BROTLI",
		"photo.webp":    "RIFF0000WEBPVP8 not really",
		"photo.webp.gz": "GZIPPED-PHOTO",
	})
	// Written in map order within one clock tick or so: give every file
	// the same time, so no sidecar is older than its file by chance.
	now := time.Now()
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if err := os.Chtimes(filepath.Join(root, e.Name()), now, now); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestSidecarIsChosenByQValuesPreferringBrThenZstdThenGzip(t *testing.T) {
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			h := newTestHandler(t, sidecarSite(t), cfg.opts)
			for _, tc := range []struct{ accept, coding, body string }{
				{"gzip, deflate, br, zstd", "br", "BROTLI-BYTES"},
				{"zstd, gzip", "zstd", "ZSTD-BYTES"},
				{"gzip", "gzip", "GZIP-SIDECAR-BYTES"},
				{"gzip;q=1, br;q=0.5", "gzip", "GZIP-SIDECAR-BYTES"},
				{"gzip;q=0.5, zstd;q=0.5", "zstd", "ZSTD-BYTES"},
				{"br;q=0, *", "zstd", "ZSTD-BYTES"},
				{"BR;Q=0.9, gzip;q=0.8", "br", "BROTLI-BYTES"},
				{"x-gzip", "gzip", "GZIP-SIDECAR-BYTES"},
				{"identity;q=0, gzip", "gzip", "GZIP-SIDECAR-BYTES"},
				{"identity;q=0", "", ""}, // nothing else accepted: the file, not a 406
				{"*;q=0", "", ""},
				{"identity", "", ""},
				{"br;q=bogus", "", ""},
				{"", "", ""},
			} {
				w := serve(h, "GET", "/app.js", "Accept-Encoding", tc.accept)
				got := w.Header().Get("Content-Encoding")
				if w.Code != 200 || got != tc.coding || (tc.body != "" && w.Body.String() != tc.body) {
					t.Errorf("Accept-Encoding %q: %d, Content-Encoding %q, body %.20q; want %q %q", tc.accept, w.Code, got, w.Body, tc.coding, tc.body)
				}
				if tc.coding == "" && !strings.HasPrefix(w.Body.String(), "console.log") {
					t.Errorf("Accept-Encoding %q: body %.20q; want the identity bytes", tc.accept, w.Body)
				}
				if v := w.Header().Get("Vary"); v != "Accept-Encoding" {
					t.Errorf("Accept-Encoding %q: Vary %q; want Accept-Encoding on every form", tc.accept, v)
				}
				if n := w.Header().Get("Content-Length"); n != "" && n != strconv.Itoa(w.Body.Len()) {
					t.Errorf("Accept-Encoding %q: Content-Length %s for %d bytes", tc.accept, n, w.Body.Len())
				}
			}
		})
	}
}

func TestEachFormHasItsOwnETagAndConditionals(t *testing.T) {
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			h := newTestHandler(t, sidecarSite(t), cfg.opts)
			tags := map[string]string{}
			for _, accept := range []string{"br", "zstd", "gzip", "identity"} {
				tag := serve(h, "GET", "/app.js", "Accept-Encoding", accept).Header().Get("Etag")
				if !strings.HasPrefix(tag, `"`) {
					t.Fatalf("%s form: ETag %q; want a strong one", accept, tag)
				}
				if other, dup := tags[tag]; dup {
					t.Errorf("%s and %s forms share ETag %s", accept, other, tag)
				}
				tags[tag] = accept
			}
			for tag, accept := range tags {
				if w := serve(h, "GET", "/app.js", "Accept-Encoding", accept, "If-None-Match", tag); w.Code != http.StatusNotModified {
					t.Errorf("%s form with its own ETag in If-None-Match: %d; want 304", accept, w.Code)
				}
			}
			brTag := serve(h, "GET", "/app.js", "Accept-Encoding", "br").Header().Get("Etag")
			w := serve(h, "GET", "/app.js", "Accept-Encoding", "zstd", "If-None-Match", brTag)
			if w.Code != 200 || w.Body.String() != "ZSTD-BYTES" {
				t.Errorf("zstd request with the br form's ETag: %d %.20q; want 200 and the zstd bytes", w.Code, w.Body)
			}
		})
	}
}

func TestRangesGetTheIdentityForm(t *testing.T) {
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			h := newTestHandler(t, sidecarSite(t), cfg.opts)
			w := serve(h, "GET", "/app.js", "Accept-Encoding", "br, gzip", "Range", "bytes=0-6")
			if w.Code != http.StatusPartialContent || w.Body.String() != "console" || w.Header().Get("Content-Encoding") != "" {
				t.Errorf("Range with br accepted: %d %q Content-Encoding %q; want 206 \"console\" from the identity form", w.Code, w.Body, w.Header().Get("Content-Encoding"))
			}
		})
	}
}

func TestStaleSidecarIsNotServed(t *testing.T) {
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			root := sidecarSite(t)
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(filepath.Join(root, "app.js.br"), old, old); err != nil {
				t.Fatal(err)
			}
			h := newTestHandler(t, root, cfg.opts)
			w := serve(h, "GET", "/app.js", "Accept-Encoding", "br, zstd")
			if got := w.Header().Get("Content-Encoding"); got != "zstd" || w.Body.String() != "ZSTD-BYTES" {
				t.Errorf("with app.js.br older than app.js: Content-Encoding %q body %.20q; want the zstd sidecar", got, w.Body)
			}
		})
	}
}

func TestSidecarWithItsFilesTimeCutToTheSecondIsServed(t *testing.T) {
	// brotli -k (1.0.9) copies the file's time cut to whole seconds:
	// app.js 15:15:02.796256503, app.js.br 15:15:02.000000000.
	file := time.Date(2024, 5, 1, 15, 15, 2, 796256503, time.UTC)
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			root := sidecarSite(t)
			for name, mtime := range map[string]time.Time{
				"app.js":     file,
				"app.js.br":  file.Truncate(time.Second),
				"app.js.zst": file.Truncate(time.Second).Add(-time.Second),
			} {
				if err := os.Chtimes(filepath.Join(root, name), mtime, mtime); err != nil {
					t.Fatal(err)
				}
			}
			h := newTestHandler(t, root, cfg.opts)
			w := serve(h, "GET", "/app.js", "Accept-Encoding", "br")
			if got := w.Header().Get("Content-Encoding"); got != "br" || w.Body.String() != "BROTLI-BYTES" {
				t.Errorf("app.js.br with app.js's time cut to the second: Content-Encoding %q body %.20q; want the br sidecar", got, w.Body)
			}
			w = serve(h, "GET", "/app.js", "Accept-Encoding", "zstd")
			if got := w.Header().Get("Content-Encoding"); got != "" || !strings.HasPrefix(w.Body.String(), "console.log") {
				t.Errorf("app.js.zst a whole second older than app.js: Content-Encoding %q body %.20q; want the file", got, w.Body)
			}
		})
	}
}

func TestUnreadableSidecarFallsBackToTheFile(t *testing.T) {
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			root := sidecarSite(t)
			outside := filepath.Join(t.TempDir(), "elsewhere.br")
			writeFile(t, filepath.Dir(outside), "elsewhere.br", "OUTSIDE")
			// A sidecar that leads out of the root cannot be read through it.
			os.Remove(filepath.Join(root, "only.js.br"))
			if err := os.Symlink(outside, filepath.Join(root, "only.js.br")); err != nil {
				t.Fatal(err)
			}
			// One the server may not read, where permissions bind (not root).
			if err := os.Chmod(filepath.Join(root, "app.js.br"), 0); err != nil {
				t.Fatal(err)
			}
			h := newTestHandler(t, root, cfg.opts)
			w := serve(h, "GET", "/only.js", "Accept-Encoding", "br")
			if w.Code != 200 || w.Header().Get("Content-Encoding") != "" || !strings.HasPrefix(w.Body.String(), "let only") {
				t.Errorf("br sidecar escaping the root: %d Content-Encoding %q body %.20q; want 200 and the file", w.Code, w.Header().Get("Content-Encoding"), w.Body)
			}
			if os.Getuid() == 0 {
				return
			}
			w = serve(h, "GET", "/app.js", "Accept-Encoding", "br, zstd")
			if w.Code != 200 || w.Header().Get("Content-Encoding") != "zstd" {
				t.Errorf("unreadable br sidecar: %d Content-Encoding %q; want 200 and the next sidecar", w.Code, w.Header().Get("Content-Encoding"))
			}
		})
	}
}

func TestOnTheFlyGzipStaysWithoutAGzSidecar(t *testing.T) {
	root := sidecarSite(t)
	h := newTestHandler(t, root, cacheConfigs[0].opts)
	w := serve(h, "GET", "/only.js", "Accept-Encoding", "gzip")
	if w.Header().Get("Content-Encoding") != "gzip" || strings.HasPrefix(w.Body.String(), "let only") {
		t.Errorf("only.js (no .gz sidecar) with gzip accepted: Content-Encoding %q; want gzip made from the file", w.Header().Get("Content-Encoding"))
	}
	// A sidecar is served even for a type not worth compressing on the fly.
	w = serve(h, "GET", "/photo.webp", "Accept-Encoding", "gzip")
	if w.Header().Get("Content-Encoding") != "gzip" || w.Body.String() != "GZIPPED-PHOTO" || w.Header().Get("Vary") != "Accept-Encoding" {
		t.Errorf("photo.webp with a .gz sidecar: Content-Encoding %q Vary %q body %.20q; want the sidecar", w.Header().Get("Content-Encoding"), w.Header().Get("Vary"), w.Body)
	}
}

func TestSidecarsAreCachedWithinTheBudgetAndRevalidated(t *testing.T) {
	root := sidecarSite(t)
	h := newTestHandler(t, root, staticOptions{CacheBytes: 1 << 20, Revalidate: time.Minute})
	clock := withClock(h)
	serve(h, "GET", "/app.js", "Accept-Encoding", "br")
	e := h.cache.get("/app.js")
	if e == nil || e.cost < int64(len(e.body)+len("BROTLI-BYTES")+len("ZSTD-BYTES")+len("GZIP-SIDECAR-BYTES")) {
		t.Fatalf("cached entry %v; want it charged for the file and its three sidecars", e)
	}
	writeFile(t, root, "app.js.br", "NEW-BROTLI")
	later := time.Now().Add(time.Second)
	os.Chtimes(filepath.Join(root, "app.js.br"), later, later)
	clock.advance(2 * time.Minute)
	if w := serve(h, "GET", "/app.js", "Accept-Encoding", "br"); w.Body.String() != "NEW-BROTLI" {
		t.Errorf("after the br sidecar changed and the window passed: %.20q; want the new sidecar", w.Body)
	}
}

func TestMissingPathGets404PageWithStatus404(t *testing.T) {
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, map[string]string{"index.html": "home", "404.html": "<h1>lost</h1>", "dir/f.txt": "x"})
			h := newTestHandler(t, root, cfg.opts)
			for _, target := range []string{"/nope", "/nope.js", "/dir/", "/.env", "/index.html/"} {
				w := serve(h, "GET", target)
				if w.Code != 404 || w.Body.String() != "<h1>lost</h1>" || w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
					t.Errorf("GET %s = %d %q %q; want 404 with 404.html", target, w.Code, w.Header().Get("Content-Type"), w.Body)
				}
			}
			if w := serve(h, "HEAD", "/nope"); w.Code != 404 || w.Body.Len() != 0 {
				t.Errorf("HEAD /nope = %d with %d body bytes; want 404 and none", w.Code, w.Body.Len())
			}
			os.Remove(filepath.Join(root, "404.html"))
			h2 := newTestHandler(t, root, cfg.opts)
			if w := serve(h2, "GET", "/nope"); w.Code != 404 || w.Body.String() != "404 page not found\n" {
				t.Errorf("without 404.html: %d %q; want the plain 404", w.Code, w.Body)
			}
		})
	}
}

func Test404PageThatLeavesTheRootIsNeverServed(t *testing.T) {
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			root := t.TempDir()
			outside := t.TempDir()
			writeFile(t, outside, "404.html", outsideSecret)
			if err := os.Symlink(filepath.Join(outside, "404.html"), filepath.Join(root, "404.html")); err != nil {
				t.Fatal(err)
			}
			w := serve(newTestHandler(t, root, cfg.opts), "GET", "/nope")
			if w.Code != 404 || strings.Contains(w.Body.String(), outsideSecret) {
				t.Errorf("404.html linking out of the root: %d %q; want the plain 404", w.Code, w.Body)
			}
		})
	}
}

func TestFallbackServesTheAppForMissingRoutesOnly(t *testing.T) {
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, map[string]string{"index.html": "<app>", "app.js": "js", "404.html": "lost"})
			opts := cfg.opts
			opts.Fallback = "/index.html"
			h := newTestHandler(t, root, opts)
			for target, want := range map[string]struct {
				code int
				body string
			}{
				"/users/42":      {200, "<app>"},
				"/settings/":     {200, "<app>"},
				"/app.js":        {200, "js"},
				"/missing.js":    {404, "lost"},
				"/deep/miss.css": {404, "lost"},
				"/.git/config":   {404, "lost"},
			} {
				if w := serve(h, "GET", target); w.Code != want.code || w.Body.String() != want.body {
					t.Errorf("GET %s = %d %q; want %d %q", target, w.Code, w.Body, want.code, want.body)
				}
			}
			if w := serve(h, "HEAD", "/users/42"); w.Code != 200 || w.Body.Len() != 0 {
				t.Errorf("HEAD /users/42 = %d, %d bytes; want 200 and no body", w.Code, w.Body.Len())
			}
			if w := serve(h, "POST", "/users/42"); w.Code != http.StatusMethodNotAllowed {
				t.Errorf("POST /users/42 = %d; want 405", w.Code)
			}
		})
	}
}

func TestListingsAreOffUnlessAskedFor(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"files/a.txt": "12345", "files/sub/b": "x"})
	if w := serve(newTestHandler(t, root, staticOptions{}), "GET", "/files/"); w.Code != 404 || strings.Contains(w.Body.String(), "a.txt") {
		t.Errorf("GET /files/ by default = %d %q; want 404 and no names", w.Code, w.Body)
	}
	w := serve(newTestHandler(t, root, staticOptions{Listing: true}), "GET", "/files/")
	body := w.Body.String()
	year := time.Now().UTC().Format("2006-")
	for _, want := range []string{"<h1>Index of /files/</h1>", `<a href="../">../</a>`, `<a href="a.txt">a.txt</a></td><td>5</td><td>` + year, `<a href="sub/">sub/</a></td><td>-</td>`} {
		if w.Code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET /files/ with -listing = %d, lacks %s:\n%s", w.Code, want, body)
		}
	}
	if top := serve(newTestHandler(t, root, staticOptions{Listing: true}), "GET", "/").Body.String(); strings.Contains(top, `href="../"`) {
		t.Errorf("the root's listing links to a parent:\n%s", top)
	}
}

func TestEveryResponseSaysNosniff(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"index.html": "home", "f.txt": "text", "dir/x": "x"})
	h := newTestHandler(t, root, staticOptions{CacheBytes: 1 << 20, Listing: true})
	tag := serve(h, "GET", "/f.txt").Header().Get("Etag")
	for _, tc := range []struct {
		method, target string
		hdr            []string
	}{
		{"GET", "/", nil}, {"GET", "/f.txt", nil}, {"GET", "/f.txt", []string{"If-None-Match", tag}},
		{"GET", "/f.txt", []string{"Range", "bytes=0-1"}}, {"GET", "/nope", nil}, {"GET", "/dir", nil},
		{"GET", "/dir/", nil}, {"POST", "/", nil}, {"GET", "/" + strings.Repeat("a", maxURLPathBytes+1), nil},
	} {
		w := serve(h, tc.method, tc.target, tc.hdr...)
		if got := w.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %.30s %v = %d with X-Content-Type-Options %q; want nosniff", tc.method, tc.target, tc.hdr, w.Code, got)
		}
	}
}

// builtInTypes is what DESIGN.md promises for each extension of its
// built-in table, whatever the host's mime.types says.
var builtInTypes = map[string]string{
	"html": "text/html; charset=utf-8", "css": "text/css; charset=utf-8",
	"js": "text/javascript; charset=utf-8", "mjs": "text/javascript; charset=utf-8",
	"json": "application/json", "map": "application/json", "webmanifest": "application/manifest+json",
	"txt": "text/plain; charset=utf-8", "xml": "application/xml", "svg": "image/svg+xml",
	"png": "image/png", "jpg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
	"avif": "image/avif", "ico": "image/vnd.microsoft.icon", "woff": "font/woff", "woff2": "font/woff2",
	"wasm": "application/wasm", "pdf": "application/pdf", "mp4": "video/mp4", "webm": "video/webm",
}

func TestBuiltInTypesWinOverTheHostsMimeTypes(t *testing.T) {
	// DESIGN.md's list and this test's table are the same set, so a type
	// DESIGN.md adds is checked too.
	readme, err := os.ReadFile("DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\*\*Media types\*\* come from a built-in table for the web's types \(([^)]*)\)`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("DESIGN.md no longer lists the built-in media types where this test looks")
	}
	promised := strings.Fields(strings.NewReplacer(",", " ", "\n", " ").Replace(string(m[1])))
	for _, ext := range promised {
		if _, ok := builtInTypes[ext]; !ok {
			t.Errorf("DESIGN.md promises .%s from the built-in table; add its type to builtInTypes", ext)
		}
	}
	if len(promised) != len(builtInTypes) {
		t.Errorf("DESIGN.md promises %d built-in types %v; the test checks %d", len(promised), promised, len(builtInTypes))
	}

	// A host table that disagrees on every one of them. The mime package
	// cannot empty the host's table, but it can contradict it: an
	// extension served from the host's table, first or as a fallback
	// because the built-in table lacks it, shows the host's answer here,
	// so passing with this table means an empty one gives the same. The
	// cleanup restores what the host had where it had anything (nothing
	// else in the suite looks up the others).
	for ext := range builtInTypes {
		if prev := mime.TypeByExtension("." + ext); prev != "" {
			t.Cleanup(func() { mime.AddExtensionType("."+ext, prev) })
		}
		if err := mime.AddExtensionType("."+ext, "application/x-host-says-"+ext); err != nil {
			t.Fatal(err)
		}
	}

	files := map[string]string{}
	want := map[string]string{}
	for ext, ctype := range builtInTypes {
		// The lookup itself, with content that would sniff as something else.
		for _, name := range []string{"f." + ext, "F." + strings.ToUpper(ext), "dir.v2/name." + ext} {
			if got := contentType(name, strings.NewReader("%PDF-1.7 <html>")); got != ctype {
				t.Errorf("contentType(%q) = %q; want the built-in %q", name, got, ctype)
			}
		}
		files["f."+ext], want["/f."+ext] = "content", ctype
		files["UPPER."+strings.ToUpper(ext)], want["/UPPER."+strings.ToUpper(ext)] = "content", ctype
	}
	files["app.js.map"], want["/app.js.map"] = "{}", "application/json"
	// And through the handler, with and without the cache.
	for _, cfg := range cacheConfigs {
		h := newTestHandler(t, writeTreeDir(t, files), cfg.opts)
		for target, ctype := range want {
			if got := serve(h, "GET", target).Header().Get("Content-Type"); got != ctype {
				t.Errorf("%s, GET %s: Content-Type %q; want %q", cfg.name, target, got, ctype)
			}
		}
	}
}

func writeTreeDir(t *testing.T, files map[string]string) string {
	root := t.TempDir()
	writeTree(t, root, files)
	return root
}

func TestImmutableAssetsFlagSetsCacheControlByName(t *testing.T) {
	files := map[string]string{
		"index.html": "home", "app.3f9a1c2e.js": "js", "index-BkTq3z9a.css": "css",
		"style.css": "css", "photo-20240101.jpg": "jpg", "jquery-3.7.1.min.js": "js",
		// The README's warning: a hand-made name can pass for a hash.
		"logo-version2.png": "png", "logo-v2final.png": "png",
		// Bundlers' base64url hashes carry underscores (Vite: chunk-Dx_3k9Qa.js).
		"chunk-Dx_3k9Qa.js": "js", "vendor.a1_b2_c3_d4.js": "js",
	}
	for _, cfg := range cacheConfigs {
		root := writeTreeDir(t, files)
		off := newTestHandler(t, root, cfg.opts)
		opts := cfg.opts
		opts.Immutable = true
		on := newTestHandler(t, root, opts)
		for target, want := range map[string]string{
			"/": "no-cache", "/index.html": "no-cache", "/app.3f9a1c2e.js": "public, max-age=31536000, immutable",
			"/index-BkTq3z9a.css": "public, max-age=31536000, immutable", "/style.css": "",
			"/photo-20240101.jpg": "", "/jquery-3.7.1.min.js": "",
			"/logo-version2.png": "public, max-age=31536000, immutable", "/logo-v2final.png": "",
			"/chunk-Dx_3k9Qa.js": "public, max-age=31536000, immutable", "/vendor.a1_b2_c3_d4.js": "public, max-age=31536000, immutable",
		} {
			if got := serve(on, "GET", target).Header().Get("Cache-Control"); got != want {
				t.Errorf("%s, -immutable-assets, GET %s: Cache-Control %q; want %q", cfg.name, target, got, want)
			}
			if got := serve(off, "GET", target).Header().Get("Cache-Control"); got != "" {
				t.Errorf("%s, default, GET %s: Cache-Control %q; want none", cfg.name, target, got)
			}
		}
	}
}
