package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Secrets planted where no request may reach them: outside the root, and in
// dotfiles inside it.
const (
	outsideSecret = "OUTSIDE-SECRET-7f3a"
	dotSecret     = "DOTFILE-SECRET-91c2"
)

// writeTree writes files (slash-separated names relative to dir) below dir.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// newTestHandler returns a handler for root that is closed when the test ends.
func newTestHandler(t testing.TB, root string, opts staticOptions) *staticHandler {
	t.Helper()
	h, err := newStaticHandler(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// serve runs one request through h; hdr holds header name, value pairs.
func serve(h http.Handler, method, target string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// fakeClock is a hand-moved clock for staticHandler.now.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// withClock installs a fake clock on h and returns it.
func withClock(h *staticHandler) *fakeClock {
	c := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	h.now = c.now
	return c
}

// rewrite replaces the content of the file at p in place (same inode) and
// gives it modification time mtime, so a change is visible even on file
// systems with coarse timestamps.
func rewrite(t *testing.T, p, body string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// etagOf returns the strong ETag the handler derives from content.
func etagOf(content string) string {
	sum := sha256.Sum256([]byte(content))
	return `"` + digestTag(sum[:]) + `"`
}

// cacheConfigs runs behaviour that must not depend on the cache with it on
// and off.
var cacheConfigs = []struct {
	name string
	opts staticOptions
}{
	{"cached", staticOptions{CacheBytes: 1 << 20, Revalidate: time.Minute}},
	{"uncached", staticOptions{}},
}

// hostileSite builds a root with dotfiles and symlinks pointing out of it,
// with secrets beside it, and returns the root.
func hostileSite(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "site")
	writeTree(t, dir, map[string]string{
		"secret.txt":                    outsideSecret,
		"outside/secret.txt":            outsideSecret,
		"site/index.html":               "<h1>home</h1>",
		"site/public.txt":               "public",
		"site/.env":                     dotSecret,
		"site/.git/config":              dotSecret,
		"site/.hidden/file.txt":         dotSecret,
		"site/sub/.env":                 dotSecret,
		"site/.well-known/security.txt": "Contact: mailto:security@example.com",
		"site/.well-known/.private":     dotSecret,
		"site/sub/.well-known/x.txt":    dotSecret,
	})
	links := map[string]string{
		"escape-file": filepath.Join("..", "secret.txt"),
		"escape-abs":  filepath.Join(dir, "secret.txt"),
		"escape-dir":  filepath.Join("..", "outside"),
		"inside-link": "public.txt",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatalf("symlinks are needed for this test: %v", err)
		}
	}
	return root
}

// hostilePaths are request targets that must never reach a secret, with the
// status each must get.
var hostilePaths = []struct {
	target string
	want   int
}{
	{"/../secret.txt", 404},
	{"/../../secret.txt", 404},
	{"/sub/../../secret.txt", 404},
	{"/%2e%2e/secret.txt", 404},
	{"/%2E%2e/secret.txt", 404},
	{"/%2e%2e%2fsecret.txt", 404},
	{"/%252e%252e/secret.txt", 404},
	{"/%252e%252e%252fsecret.txt", 404},
	{"/..%5csecret.txt", 404},
	{"/..\\secret.txt", 404},
	{"/sub\\..\\..\\secret.txt", 404},
	{"/%00", 404},
	{"/public.txt%00.html", 404},
	{"/" + strings.Repeat("a/", 3000), 414},
	{"/" + strings.Repeat("a", 1000), 404},
	{"/.env", 404},
	{"/.git/config", 404},
	{"/.git/", 404},
	{"/.git", 404},
	{"/.hidden/file.txt", 404},
	{"/.hidden/", 404},
	{"/sub/.env", 404},
	{"/sub/../.env", 404},
	{"/%2eenv", 404},
	{"/.well-known/.private", 404},
	{"/sub/.well-known/x.txt", 404},
	{"/escape-file", 404},
	{"/escape-abs", 404},
	{"/escape-dir", 404},
	{"/escape-dir/", 404},
	{"/escape-dir/secret.txt", 404},
	{"/public.txt/", 404},
	{"/public.txt/x", 404},
}

func TestStaticRefusesHostilePaths(t *testing.T) {
	h := newTestHandler(t, hostileSite(t), staticOptions{CacheBytes: 1 << 20})
	for _, tc := range hostilePaths {
		name := tc.target
		if len(name) > 60 {
			name = name[:60] + "..."
		}
		t.Run(name, func(t *testing.T) {
			w := serve(h, "GET", tc.target)
			if w.Code != tc.want {
				t.Errorf("status %d, want %d", w.Code, tc.want)
			}
			if body := w.Body.String(); strings.Contains(body, outsideSecret) || strings.Contains(body, dotSecret) {
				t.Errorf("body leaks a secret: %q", body)
			}
		})
	}
}

func TestStaticServesWellKnownAndSymlinksInsideRoot(t *testing.T) {
	h := newTestHandler(t, hostileSite(t), staticOptions{CacheBytes: 1 << 20})
	for target, want := range map[string]string{
		"/.well-known/security.txt": "Contact: mailto:security@example.com",
		"/inside-link":              "public",
	} {
		w := serve(h, "GET", target)
		if w.Code != 200 || w.Body.String() != want {
			t.Errorf("GET %s = %d %q, want 200 %q", target, w.Code, w.Body, want)
		}
	}
}

func TestStaticServesIndexHTML(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"index.html": "root index", "docs/index.html": "docs index"})
	h := newTestHandler(t, root, staticOptions{CacheBytes: 1 << 20})
	for target, want := range map[string]string{
		"/":                "root index",
		"/index.html":      "root index",
		"/docs/":           "docs index",
		"/docs/index.html": "docs index",
		"/docs//":          "docs index",
	} {
		w := serve(h, "GET", target)
		if w.Code != 200 || w.Body.String() != want {
			t.Errorf("GET %s = %d %q, want 200 %q", target, w.Code, w.Body, want)
		}
	}
}

