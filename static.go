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
	// maxCacheEntryBytes caps the size of a cached file whose type gzip
	// does not pay for (an image, a font, an archive). The real cap is the
	// smaller of this and an eighth of the cache budget. Bigger files
	// stream from disk with sendfile, where holding them in memory would
	// save little.
	maxCacheEntryBytes = 1 << 20

	// maxGzipEntryBytes caps the size of a cached file whose type gzip pays
	// for (compressibleType), and of each sidecar: only a cached file gets a
	// gzip form made on the fly, and a modern JavaScript bundle runs to
	// several MiB. The real cap is the smaller of this and an eighth of the
	// cache budget, so one entry (its body and up to three compressed
	// forms) never takes more than half of the cache, and what a worker
	// holds stays within -cache-bytes. The gzip form costs CPU once per
	// version of the file, per worker, when it is cached.
	maxGzipEntryBytes = 8 << 20

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
	maxEntry   int64        // the cached size of a file gzip does not pay for
	maxGzip    int64        // of one it does, and of a sidecar
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
		return nil, fmt.Errorf("open root %s: %w", linkedName(dir), err)
	}
	h := &staticHandler{
		root:       root,
		revalidate: max(opts.Revalidate, 0),
		maxEntry:   min(maxCacheEntryBytes, opts.CacheBytes/8),
		maxGzip:    min(maxGzipEntryBytes, opts.CacheBytes/8),
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
	f, fi, err := openServed(h.root, name)
	if err != nil {
		h.serveOpenError(w, r, key, err)
		return
	}
	defer f.Close()
	wantDir := strings.HasSuffix(key, "/")
	switch {
	case fi.IsDir() && !wantDir:
		redirectToDir(w, r, key)
	case fi.IsDir():
		h.serveDir(w, r, key, name, f)
	case wantDir:
		h.notFound(w, r)
	default:
		h.serveFile(w, r, key, name, f, fi)
	}
}

// errNotFile is openServed's answer for a path that is neither a regular
// file nor a directory.
var errNotFile = errors.New("neither a regular file nor a directory")

