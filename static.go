package main

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	// maxCacheEntryBytes caps the size of a cached file. The real cap is the
	// smaller of this and an eighth of the cache budget, so one entry (with its
	// gzip form, at most twice its size) can never take more than a quarter of
	// the cache. Bigger files stream from disk with sendfile, where holding them
	// in memory would save little.
	maxCacheEntryBytes = 1 << 20

	// gzipMinBytes is the smallest file that gets a gzip form. Below it the
	// 18-byte gzip framing and the client's inflate cost outweigh the saving,
	// and the response fits in one packet either way.
	gzipMinBytes = 256

	// maxURLPathBytes bounds the decoded URL path. No file name longer than
	// Linux's PATH_MAX can be opened anyway, so longer paths are refused before
	// any cleaning or file system work is spent on them.
	maxURLPathBytes = 4096

	// entryOverheadBytes is charged to the cache budget for each entry on top of
	// its body and gzip form: the key, header strings and bookkeeping, so that
	// many tiny files cannot overrun the budget for free.
	entryOverheadBytes = 512

	// digestMemoEntries bounds the ETag memo for files too large to cache.
	digestMemoEntries = 1024
)

// Header values shared by every response. They are assigned into header maps
// directly, so they must never be modified in place; code that wants another
// value replaces the slice, as Header.Set does.
var (
	hdrAllow        = []string{"GET, HEAD"}
	hdrVary         = []string{"Accept-Encoding"}
	hdrGzip         = []string{"gzip"}
	hdrAcceptRanges = []string{"bytes"}
	hdrHTML         = []string{"text/html; charset=utf-8"}
)

// contentHeaders are the request headers that take a cached file off the hot
// path and through http.ServeContent, which implements them exactly.
var contentHeaders = [...]string{"Range", "If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"}

// staticOptions configures a staticHandler. Both values are per worker process.
type staticOptions struct {
	CacheBytes int64         // in-memory cache budget in bytes; 0 disables the cache
	Revalidate time.Duration // an entry older than this is checked by a stat; 0 = stat on every request
}

// staticHandler serves the files below one directory over GET and HEAD. It
// owns an os.Root for that directory: the root resolves every name one
// component at a time from the directory's handle and refuses any step, ".."
// or symlink, that leaves it, so confinement does not rest on URL cleaning
// alone. Small files are kept in memory with their response headers
// precomputed. A staticHandler is safe for concurrent use; Close releases the
// root.
type staticHandler struct {
	root       *os.Root
	revalidate time.Duration
	maxEntry   int64
	cache      *staticCache // nil when caching is disabled
	digests    *digestMemo

	// now is the clock used to age cache entries; tests replace it to move
	// time without sleeping.
	now func() time.Time
}

// newStaticHandler opens dir with os.OpenRoot and returns a handler confined to it.
func newStaticHandler(dir string, opts staticOptions) (*staticHandler, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open root %s: %w", dir, err)
	}
	h := &staticHandler{
		root:       root,
		revalidate: max(opts.Revalidate, 0),
		maxEntry:   min(maxCacheEntryBytes, opts.CacheBytes/8),
		digests:    &digestMemo{tags: make(map[string]memoTag)},
		now:        time.Now,
	}
	if h.maxEntry > 0 {
		h.cache = &staticCache{entries: make(map[string]*cacheEntry), budget: opts.CacheBytes}
	}
	return h, nil
}

// Close closes the root. Requests still in flight may fail afterwards.
func (h *staticHandler) Close() error {
	return h.root.Close()
}

// ServeHTTP answers GET and HEAD for files and directories below the root.
func (h *staticHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header()["Allow"] = hdrAllow
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	key, name, status := resolvePath(r.URL.Path)
	if status != http.StatusOK {
		http.Error(w, http.StatusText(status), status)
		return
	}
	if e := h.cached(key); e != nil {
		serveEntry(w, r, e)
		return
	}
	h.serveFromDisk(w, r, key, name)
}