func TestStaticListsDirectoryEscapedAndSorted(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"secret.txt":         outsideSecret,
		"site/list/<b>&.txt": "x",
		"site/list/a b.txt":  "x",
		"site/list/z.txt":    "x",
		"site/list/sub/f":    "x",
		"site/list/.hidden":  dotSecret,
	})
	list := filepath.Join(dir, "site", "list")
	if err := os.Symlink("z.txt", filepath.Join(list, "in")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "..", "secret.txt"), filepath.Join(list, "out")); err != nil {
		t.Fatal(err)
	}
	h := newTestHandler(t, filepath.Join(dir, "site"), staticOptions{CacheBytes: 1 << 20, Listing: true})

	w := serve(h, "GET", "/list/")
	body := w.Body.String()
	if w.Code != 200 || w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("status %d, Content-Type %q", w.Code, w.Header().Get("Content-Type"))
	}
	want := []string{
		`<a href="%3Cb%3E&amp;.txt">&lt;b&gt;&amp;.txt</a>`,
		`<a href="a%20b.txt">a b.txt</a>`,
		`<a href="in">in</a>`,
		`<a href="sub/">sub/</a>`,
		`<a href="z.txt">z.txt</a>`,
	}
	last := -1
	for _, s := range want {
		i := strings.Index(body, s)
		if i <= last {
			t.Errorf("listing lacks %s or has it out of order:\n%s", s, body)
		}
		last = i
	}
	for _, s := range []string{".hidden", `"out"`, "<b>&"} {
		if strings.Contains(body, s) {
			t.Errorf("listing contains %s:\n%s", s, body)
		}
	}
}

func TestStaticRedirectsDirectoryWithoutSlash(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"docs/index.html": "x", ".well-known/a": "x", "a b/f": "x"})
	h := newTestHandler(t, root, staticOptions{CacheBytes: 1 << 20})
	for target, want := range map[string]string{
		"/docs":         "/docs/",
		"/docs?x=1&y=2": "/docs/?x=1&y=2",
		"/.well-known":  "/.well-known/",
		"/a%20b":        "/a%20b/",
	} {
		w := serve(h, "GET", target)
		if w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != want {
			t.Errorf("GET %s = %d Location %q, want 301 %q", target, w.Code, w.Header().Get("Location"), want)
		}
	}
}