// openServed opens name in root for serving if it is a regular file or a
// directory, and returns errNotFile for anything else (a FIFO, a device, a
// socket) without ever blocking on it: open(2) of a FIFO waits for a
// writer, for ever, holding the request's slot, and opening a device can
// have effects of its own (a terminal becomes the controlling one, a tape
// rewinds). So it stats first, and such a path is never opened at all;
// and since the path can change between the stat and the open, it opens
// with openFlags (O_NONBLOCK and O_NOCTTY on Unix, as nginx opens the
// files it serves) and checks the open file's type again. Every file the
// site serves, its sidecars, indexes and 404 page included, is opened
// here.
//
// The descriptor keeps O_NONBLOCK, as nginx's do: reads of a regular file
// and sendfile from it ignore it, and clearing it would cost two fcntl
// calls per open where passing it saves the four that os.Root's OpenFile
// otherwise spends trying to add the file to the netpoller.
func openServed(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	if fi, err := root.Stat(name); err != nil {
		return nil, nil, err
	} else if !servable(fi) {
		return nil, nil, errNotFile
	}
	f, err := root.OpenFile(name, openFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !servable(fi) {
		err = errNotFile
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// servable reports whether fi is a regular file or a directory.
func servable(fi fs.FileInfo) bool {
	return fi.Mode().IsRegular() || fi.IsDir()
}

// serveOpenError answers a failed open or stat. A client-chosen path can fail
// in many ways (missing, ENOTDIR, too long, escaping the root through a
// symlink); all of them are simply missing, so no failure tells a client
// more than that. Only a permission problem is reported as such, and a
// path that is not a file (errNotFile) gets a 404, never the fallback.
func (h *staticHandler) serveOpenError(w http.ResponseWriter, r *http.Request, key string, err error) {
	if errors.Is(err, errNotFile) {
		h.notFound(w, r)
		return
	}
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
	if f, fi, ok := h.openRegular(index); ok {
		defer f.Close()
		h.serveFile(w, r, key, index, f, fi)
		return
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
	if !h.fits(name, f, fi.Size()) {
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

// fits reports whether a file of size bytes is cached: up to the entry
// cap, or up to the larger gzip cap when its type compresses, so that it
// gets a gzip form.
func (h *staticHandler) fits(name string, f *os.File, size int64) bool {
	switch {
	case h.cache == nil || size > h.maxGzip:
		return false
	case size <= h.maxEntry:
		return true
	}
	return compressibleType(contentType(name, f))
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
	r = settleRange(r, fi.Size())
	if !ranged(r.Header) {
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
		if usesServeContent(r.Header) {
			w = codedWriter{w}
		}
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

// ranged reports whether a request asks for a range. Ranges of a gzip
// stream are of no use to clients, so a range is always of the identity
// form, and If-Range is weighed against the identity ETag: a client that
// holds part of another form gets the whole file.
func ranged(hdr http.Header) bool {
	_, ok := hdr["Range"]
	return ok
}

// serveEntry answers r from a cached entry. The common request, without
// conditionals or a range, is the hot path: it puts the entry's precomputed
// header slices straight into the header map and writes the body with one
// Write, so it formats nothing and allocates nothing. Everything else goes
// through serveEntryContent.
func serveEntry(w http.ResponseWriter, r *http.Request, e *cacheEntry) {
	if usesServeContent(r.Header) {
		serveEntryContent(w, r, e)
		return
	}
	var form *encodedForm
	if e.codings != 0 {
		form = e.pick(r.Header["Accept-Encoding"])
	}
	hdr := w.Header()
	setEntryHeaders(hdr, e, form)
	body, length := e.body, e.length
	if form != nil {
		body, length = form.body, form.length
	}
	hdr["Content-Length"] = length
	hdr["Last-Modified"] = e.lastModified
	hdr["Accept-Ranges"] = hdrAcceptRanges
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// serveEntryContent answers a conditional or range request from a cached
// entry through http.ServeContent, which implements those rules. The
// validators are compared with the form the request selects, as RFC 9110
// §13.2.1 says: the one its Accept-Encoding picks, or identity for a range.
func serveEntryContent(w http.ResponseWriter, r *http.Request, e *cacheEntry) {
	r = settleRange(r, int64(len(e.body)))
	var form *encodedForm
	if e.codings != 0 && !ranged(r.Header) {
		form = e.pick(r.Header["Accept-Encoding"])
	}
	hdr := w.Header()
	setEntryHeaders(hdr, e, form)
	body := e.body
	if form != nil {
		// ServeContent leaves Content-Length unset when Content-Encoding
		// is set.
		hdr["Content-Length"] = form.length
		body = form.body
		w = codedWriter{w}
	}
	http.ServeContent(w, r, "", e.modTime, bytes.NewReader(body))
}

// codedWriter is the ResponseWriter for a compressed form sent through
// http.ServeContent, whose length the caller sets beforehand because
// ServeContent sets none once Content-Encoding is set. When ServeContent
// answers other than with the form, a 412 for a failed If-Match say,
// that length and coding would describe a body that never comes, and the
// client would wait for it; codedWriter drops both then. Only conditional
// requests for a compressed form pass through it.
type codedWriter struct{ http.ResponseWriter }

// WriteHeader drops the form's length and coding from any answer but the
// form itself.
func (w codedWriter) WriteHeader(code int) {
	if code >= 300 {
		hdr := w.Header()
		delete(hdr, "Content-Length")
		delete(hdr, "Content-Encoding")
	}
	w.ResponseWriter.WriteHeader(code)
}

// ReadFrom keeps sendfile for a sidecar streamed from disk: ServeContent
// copies the file with io.Copy, which uses the writer's ReadFrom.
func (w codedWriter) ReadFrom(src io.Reader) (int64, error) {
	return io.Copy(w.ResponseWriter, src)
}

// Unwrap lets http.ResponseController reach the connection.
func (w codedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// settleRange returns r, or a copy of it with another Range header, so
// that http.ServeContent answers the range of a size-byte representation
// as RFC 9110 §14 says where net/http alone does not (see settledRange).
// It rewrites the header rather than answering itself so that
// ServeContent still weighs the preconditions first (§13.2.2): a failed
// If-Match is 412, and a failed If-Range sends the whole file, whatever
// the range.
func settleRange(r *http.Request, size int64) *http.Request {
	if !ranged(r.Header) {
		return r
	}
	v := r.Header.Get("Range")
	nv, keep := settledRange(v, size)
	if keep && nv == v {
		return r
	}
	r = r.WithContext(r.Context())
	r.Header = r.Header.Clone()
	if keep {
		r.Header.Set("Range", nv)
	} else {
		r.Header.Del("Range")
	}
	return r
}

// settledRange returns the Range value to hand http.ServeContent for v,
// the client's, and a representation of size bytes, or keep false when
// the range is to be ignored and the whole representation sent:
//   - A unit other than bytes is ignored (§14.2); the unit's case is not
//     significant (§14.1).
//   - A range of an empty file is ignored, as net/http ignores one that
//     fails to overlap it, since no Content-Range can describe zero bytes;
//     net/http would send "bytes 0--1/0" for a suffix.
//   - A suffix of zero bytes ("-0") is unsatisfiable, but net/http sends it
//     as the impossible "bytes 1024-1023/1024". It is dropped from the set,
//     and a set of nothing else becomes one starting at size, which
//     net/http answers 416 with "bytes */size".
func settledRange(v string, size int64) (string, bool) {
	unit, set, ok := strings.Cut(v, "=")
	switch {
	case !ok:
		return v, true // malformed: net/http answers 416
	case !strings.EqualFold(unit, "bytes") || size == 0:
		return "", false
	}
	var kept []string
	dropped := false
	for spec := range strings.SplitSeq(set, ",") {
		switch {
		case zeroSuffix(spec):
			dropped = true
		case strings.TrimSpace(spec) != "":
			kept = append(kept, spec)
		}
	}
	switch {
	case !dropped:
		return "bytes=" + set, true
	case len(kept) == 0:
		return "bytes=" + strconv.FormatInt(size, 10) + "-", true
	}
	return "bytes=" + strings.Join(kept, ","), true
}

// zeroSuffix reports whether spec, one range of a Range set, is a suffix
// of zero bytes, as net/http parses it: "-0", "- 00" and the like.
func zeroSuffix(spec string) bool {
	start, end, ok := strings.Cut(strings.TrimSpace(spec), "-")
	end = strings.TrimSpace(end)
	if !ok || strings.TrimSpace(start) != "" || end == "" || end[0] == '-' {
		return false
	}
	n, err := strconv.ParseInt(end, 10, 64)
	return err == nil && n == 0
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