// resolvePath turns a decoded URL path into a cache key and a root-relative
// file name. The key is the cleaned path but keeps a trailing slash, because
// "/docs" (a redirect) and "/docs/" (the index) answer differently. status is
// 200 when the path may be served and otherwise the status to answer with.
// For a path that is already clean, nothing is allocated.
func resolvePath(p string) (key, name string, status int) {
	if len(p) > maxURLPathBytes {
		return "", "", http.StatusRequestURITooLong
	}
	// os.Root on Windows takes a backslash as a separator, and a NUL cannot be
	// in a file name, so neither gets near the file system on any OS.
	if strings.ContainsAny(p, "\\\x00") {
		return "", "", http.StatusNotFound
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	clean := path.Clean(p)
	if hiddenPath(clean) {
		return "", "", http.StatusNotFound
	}
	if clean == "/" {
		return "/", ".", http.StatusOK
	}
	key = clean
	if strings.HasSuffix(p, "/") {
		key = withSlash(p, clean)
	}
	return key, clean[1:], http.StatusOK
}

// withSlash returns clean with a trailing slash, reusing p when it already is
// exactly that, so the usual "/dir/" request does not allocate.
func withSlash(p, clean string) string {
	if len(p) == len(clean)+1 && p[:len(clean)] == clean {
		return p
	}
	return clean + "/"
}

// hiddenPath reports whether a cleaned path has a segment starting with a dot.
// Such names are usually private (.git, .env, editor and tool state), so they
// are never served. /.well-known/ is the one exception, and only as the first
// segment, because RFC 8615 puts public metadata there.
func hiddenPath(clean string) bool {
	if clean == "/.well-known" || strings.HasPrefix(clean, "/.well-known/") {
		clean = clean[len("/.well-known"):]
	}
	// Every segment of a cleaned, rooted path follows a slash.
	return strings.Contains(clean, "/.")
}

// cached returns the cache entry for key if there is one and it still matches
// the file on disk, or nil.
func (h *staticHandler) cached(key string) *cacheEntry {
	if h.cache == nil {
		return nil
	}
	e := h.cache.get(key)
	if e == nil || !h.current(e) {
		return nil
	}
	return e
}

// current reports whether e may still be served. Within the revalidation
// window it trusts the entry without touching the disk, which is what makes a
// hit cheap; past the window, or always when the window is 0, it stats the
// file.
func (h *staticHandler) current(e *cacheEntry) bool {
	if h.revalidate == 0 {
		return h.unchanged(e)
	}
	now := h.now().UnixNano()
	// A negative age means the wall clock stepped back; revalidate then
	// rather than trust the entry until the clock catches up.
	age := now - e.checked.Load()
	if age >= 0 && age <= int64(h.revalidate) {
		return true
	}
	if !h.unchanged(e) {
		return false
	}
	e.checked.Store(now)
	return true
}

// unchanged stats e's file and reports whether it is still the version e
// holds, dropping e from the cache if the file changed or is gone.
func (h *staticHandler) unchanged(e *cacheEntry) bool {
	if !h.isCurrent(e) {
		h.cache.remove(e)
		return false
	}
	return true
}

// serveFromDisk answers a request the cache could not: it opens the path in
// the root and serves a directory redirect, index, listing or file.
func (h *staticHandler) serveFromDisk(w http.ResponseWriter, r *http.Request, key, name string) {
	f, err := h.root.Open(name)
	if err != nil {
		serveOpenError(w, r, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		serveOpenError(w, r, err)
		return
	}
	wantDir := strings.HasSuffix(key, "/")
	switch {
	case fi.IsDir() && !wantDir:
		redirectToDir(w, r, key)
	case fi.IsDir():
		h.serveDir(w, r, key, name, f)
	case wantDir || !fi.Mode().IsRegular():
		http.NotFound(w, r)
	default:
		h.serveFile(w, r, key, name, f, fi)
	}
}

// serveOpenError answers a failed open or stat. A client-chosen path can fail
// in many ways (missing, ENOTDIR, too long, escaping the root through a
// symlink); all of them are simply "not found", so no failure tells a client
// more than that. Only a permission problem is reported as such.
func serveOpenError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, fs.ErrPermission) {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	http.NotFound(w, r)
}

// redirectToDir sends a directory URL that lacks its trailing slash to the
// slash form, keeping the query, so relative links in the index resolve.
func redirectToDir(w http.ResponseWriter, r *http.Request, key string) {
	u := url.URL{Path: key + "/", RawQuery: r.URL.RawQuery}
	http.Redirect(w, r, u.String(), http.StatusMovedPermanently)
}

// serveDir serves the directory's index.html if it has a regular one and a
// listing otherwise. The index is cached under the directory's key.
func (h *staticHandler) serveDir(w http.ResponseWriter, r *http.Request, key, name string, dir *os.File) {
	index := path.Join(name, "index.html")
	if f, err := h.root.Open(index); err == nil {
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			h.serveFile(w, r, key, index, f, fi)
			return
		}
	}
	h.serveListing(w, r, key, name, dir)
}