func TestStaticAnswersConditionalRequests(t *testing.T) {
	const content = "conditional content"
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, map[string]string{"f.txt": content})
			h := newTestHandler(t, root, cfg.opts)
			first := serve(h, "GET", "/f.txt")
			etag, lastMod := first.Header().Get("Etag"), first.Header().Get("Last-Modified")
			if etag != etagOf(content) || lastMod == "" {
				t.Fatalf("ETag %q Last-Modified %q, want ETag %q and a date", etag, lastMod, etagOf(content))
			}
			modTime, _ := http.ParseTime(lastMod)
			tests := []struct {
				name, header, value string
				want                int
			}{
				{"matching ETag", "If-None-Match", etag, 304},
				{"ETag in a list", "If-None-Match", `"x", ` + etag, 304},
				{"weak form of the ETag", "If-None-Match", "W/" + etag, 304},
				{"other ETag", "If-None-Match", `"other"`, 200},
				{"not modified since", "If-Modified-Since", lastMod, 304},
				{"modified since", "If-Modified-Since", modTime.Add(-time.Hour).Format(http.TimeFormat), 200},
				{"If-Match mismatch", "If-Match", `"other"`, 412},
				{"If-Match match", "If-Match", etag, 200},
			}
			for _, tc := range tests {
				w := serve(h, "GET", "/f.txt", tc.header, tc.value)
				if w.Code != tc.want {
					t.Errorf("%s: status %d, want %d", tc.name, w.Code, tc.want)
				}
				if tc.want == 304 && (w.Body.Len() != 0 || w.Header().Get("Etag") != etag) {
					t.Errorf("%s: 304 with body %q, ETag %q", tc.name, w.Body, w.Header().Get("Etag"))
				}
				if tc.want == 200 && w.Body.String() != content {
					t.Errorf("%s: body %q", tc.name, w.Body)
				}
			}
		})
	}
}

func TestStaticServesRanges(t *testing.T) {
	content := strings.Repeat("0123456789", 40)
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, map[string]string{"r.txt": content})
			h := newTestHandler(t, root, cfg.opts)
			checkRanges(t, h, "/r.txt", content)
		})
	}
}

// checkRanges proves single, multiple, unsatisfiable and If-Range requests
// against target, whose body is content.
func checkRanges(t *testing.T, h http.Handler, target, content string) {
	t.Helper()
	size := len(content)
	w := serve(h, "GET", target, "Range", "bytes=10-14", "Accept-Encoding", "gzip")
	if w.Code != 206 || w.Body.String() != content[10:15] || w.Header().Get("Content-Encoding") != "" {
		t.Errorf("single range: %d %q encoding %q", w.Code, w.Body, w.Header().Get("Content-Encoding"))
	}
	if got, want := w.Header().Get("Content-Range"), fmt.Sprintf("bytes 10-14/%d", size); got != want {
		t.Errorf("Content-Range %q, want %q", got, want)
	}
	w = serve(h, "GET", target, "Range", "bytes=-3")
	if w.Code != 206 || w.Body.String() != content[size-3:] {
		t.Errorf("suffix range: %d %q", w.Code, w.Body)
	}
	w = serve(h, "GET", target, "Range", "bytes=0-1,5-7")
	if got := multipartBodies(t, w); w.Code != 206 || strings.Join(got, "|") != content[0:2]+"|"+content[5:8] {
		t.Errorf("multiple ranges: %d parts %q", w.Code, got)
	}
	w = serve(h, "GET", target, "Range", fmt.Sprintf("bytes=%d-", size+10))
	if w.Code != 416 || w.Header().Get("Content-Range") != fmt.Sprintf("bytes */%d", size) {
		t.Errorf("unsatisfiable range: %d Content-Range %q", w.Code, w.Header().Get("Content-Range"))
	}
	w = serve(h, "GET", target, "Range", "bytes=0-3", "If-Range", etagOf(content))
	if w.Code != 206 || w.Body.String() != content[:4] {
		t.Errorf("If-Range with current ETag: %d %q", w.Code, w.Body)
	}
	w = serve(h, "GET", target, "Range", "bytes=0-3", "If-Range", `"stale"`)
	if w.Code != 200 || w.Body.String() != content {
		t.Errorf("If-Range with stale ETag: %d, %d bytes", w.Code, w.Body.Len())
	}
}

// multipartBodies returns the part bodies of a multipart/byteranges response.
func multipartBodies(t *testing.T, w *httptest.ResponseRecorder) []string {
	t.Helper()
	mt, params, err := mime.ParseMediaType(w.Header().Get("Content-Type"))
	if err != nil || mt != "multipart/byteranges" {
		t.Fatalf("Content-Type %q: %v", w.Header().Get("Content-Type"), err)
	}
	var parts []string
	mr := multipart.NewReader(w.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return parts
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		parts = append(parts, string(b))
	}
}

