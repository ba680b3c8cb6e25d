package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

const (
	// maxCacheEntryBytes caps the size of a cached file, and of each of its
	// sidecars. The real cap is the smaller of this and an eighth of the
	// cache budget, so one entry (with up to three compressed forms) can
	// never take more than half of the cache. Bigger files stream from disk with sendfile, where holding them
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
	hdrAcceptRanges = []string{"bytes"}
	hdrHTML         = []string{"text/html; charset=utf-8"}
	hdrNosniff      = []string{"nosniff"}
	hdrImmutable    = []string{"public, max-age=31536000, immutable"}
	hdrNoCache      = []string{"no-cache"}
)

// contentHeaders are the request headers that take a cached file off the hot
// path and through http.ServeContent, which implements them exactly.
var contentHeaders = [...]string{"Range", "If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"}

// staticOptions configures a staticHandler. The cache is per worker process.
type staticOptions struct {
	CacheBytes int64         // in-memory cache budget in bytes; 0 disables the cache
	Revalidate time.Duration // an entry older than this is checked by a stat; 0 = stat on every request
	Listing    bool          // list directories without an index.html; otherwise 404
	Fallback   string        // root-relative file served for missing extensionless paths; "": none
	Immutable  bool          // Cache-Control for fingerprinted assets and HTML; see cacheControl
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
	listing    bool
	fallback   string // cleaned, root-relative; "": none
	immutable  bool

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
		listing:    opts.Listing,
		immutable:  opts.Immutable,
		now:        time.Now,
	}
	if opts.Fallback != "" {
		h.fallback = path.Clean("/" + opts.Fallback)[1:]
		if err := fallbackIn(root, dir, h.fallback); err != nil {
			root.Close()
			return nil, err
		}
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
// Every answer carries X-Content-Type-Options: nosniff, so a browser never
// runs an uploaded text file as a script because it looks like one.
func (h *staticHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header()["X-Content-Type-Options"] = hdrNosniff
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header()["Allow"] = hdrAllow
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	key, name, status := resolvePath(r.URL.Path)
	if status == http.StatusNotFound {
		h.notFound(w, r)
		return
	}
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
		h.serveOpenError(w, r, key, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		h.serveOpenError(w, r, key, err)
		return
	}
	wantDir := strings.HasSuffix(key, "/")
	switch {
	case fi.IsDir() && !wantDir:
		redirectToDir(w, r, key)
	case fi.IsDir():
		h.serveDir(w, r, key, name, f)
	case wantDir || !fi.Mode().IsRegular():
		h.notFound(w, r)
	default:
		h.serveFile(w, r, key, name, f, fi)
	}
}

// serveOpenError answers a failed open or stat. A client-chosen path can fail
// in many ways (missing, ENOTDIR, too long, escaping the root through a
// symlink); all of them are simply missing, so no failure tells a client
// more than that. Only a permission problem is reported as such.
func (h *staticHandler) serveOpenError(w http.ResponseWriter, r *http.Request, key string, err error) {
	if errors.Is(err, fs.ErrPermission) {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	h.missing(w, r, key)
}

// redirectToDir sends a directory URL that lacks its trailing slash to the
// slash form, keeping the query, so relative links in the index resolve.
func redirectToDir(w http.ResponseWriter, r *http.Request, key string) {
	u := url.URL{Path: key + "/", RawQuery: r.URL.RawQuery}
	http.Redirect(w, r, u.String(), http.StatusMovedPermanently)
}

// serveDir serves the directory's index.html if it has a regular one, and
// otherwise a listing with -listing and a 404 without. The index is cached
// under the directory's key.
func (h *staticHandler) serveDir(w http.ResponseWriter, r *http.Request, key, name string, dir *os.File) {
	index := path.Join(name, "index.html")
	if f, err := h.root.Open(index); err == nil {
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			h.serveFile(w, r, key, index, f, fi)
			return
		}
	}
	if !h.listing {
		h.notFound(w, r)
		return
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

// isCurrent stats e's file and its sidecars and reports whether e holds
// their current versions.
func (h *staticHandler) isCurrent(e *cacheEntry) bool {
	fi, err := h.root.Stat(e.name)
	return err == nil && fi.Mode().IsRegular() && versionOf(fi) == e.version &&
		h.statSidecars(e.name, e.version.modTime) == e.sidecars
}

// serveStream serves a file that is not cached straight from disk;
// http.ServeContent over the *os.File handles conditionals and ranges and lets
// net/http use sendfile. Such files are never compressed on the fly:
// compressing per request would spend CPU on every hit, give up sendfile and
// ranges, and it is only files over the cache entry cap (or every file when
// the cache is off) that come here. A usable sidecar the client prefers is
// sent instead, by sendfile too, except for ranges.
func (h *staticHandler) serveStream(w http.ResponseWriter, r *http.Request, name string, f *os.File, fi fs.FileInfo) {
	ctype := contentType(name, f)
	hdr := w.Header()
	hdr.Set("Content-Type", ctype)
	if cc := h.cacheControl(name, ctype); cc != nil {
		hdr["Cache-Control"] = cc
	}
	modTime := fi.ModTime().UnixNano()
	if compressibleType(ctype) || h.statSidecars(name, modTime) != [numCodings]fileVersion{} {
		hdr["Vary"] = hdrVary
	}
	if !identityOnly(r.Header) {
		if sf, sfi, c := h.openSidecar(name, modTime, parseAcceptEncoding(r.Header["Accept-Encoding"])); sf != nil {
			defer sf.Close()
			if h.serveContent(w, r, sidecarName(name, c), sf, sfi, c) {
				return
			}
			hdr.Del("Content-Encoding")
		}
	}
	h.serveContent(w, r, name, f, fi, -1)
}

// serveContent sends the open file f in coding c (-1: identity) through
// http.ServeContent, with its ETag. It reports false, having written
// nothing, when the file cannot be hashed; for identity it answers 500 then.
func (h *staticHandler) serveContent(w http.ResponseWriter, r *http.Request, name string, f *os.File, fi fs.FileInfo, c coding) bool {
	tag, err := h.digests.etag(name, f, fi)
	if err != nil {
		if c < 0 {
			http.Error(w, "cannot read file", http.StatusInternalServerError)
		}
		return false
	}
	hdr := w.Header()
	hdr.Set("Etag", tag)
	if c >= 0 {
		hdr["Content-Encoding"] = codings[c].header
		// ServeContent sets no Content-Length once Content-Encoding is set.
		hdr.Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	}
	http.ServeContent(w, r, "", fi.ModTime(), f)
	return true
}

// contentType returns the media type of the file name whose content r
// reads: by extension, else by sniffing the first 512 bytes, all that
// http.DetectContentType looks at.
func contentType(name string, r io.ReaderAt) string {
	ext := path.Ext(name)
	if t, ok := webTypes[strings.ToLower(ext)]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
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
	var form *encodedForm
	if e.codings != 0 && !(viaServeContent && identityOnly(r.Header)) {
		form = e.pick(r.Header["Accept-Encoding"])
	}
	hdr := w.Header()
	setEntryHeaders(hdr, e, form)
	body := e.body
	if form != nil {
		// Set before ServeContent too: it leaves Content-Length unset when
		// Content-Encoding is set.
		hdr["Content-Length"] = form.length
		body = form.body
	}
	if viaServeContent {
		http.ServeContent(w, r, "", e.modTime, bytes.NewReader(body))
		return
	}
	if form == nil {
		hdr["Content-Length"] = e.length
	}
	hdr["Last-Modified"] = e.lastModified
	hdr["Accept-Ranges"] = hdrAcceptRanges
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// setEntryHeaders sets the headers that describe the chosen representation of
// e, form or identity when form is nil: its type, validator, encoding and
// caching policy.
func setEntryHeaders(hdr http.Header, e *cacheEntry, form *encodedForm) {
	hdr["Content-Type"] = e.contentType
	if e.vary {
		// Caches must key on Accept-Encoding whether or not this response
		// is compressed, or they would hand gzip to clients that refused it.
		hdr["Vary"] = hdrVary
	}
	if e.cacheControl != nil {
		hdr["Cache-Control"] = e.cacheControl
	}
	if form != nil {
		hdr["Content-Encoding"] = codings[form.coding].header
		hdr["Etag"] = form.etag
		return
	}
	hdr["Etag"] = e.etag
}