// serveFile serves an open regular file, from a new cache entry when it is
// small enough and streamed from disk otherwise.
func (h *staticHandler) serveFile(w http.ResponseWriter, r *http.Request, key, name string, f *os.File, fi fs.FileInfo) {
	if h.cache == nil || fi.Size() > h.maxEntry {
		h.serveStream(w, r, name, f, fi)
		return
	}
	e, err := h.loadEntry(key, name, f, fi)
	if err != nil {
		http.Error(w, "cannot read file", http.StatusInternalServerError)
		return
	}
	h.cache.add(e, h.isCurrent)
	serveEntry(w, r, e)
}

// isCurrent stats e's file and reports whether e holds its current version.
func (h *staticHandler) isCurrent(e *cacheEntry) bool {
	fi, err := h.root.Stat(e.name)
	return err == nil && fi.Mode().IsRegular() && versionOf(fi) == e.version
}

// serveStream serves a file that is not cached straight from disk;
// http.ServeContent over the *os.File handles conditionals and ranges and lets
// net/http use sendfile. Such files are always sent as identity: compressing
// per request would spend CPU on every hit, give up sendfile and ranges, and
// it is only files over the cache entry cap (or every file when the cache is
// off) that come here.
func (h *staticHandler) serveStream(w http.ResponseWriter, r *http.Request, name string, f *os.File, fi fs.FileInfo) {
	tag, err := h.digests.etag(name, f, fi)
	if err != nil {
		http.Error(w, "cannot read file", http.StatusInternalServerError)
		return
	}
	ctype := contentType(name, f)
	hdr := w.Header()
	hdr.Set("Content-Type", ctype)
	hdr.Set("Etag", tag)
	if compressibleType(ctype) {
		hdr["Vary"] = hdrVary
	}
	http.ServeContent(w, r, name, fi.ModTime(), f)
}

// contentType returns the media type of the file name whose content r
// reads: by extension, else by sniffing the first 512 bytes, all that
// http.DetectContentType looks at.
func contentType(name string, r io.ReaderAt) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	head := make([]byte, 512)
	n, _ := r.ReadAt(head, 0)
	return http.DetectContentType(head[:n])
}

// compressibleType reports whether gzip pays for the media type ctype: text,
// JavaScript, JSON, XML, WebAssembly, and any +json or +xml type such as
// image/svg+xml. Images, audio, video, fonts and archives are already
// compressed, and gzipping them only costs CPU.
func compressibleType(ctype string) bool {
	mt, _, _ := strings.Cut(ctype, ";")
	mt = strings.TrimSpace(mt)
	if strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") {
		return true
	}
	switch mt {
	case "application/javascript", "application/json", "application/xml", "application/wasm":
		return true
	}
	return false
}

// acceptsGzip reports whether the Accept-Encoding values allow gzip. The
// first "gzip" (or "x-gzip") item decides, by whether its q is zero; without
// one, a "*" item does. Returning at the first gzip item keeps the usual
// browser header ("gzip, deflate, br, zstd") to one item's work, and slicing
// the strings in place keeps the check free of allocations.
func acceptsGzip(values []string) bool {
	star := false
	for _, v := range values {
		for v != "" {
			var item string
			item, v, _ = strings.Cut(v, ",")
			coding, params, _ := strings.Cut(item, ";")
			coding = strings.TrimSpace(coding)
			switch {
			case strings.EqualFold(coding, "gzip"), strings.EqualFold(coding, "x-gzip"):
				return !zeroQ(params)
			case coding == "*":
				star = !zeroQ(params)
			}
		}
	}
	return star
}

// zeroQ reports whether the parameters of one Accept-Encoding item carry a
// q of zero ("q=0", "q=0.0", "q=0.000"), which refuses the coding.
func zeroQ(params string) bool {
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		p = strings.TrimSpace(p)
		if len(p) < 3 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=' {
			continue
		}
		return strings.Trim(p[2:], "0.") == "" && p[2] == '0'
	}
	return false
}

// usesServeContent reports whether a request header asks for conditional or
// partial handling, which http.ServeContent does rather than the hot path.
func usesServeContent(hdr http.Header) bool {
	for _, k := range contentHeaders {
		if _, ok := hdr[k]; ok {
			return true
		}
	}
	return false
}