func TestStaticGzipsCompressibleFilesWhenAccepted(t *testing.T) {
	content := strings.Repeat("<p>compressible static content</p>\n", 40)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"page.html": content})
	h := newTestHandler(t, root, staticOptions{CacheBytes: 1 << 20})
	tests := []struct {
		acceptEncoding string
		wantGzip       bool
	}{
		{"gzip", true},
		{"gzip, deflate, br, zstd", true},
		{"br;q=1.0, GZIP;Q=0.5", true},
		{"x-gzip", true},
		{"*", true},
		{"", false},
		{"identity", false},
		{"br", false},
		{"gzip;q=0", false},
		{"deflate, gzip; q=0.000", false},
		{"*;q=0", false},
		{"gzip;q=0, *", false},
		{"*, gzip;q=0", false},
	}
	for _, tc := range tests {
		t.Run(tc.acceptEncoding, func(t *testing.T) {
			w := serve(h, "GET", "/page.html", "Accept-Encoding", tc.acceptEncoding)
			if w.Header().Get("Vary") != "Accept-Encoding" {
				t.Errorf("Vary %q", w.Header().Get("Vary"))
			}
			if got := w.Header().Get("Content-Length"); got != fmt.Sprint(w.Body.Len()) {
				t.Errorf("Content-Length %s for %d bytes", got, w.Body.Len())
			}
			gotGzip := w.Header().Get("Content-Encoding") == "gzip"
			if gotGzip != tc.wantGzip {
				t.Fatalf("gzip %v, want %v", gotGzip, tc.wantGzip)
			}
			body, etag := w.Body.String(), etagOf(content)
			if gotGzip {
				body = gunzip(t, w.Body.Bytes())
				etag = strings.TrimSuffix(etag, `"`) + `-gzip"`
			}
			if body != content || w.Header().Get("Etag") != etag {
				t.Errorf("body %d bytes (want %d), ETag %q (want %q)", len(body), len(content), w.Header().Get("Etag"), etag)
			}
		})
	}
}

// gunzip returns the decompressed gzip stream b.
func gunzip(t *testing.T, b []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestStaticGzipFormHasItsOwnValidator(t *testing.T) {
	content := strings.Repeat("body { color: red; }\n", 40)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"s.css": content})
	h := newTestHandler(t, root, staticOptions{CacheBytes: 1 << 20})
	gzTag := serve(h, "GET", "/s.css", "Accept-Encoding", "gzip").Header().Get("Etag")
	if gzTag == etagOf(content) || !strings.HasSuffix(gzTag, `-gzip"`) {
		t.Fatalf("gzip ETag %q", gzTag)
	}
	w := serve(h, "GET", "/s.css", "Accept-Encoding", "gzip", "If-None-Match", gzTag)
	if w.Code != 304 || w.Header().Get("Etag") != gzTag || w.Header().Get("Vary") != "Accept-Encoding" {
		t.Errorf("If-None-Match with gzip ETag: %d ETag %q Vary %q", w.Code, w.Header().Get("Etag"), w.Header().Get("Vary"))
	}
	w = serve(h, "GET", "/s.css", "Accept-Encoding", "gzip", "If-None-Match", etagOf(content))
	if w.Code != 200 || gunzip(t, w.Body.Bytes()) != content || w.Header().Get("Content-Length") != fmt.Sprint(w.Body.Len()) {
		t.Errorf("If-None-Match with identity ETag: %d, Content-Length %s for %d bytes", w.Code, w.Header().Get("Content-Length"), w.Body.Len())
	}
}

// TestModernJSBundleIsGzippedWithoutASidecar: a compressible file up to
// 8 MiB (maxGzipEntryBytes) is cached, so it gets a gzip form, under the
// default 64 MiB budget; an image of that size, or a bundle over the cap,
// streams as it is; a budget of 8 MiB caps it at an eighth, 1 MiB.
func TestModernJSBundleIsGzippedWithoutASidecar(t *testing.T) {
	bundle := func(n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "export function f%d(a, b) { return a * %d + b; }\n", i, i)
		}
		return b.String()
	}
	root := t.TempDir()
	app := bundle(7 << 20)
	writeTree(t, root, map[string]string{
		"app.js":    app,
		"small.js":  bundle(2 << 20),
		"huge.js":   bundle(9 << 20),
		"photo.png": "\x89PNG\r\n\x1a\n" + strings.Repeat("\x00", 2<<20),
	})
	h := newTestHandler(t, root, staticOptions{CacheBytes: 64 << 20})
	for target, want := range map[string]string{"/app.js": "gzip", "/small.js": "gzip", "/huge.js": "", "/photo.png": ""} {
		w := serve(h, "GET", target, "Accept-Encoding", "gzip")
		if w.Code != 200 || w.Header().Get("Content-Encoding") != want {
			t.Errorf("64 MiB budget, GET %s: %d Content-Encoding %q; want 200 %q", target, w.Code, w.Header().Get("Content-Encoding"), want)
		}
		if target == "/app.js" && want == "gzip" && w.Header().Get("Content-Encoding") == "gzip" && gunzip(t, w.Body.Bytes()) != app {
			t.Errorf("GET /app.js: the gzip form is not the bundle")
		}
	}
	small := newTestHandler(t, root, staticOptions{CacheBytes: 8 << 20})
	if w := serve(small, "GET", "/small.js", "Accept-Encoding", "gzip"); w.Header().Get("Content-Encoding") != "" {
		t.Errorf("8 MiB budget, GET /small.js (2 MiB): Content-Encoding %q; want none, over an eighth of the budget", w.Header().Get("Content-Encoding"))
	}
}

func TestStaticDoesNotGzipSmallOrIncompressibleFiles(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"small.html": "<p>tiny</p>",
		"image.png":  "\x89PNG\r\n\x1a\n" + strings.Repeat("\x00", 1000),
	})
	h := newTestHandler(t, root, staticOptions{CacheBytes: 1 << 20})
	for target, wantVary := range map[string]string{"/small.html": "Accept-Encoding", "/image.png": ""} {
		w := serve(h, "GET", target, "Accept-Encoding", "gzip")
		if w.Code != 200 || w.Header().Get("Content-Encoding") != "" || w.Header().Get("Vary") != wantVary {
			t.Errorf("GET %s: %d Content-Encoding %q Vary %q", target, w.Code, w.Header().Get("Content-Encoding"), w.Header().Get("Vary"))
		}
	}
}

func TestStaticHEADSendsHeadersWithoutBody(t *testing.T) {
	content := strings.Repeat("head test line\n", 100)
	for _, cfg := range cacheConfigs {
		for _, ae := range []string{"", "gzip"} {
			t.Run(cfg.name+"/"+ae, func(t *testing.T) {
				root := t.TempDir()
				writeTree(t, root, map[string]string{"h.txt": content})
				h := newTestHandler(t, root, cfg.opts)
				get := serve(h, "GET", "/h.txt", "Accept-Encoding", ae)
				head := serve(h, "HEAD", "/h.txt", "Accept-Encoding", ae)
				if head.Code != 200 || head.Body.Len() != 0 {
					t.Fatalf("HEAD: %d with %d body bytes", head.Code, head.Body.Len())
				}
				for _, k := range []string{"Content-Length", "Content-Type", "Etag", "Last-Modified", "Content-Encoding", "Vary"} {
					if head.Header().Get(k) != get.Header().Get(k) {
						t.Errorf("HEAD %s %q, GET has %q", k, head.Header().Get(k), get.Header().Get(k))
					}
				}
				if head.Header().Get("Content-Length") != fmt.Sprint(get.Body.Len()) {
					t.Errorf("Content-Length %s, GET body %d bytes", head.Header().Get("Content-Length"), get.Body.Len())
				}
			})
		}
	}
}

func TestStaticRejectsOtherMethods(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"f.txt": "x"})
	h := newTestHandler(t, root, staticOptions{CacheBytes: 1 << 20})
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"} {
		w := serve(h, m, "/f.txt")
		if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: %d Allow %q", m, w.Code, w.Header().Get("Allow"))
		}
	}
}

func TestStaticSetsContentType(t *testing.T) {
	files := map[string]string{
		"a.html": "<p>x</p>", "a.css": "p{}", "a.js": "let x", "a.json": "{}",
		"a.svg": "<svg/>", "README": "plain words", "blob": "\x89PNG\r\n\x1a\n\x00\x00",
	}
	want := map[string]string{
		"/a.html": mime.TypeByExtension(".html"), "/a.css": mime.TypeByExtension(".css"),
		"/a.js": mime.TypeByExtension(".js"), "/a.json": mime.TypeByExtension(".json"),
		"/a.svg": mime.TypeByExtension(".svg"), "/README": "text/plain; charset=utf-8",
		"/blob": "image/png",
	}
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, files)
			h := newTestHandler(t, root, cfg.opts)
			for target, ctype := range want {
				if got := serve(h, "GET", target).Header().Get("Content-Type"); got != ctype {
					t.Errorf("GET %s: Content-Type %q, want %q", target, got, ctype)
				}
			}
		})
	}
}