// identityOnly reports whether a request must get identity bytes even if it
// accepts gzip. Ranges of a gzip stream are of no use to clients, so ranges
// are always of the identity form. If-Match and If-Unmodified-Since can be
// answered 412 by http.ServeContent, which would leave the preset gzip
// Content-Length on an empty response, so those requests get identity too.
func identityOnly(hdr http.Header) bool {
	for _, k := range [...]string{"Range", "If-Match", "If-Unmodified-Since"} {
		if _, ok := hdr[k]; ok {
			return true
		}
	}
	return false
}

// serveEntry answers r from a cached entry. The common request, without
// conditionals or a range, is the hot path: it puts the entry's precomputed
// header slices straight into the header map and writes the body with one
// Write, so it formats nothing and allocates nothing. Everything else goes
// through http.ServeContent, which implements the conditional and range rules.
func serveEntry(w http.ResponseWriter, r *http.Request, e *cacheEntry) {
	viaServeContent := usesServeContent(r.Header)
	gz := e.gz != nil && acceptsGzip(r.Header["Accept-Encoding"]) && !(viaServeContent && identityOnly(r.Header))
	hdr := w.Header()
	setEntryHeaders(hdr, e, gz)
	body := e.body
	if gz {
		// Set before ServeContent too: it leaves Content-Length unset when
		// Content-Encoding is set.
		hdr["Content-Length"] = e.gzLength
		body = e.gz
	}
	if viaServeContent {
		http.ServeContent(w, r, "", e.modTime, bytes.NewReader(body))
		return
	}
	if !gz {
		hdr["Content-Length"] = e.length
	}
	hdr["Last-Modified"] = e.lastModified
	hdr["Accept-Ranges"] = hdrAcceptRanges
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// setEntryHeaders sets the headers that describe the chosen representation of
// e: its type, validator and encoding.
func setEntryHeaders(hdr http.Header, e *cacheEntry, gz bool) {
	hdr["Content-Type"] = e.contentType
	if e.compressible {
		// Caches must key on Accept-Encoding whether or not this response
		// is compressed, or they would hand gzip to clients that refused it.
		hdr["Vary"] = hdrVary
	}
	if gz {
		hdr["Content-Encoding"] = hdrGzip
		hdr["Etag"] = e.gzETag
		return
	}
	hdr["Etag"] = e.etag
}

// serveListing writes an HTML index of a directory without index.html.
func (h *staticHandler) serveListing(w http.ResponseWriter, r *http.Request, key, name string, dir *os.File) {
	names, err := h.listDir(name, dir)
	if err != nil {
		http.Error(w, "cannot read directory", http.StatusInternalServerError)
		return
	}
	var b strings.Builder
	writeListing(&b, key, names)
	hdr := w.Header()
	hdr["Content-Type"] = hdrHTML
	hdr["Vary"] = hdrVary
	hdr.Set("Content-Length", strconv.Itoa(b.Len()))
	if r.Method != http.MethodHead {
		io.WriteString(w, b.String())
	}
}

// listDir returns the names in dir that the handler would serve, sorted, with
// a trailing slash on directories. Dot names and names with a backslash are
// left out because requests for them are refused, and symlinks are resolved
// through the root so that those escaping it are left out too.
func (h *staticHandler) listDir(name string, dir *os.File) ([]string, error) {
	ents, err := dir.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", name, err)
	}
	names := make([]string, 0, len(ents))
	for _, d := range ents {
		n := d.Name()
		if strings.HasPrefix(n, ".") || strings.Contains(n, "\\") {
			continue
		}
		isDir := d.IsDir()
		if d.Type()&fs.ModeSymlink != 0 {
			fi, err := h.root.Stat(path.Join(name, n))
			if err != nil {
				continue
			}
			isDir = fi.IsDir()
		}
		if isDir {
			n += "/"
		}
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// writeListing renders the listing page for the directory at URL path key.
// Each name is URL-escaped for the link (url.URL also guards a name with a
// colon from reading as a scheme) and HTML-escaped for the text and attribute.
func writeListing(b *strings.Builder, key string, names []string) {
	b.WriteString("<!doctype html>\n<meta charset=\"utf-8\">\n<title>Index of ")
	b.WriteString(html.EscapeString(key))
	b.WriteString("</title>\n<pre>\n")
	for _, n := range names {
		href := (&url.URL{Path: n}).String()
		fmt.Fprintf(b, "<a href=\"%s\">%s</a>\n", html.EscapeString(href), html.EscapeString(n))
	}
	b.WriteString("</pre>\n")
}