func TestStaticServesEditsAtOnceWithZeroWindow(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "f.txt")
	writeTree(t, root, map[string]string{"f.txt": "version-1"})
	h := newTestHandler(t, root, staticOptions{CacheBytes: 1 << 20})
	withClock(h) // frozen: only the zero window makes these requests stat
	mustServe(t, h, "/f.txt", "version-1")

	fi, _ := os.Stat(p)
	rewrite(t, p, "version-2", fi.ModTime().Add(time.Hour))
	mustServe(t, h, "/f.txt", "version-2")

	if runtime.GOOS != "windows" { // only the inode tells these versions apart
		replaceByRename(t, p, "version-3")
		mustServe(t, h, "/f.txt", "version-3")
	}

	os.Remove(p)
	if w := serve(h, "GET", "/f.txt"); w.Code != 404 {
		t.Errorf("deleted file: status %d, want 404", w.Code)
	}
}

// replaceByRename swaps the file at p for a new one with body, of the same
// size and modification time, by renaming over it, as deploy tools do.
func replaceByRename(t *testing.T, p, body string) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	tmp := p + ".new"
	rewrite(t, tmp, body, fi.ModTime())
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

// mustServe fails the test unless GET target answers 200 with body want.
func mustServe(t *testing.T, h http.Handler, target, want string) {
	t.Helper()
	if w := serve(h, "GET", target); w.Code != 200 || w.Body.String() != want {
		t.Fatalf("GET %s = %d %q, want 200 %q", target, w.Code, w.Body, want)
	}
}

func TestStaticServesStaleInsideWindowAndFreshAfter(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "f.txt")
	writeTree(t, root, map[string]string{"f.txt": "version-1"})
	h := newTestHandler(t, root, staticOptions{CacheBytes: 1 << 20, Revalidate: time.Minute})
	clock := withClock(h)
	mustServe(t, h, "/f.txt", "version-1")

	fi, _ := os.Stat(p)
	rewrite(t, p, "version-2", fi.ModTime().Add(time.Hour))
	clock.advance(time.Minute)
	mustServe(t, h, "/f.txt", "version-1") // at the window's edge: not yet checked
	clock.advance(time.Second)
	mustServe(t, h, "/f.txt", "version-2")

	last := "version-2"
	if runtime.GOOS != "windows" { // only the inode tells these versions apart
		replaceByRename(t, p, "version-3")
		clock.advance(30 * time.Second)
		mustServe(t, h, "/f.txt", "version-2")
		clock.advance(31 * time.Second)
		mustServe(t, h, "/f.txt", "version-3")
		last = "version-3"
	}

	os.Remove(p)
	clock.advance(30 * time.Second)
	mustServe(t, h, "/f.txt", last) // deleted, but inside the window no stat sees it
	clock.advance(31 * time.Second)
	if w := serve(h, "GET", "/f.txt"); w.Code != 404 {
		t.Errorf("deleted file after the window: status %d, want 404", w.Code)
	}
}

func TestStaticEvictsToStayWithinCacheBytes(t *testing.T) {
	const budget = 32 << 10 // entries up to 4 KiB; about nine 3 KiB files fit
	root := t.TempDir()
	files := map[string]string{"hot.bin": strings.Repeat("h", 3<<10)}
	for i := range 30 {
		files[fmt.Sprintf("f%02d.bin", i)] = strings.Repeat(fmt.Sprint(i%10), 3<<10)
	}
	writeTree(t, root, files)
	h := newTestHandler(t, root, staticOptions{CacheBytes: budget, Revalidate: time.Minute})
	mustServe(t, h, "/hot.bin", files["hot.bin"])
	hot := h.cache.entries["/hot.bin"]
	for round := range 2 {
		for i := range 30 {
			name := fmt.Sprintf("f%02d.bin", i)
			mustServe(t, h, "/"+name, files[name])
			mustServe(t, h, "/hot.bin", files["hot.bin"])
			checkCacheAccounting(t, h.cache, budget)
		}
		if n := len(h.cache.entries); n < 2 || n >= 30 {
			t.Errorf("round %d: %d entries cached", round, n)
		}
	}
	if h.cache.entries["/hot.bin"] != hot {
		t.Error("the entry hit between all others was evicted and reloaded")
	}
}

// checkCacheAccounting fails unless c's bookkeeping agrees with its contents
// and stays within budget.
func checkCacheAccounting(t *testing.T, c *staticCache, budget int64) {
	t.Helper()
	c.mu.RLock()
	defer c.mu.RUnlock()
	var sum int64
	for i, e := range c.ring {
		sum += e.cost
		if e.slot != i || c.entries[e.key] != e {
			t.Fatalf("entry %s: slot %d at ring index %d", e.key, e.slot, i)
		}
	}
	if sum != c.used || c.used > budget || len(c.entries) != len(c.ring) {
		t.Fatalf("used %d, sum %d, budget %d, %d entries, ring %d", c.used, sum, budget, len(c.entries), len(c.ring))
	}
}

func TestStaticWithoutCacheServesFreshFiles(t *testing.T) {
	content := strings.Repeat("<p>no cache</p>\n", 50)
	root := t.TempDir()
	p := filepath.Join(root, "page.html")
	writeTree(t, root, map[string]string{"page.html": content})
	h := newTestHandler(t, root, staticOptions{CacheBytes: 0, Revalidate: time.Hour})
	if h.cache != nil {
		t.Fatal("CacheBytes 0 built a cache")
	}
	w := serve(h, "GET", "/page.html", "Accept-Encoding", "gzip")
	if w.Code != 200 || w.Body.String() != content || w.Header().Get("Etag") != etagOf(content) {
		t.Fatalf("GET: %d ETag %q", w.Code, w.Header().Get("Etag"))
	}
	if w.Header().Get("Content-Encoding") != "" || w.Header().Get("Vary") != "Accept-Encoding" {
		t.Errorf("uncached: Content-Encoding %q Vary %q", w.Header().Get("Content-Encoding"), w.Header().Get("Vary"))
	}
	edited := strings.ToUpper(content)
	fi, _ := os.Stat(p)
	rewrite(t, p, edited, fi.ModTime().Add(time.Hour))
	w = serve(h, "GET", "/page.html")
	if w.Body.String() != edited || w.Header().Get("Etag") != etagOf(edited) {
		t.Errorf("after edit: ETag %q, body changed %v", w.Header().Get("Etag"), w.Body.String() == edited)
	}
}

func TestStaticStreamsFilesLargerThanTheCacheCap(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 200<<10; i++ {
		fmt.Fprintf(&b, "line %d of a large file\n", i)
	}
	content := b.String()
	root := t.TempDir()
	p := filepath.Join(root, "big.txt")
	writeTree(t, root, map[string]string{"big.txt": content})
	h := newTestHandler(t, root, staticOptions{CacheBytes: 64 << 10, Revalidate: time.Minute})

	w := serve(h, "GET", "/big.txt", "Accept-Encoding", "gzip")
	if w.Code != 200 || w.Body.String() != content || w.Header().Get("Etag") != etagOf(content) {
		t.Fatalf("GET: %d, %d bytes, ETag %q", w.Code, w.Body.Len(), w.Header().Get("Etag"))
	}
	if w.Header().Get("Content-Encoding") != "" || len(h.cache.entries) != 0 {
		t.Errorf("large file gzipped (%q) or cached (%d entries)", w.Header().Get("Content-Encoding"), len(h.cache.entries))
	}
	checkRanges(t, h, "/big.txt", content)

	// The digest is remembered per version: a planted tag proves no re-hash.
	h.digests.tags["big.txt"] = memoTag{version: h.digests.tags["big.txt"].version, etag: `"planted"`}
	if got := serve(h, "GET", "/big.txt").Header().Get("Etag"); got != `"planted"` {
		t.Errorf("ETag %q: the file was hashed again", got)
	}
	edited := content + "one more line\n"
	fi, _ := os.Stat(p)
	rewrite(t, p, edited, fi.ModTime().Add(time.Hour))
	if got := serve(h, "GET", "/big.txt").Header().Get("Etag"); got != etagOf(edited) {
		t.Errorf("after edit: ETag %q, want %q", got, etagOf(edited))
	}
}

func TestStaticIsSafeForConcurrentUse(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{}
	for i := range 12 {
		files[fmt.Sprintf("f%d.html", i)] = strings.Repeat(fmt.Sprintf("<p>%d</p>", i), 100)
	}
	writeTree(t, root, files)
	h := newTestHandler(t, root, staticOptions{CacheBytes: 16 << 10})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				name := fmt.Sprintf("f%d.html", (g+i)%12)
				w := serve(h, "GET", "/"+name, "Accept-Encoding", []string{"", "gzip"}[i%2])
				body := w.Body.String()
				if w.Header().Get("Content-Encoding") == "gzip" {
					body = gunzip(t, w.Body.Bytes())
				}
				if w.Code != 200 || body != files[name] {
					t.Errorf("GET %s: %d", name, w.Code)
					return
				}
			}
		})
	}
	wg.Wait()
	checkCacheAccounting(t, h.cache, 16<<10)
}

func TestStaticHotPathAllocatesNothing(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"page.html": strings.Repeat("<p>hot path</p>\n", 64)})
	h := newTestHandler(t, root, staticOptions{CacheBytes: 1 << 20, Revalidate: time.Hour})
	for _, ae := range []string{"", "gzip, deflate, br"} {
		r := httptest.NewRequest("GET", "/page.html", nil)
		r.Header.Set("Accept-Encoding", ae)
		w := &discardWriter{hdr: http.Header{}}
		h.ServeHTTP(w, r) // fill the cache
		allocs := testing.AllocsPerRun(100, func() {
			clear(w.hdr)
			h.ServeHTTP(w, r)
		})
		if allocs != 0 || w.hdr.Get("Etag") == "" {
			t.Errorf("Accept-Encoding %q: %v allocs per request, ETag %q", ae, allocs, w.hdr.Get("Etag"))
		}
	}
}

func FuzzStaticPath(f *testing.F) {
	for _, tc := range hostilePaths {
		f.Add(tc.target)
	}
	for _, p := range []string{"/..", "/../", "..", "", "/./.env", "//.env", "/.well-known/../.env", "/\x00/../.env", "/%2e%2e/"} {
		f.Add(p)
	}
	h := newTestHandler(f, hostileSite(f), staticOptions{CacheBytes: 1 << 20})
	f.Fuzz(func(t *testing.T, p string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.URL.Path = p // already decoded, as the server hands it over
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code == http.StatusInternalServerError {
			t.Fatalf("path %q: status 500", p)
		}
		if body := w.Body.String(); strings.Contains(body, outsideSecret) || strings.Contains(body, dotSecret) {
			t.Fatalf("path %q leaks a secret: %q", p, body)
		}
	})
}

// discardWriter is a reusable ResponseWriter that drops the body, so a
// benchmark measures the handler rather than a recorder's buffers.
type discardWriter struct {
	hdr  http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.hdr }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// benchRequests runs GET path through h until the benchmark ends.
func benchRequests(b *testing.B, h http.Handler, acceptEncoding string) {
	r := httptest.NewRequest("GET", "/page.html", nil)
	if acceptEncoding != "" {
		r.Header.Set("Accept-Encoding", acceptEncoding)
	}
	w := &discardWriter{hdr: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.hdr)
		h.ServeHTTP(w, r)
	}
	if w.code != 0 && w.code != 200 {
		b.Fatalf("status %d", w.code)
	}
}

// benchRoot returns a root holding a 1 KiB page.html.
func benchRoot(b *testing.B) string {
	root := b.TempDir()
	line := "<p>A paragraph of a small static page, repeated.</p>\n"
	page := strings.Repeat(line, 1024/len(line)+1)[:1024]
	writeTree(b, root, map[string]string{"page.html": page})
	return root
}

func BenchmarkStatic1KiB(b *testing.B) {
	for _, ae := range []struct{ name, value string }{{"identity", ""}, {"gzip", "gzip, deflate, br, zstd"}} {
		b.Run(ae.name, func(b *testing.B) {
			h := newTestHandler(b, benchRoot(b), staticOptions{CacheBytes: 64 << 20, Revalidate: time.Second})
			benchRequests(b, h, ae.value)
		})
	}
}

func BenchmarkFileServer1KiB(b *testing.B) {
	benchRequests(b, http.FileServer(http.Dir(benchRoot(b))), "gzip, deflate, br, zstd")
}

func TestStaticCacheNeverGoesBackToAnOlderVersion(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("renaming over an open file fails on Windows")
	}
	root := t.TempDir()
	p := filepath.Join(root, "f.txt")
	writeTree(t, root, map[string]string{"f.txt": "version-1"})
	h := newTestHandler(t, root, staticOptions{CacheBytes: 1 << 20, Revalidate: time.Minute})
	withClock(h) // frozen: a cached entry is trusted for the whole test
	// A slow request opens and stats the file before the edit...
	slow, err := h.root.Open("f.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	slowInfo, err := slow.Stat()
	if err != nil {
		t.Fatal(err)
	}
	// ...a deploy renames a new version over it (the open file keeps the
	// old bytes)...
	tmp := p + ".new"
	rewrite(t, tmp, "version-2", slowInfo.ModTime().Add(time.Hour))
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	// ...a later request caches the new version...
	mustServe(t, h, "/f.txt", "version-2")
	// ...and the slow one finishes after it, with the old bytes.
	w := httptest.NewRecorder()
	h.serveFile(w, httptest.NewRequest("GET", "/f.txt", nil), "/f.txt", "f.txt", slow, slowInfo)
	if w.Body.String() != "version-1" {
		t.Fatalf("the slow request got %q; want the version it opened", w.Body)
	}
	mustServe(t, h, "/f.txt", "version-2") // never back to version-1
}
