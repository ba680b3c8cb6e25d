package main

// pages.go is what the static site answers besides a file: the 404 page,
// the single-page-app fallback, directory listings, and the per-name
// policies that do not depend on the machine (media types, Cache-Control).

import (
	"fmt"
	"html"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// notFoundPage is the file that, when the root has it, is the body of every
// 404, as on GitHub Pages and Netlify.
const notFoundPage = "404.html"

// missing answers a path with no file behind it: with the fallback file
// for an extensionless path when -fallback is set, so a single-page app's
// client-side routes load the app, and with a 404 otherwise. A path with
// an extension names an asset, and a missing asset must stay an error, or
// a broken script tag would get HTML back.
func (h *staticHandler) missing(w http.ResponseWriter, r *http.Request, key string) {
	if h.fallback == "" || path.Ext(strings.TrimSuffix(key, "/")) != "" {
		h.notFound(w, r)
		return
	}
	fkey := "/" + h.fallback
	if e := h.cached(fkey); e != nil {
		serveEntry(w, r, e)
		return
	}
	f, fi, ok := h.openRegular(h.fallback)
	if !ok {
		// Checked at startup, so it was removed since: no loop, a 404.
		h.notFound(w, r)
		return
	}
	defer f.Close()
	h.serveFile(w, r, fkey, h.fallback, f, fi)
}

// openRegular opens name in the root if it is a regular file, never
// blocking on anything else (see openServed).
func (h *staticHandler) openRegular(name string) (*os.File, fs.FileInfo, bool) {
	f, fi, err := openServed(h.root, name)
	if err != nil {
		return nil, nil, false
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, false
	}
	return f, fi, true
}

// notFound answers 404, with the root's 404.html as the page when it has
// one. The page comes through the cache like any file, so a flood of bad
// paths costs no more than a flood of hits.
func (h *staticHandler) notFound(w http.ResponseWriter, r *http.Request) {
	page, ok := h.notFoundBody()
	if !ok {
		http.NotFound(w, r)
		return
	}
	hdr := w.Header()
	hdr["Content-Type"] = hdrHTML
	hdr["Content-Length"] = []string{strconv.Itoa(len(page))}
	w.WriteHeader(http.StatusNotFound)
	if r.Method != http.MethodHead {
		w.Write(page)
	}
}

// notFoundBody returns the bytes of the root's 404.html, if it has a
// regular one no larger than a cache entry.
func (h *staticHandler) notFoundBody() ([]byte, bool) {
	const key = "/" + notFoundPage
	if e := h.cached(key); e != nil {
		return e.body, true
	}
	f, fi, ok := h.openRegular(notFoundPage)
	if !ok {
		return nil, false
	}
	defer f.Close()
	if fi.Size() > maxCacheEntryBytes {
		return nil, false
	}
	if h.cache == nil || fi.Size() > h.maxEntry {
		body, err := io.ReadAll(io.LimitReader(f, maxCacheEntryBytes))
		return body, err == nil
	}
	e, err := h.loadEntry(key, notFoundPage, f, fi)
	if err != nil {
		return nil, false
	}
	h.cache.add(e, h.isCurrent)
	return e.body, true
}

// webTypes are the media types of the web's file types, which win over the
// host's mime.types: a Content-Type must not depend on the machine, and
// some hosts map .js to text/plain or know no .woff2 or .webmanifest.
var webTypes = map[string]string{
	".html":        "text/html; charset=utf-8",
	".htm":         "text/html; charset=utf-8",
	".css":         "text/css; charset=utf-8",
	".js":          "text/javascript; charset=utf-8",
	".mjs":         "text/javascript; charset=utf-8",
	".json":        "application/json",
	".map":         "application/json",
	".webmanifest": "application/manifest+json",
	".txt":         "text/plain; charset=utf-8",
	".xml":         "application/xml",
	".svg":         "image/svg+xml",
	".png":         "image/png",
	".jpg":         "image/jpeg",
	".jpeg":        "image/jpeg",
	".gif":         "image/gif",
	".webp":        "image/webp",
	".avif":        "image/avif",
	".ico":         "image/vnd.microsoft.icon",
	".woff":        "font/woff",
	".woff2":       "font/woff2",
	".wasm":        "application/wasm",
	".pdf":         "application/pdf",
	".mp4":         "video/mp4",
	".webm":        "video/webm",
}

// cacheControl returns the Cache-Control value for a file, nil for none.
// By default there is none, as with nginx: clients revalidate by ETag as
// they see fit. With -immutable-assets, a fingerprinted asset may be kept
// for a year unchecked, since a new version gets a new name, and HTML is
// revalidated on every visit, so a deploy shows at once and points to the
// new names.
func (h *staticHandler) cacheControl(name, ctype string) []string {
	switch {
	case !h.immutable:
		return nil
	case strings.HasPrefix(ctype, "text/html"):
		return hdrNoCache
	case fingerprinted(name):
		return hdrImmutable
	}
	return nil
}

// fingerprinted reports whether a file name carries a content hash the way
// bundlers write one: name.HASH.ext or name-HASH.ext, where HASH is at
// least 8 letters, digits or underscores with at least one digit and one
// letter ("app.3f9a1c2e.js", "index-BkTq3z9a.css"). The letter keeps a date
// ("photo-20240101.jpg") from counting; a hash of digits alone is missed,
// which costs only a revalidation.
func fingerprinted(name string) bool {
	base := path.Base(name)
	stem := strings.TrimSuffix(base, path.Ext(base))
	i := strings.LastIndexAny(stem, ".-")
	if i <= 0 {
		return false
	}
	hash := stem[i+1:]
	var digit, letter bool
	for _, c := range []byte(hash) {
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letter = true
		case c != '_':
			return false
		}
	}
	return len(hash) >= 8 && digit && letter
}

// serveListing writes an HTML index of a directory without index.html.
func (h *staticHandler) serveListing(w http.ResponseWriter, r *http.Request, key, name string, dir *os.File) {
	ents, err := h.listDir(name, dir)
	if err != nil {
		http.Error(w, "cannot read directory", http.StatusInternalServerError)
		return
	}
	var b strings.Builder
	writeListing(&b, key, ents)
	hdr := w.Header()
	hdr["Content-Type"] = hdrHTML
	hdr.Set("Content-Length", strconv.Itoa(b.Len()))
	if r.Method != http.MethodHead {
		io.WriteString(w, b.String())
	}
}

// listEntry is one line of a listing.
type listEntry struct {
	name    string // with a trailing slash for a directory
	size    int64
	modTime time.Time
}

// listDir returns the entries of dir that the handler would serve, sorted
// by name. Dot names and names with a backslash are left out because
// requests for them are refused, and symlinks are resolved through the root
// so that those escaping it are left out too.
func (h *staticHandler) listDir(name string, dir *os.File) ([]listEntry, error) {
	ents, err := dir.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", name, err)
	}
	list := make([]listEntry, 0, len(ents))
	for _, d := range ents {
		n := d.Name()
		if strings.HasPrefix(n, ".") || strings.Contains(n, "\\") {
			continue
		}
		fi, err := d.Info()
		if err == nil && d.Type()&fs.ModeSymlink != 0 {
			fi, err = h.root.Stat(path.Join(name, n))
		}
		if err != nil {
			continue // gone since ReadDir, or a symlink out of the root
		}
		e := listEntry{name: n, size: fi.Size(), modTime: fi.ModTime()}
		if fi.IsDir() {
			e.name, e.size = n+"/", -1
		}
		list = append(list, e)
	}
	slices.SortFunc(list, func(a, b listEntry) int { return strings.Compare(a.name, b.name) })
	return list, nil
}

// writeListing renders the listing page for the directory at URL path key:
// a heading, a link to the parent, and each entry with its size and
// modification time (UTC). Each name is URL-escaped for the link (url.URL
// also guards a name with a colon from reading as a scheme) and
// HTML-escaped for the text and attribute.
func writeListing(b *strings.Builder, key string, ents []listEntry) {
	title := html.EscapeString("Index of " + key)
	fmt.Fprintf(b, "<!doctype html>\n<meta charset=\"utf-8\">\n<title>%s</title>\n<h1>%s</h1>\n<table>\n", title, title)
	b.WriteString("<tr><th>Name</th><th>Size</th><th>Modified (UTC)</th></tr>\n")
	if key != "/" {
		b.WriteString("<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n")
	}
	for _, e := range ents {
		href := (&url.URL{Path: e.name}).String()
		size := "-"
		if e.size >= 0 {
			size = strconv.FormatInt(e.size, 10)
		}
		fmt.Fprintf(b, "<tr><td><a href=\"%s\">%s</a></td><td>%s</td><td>%s</td></tr>\n",
			html.EscapeString(href), html.EscapeString(e.name), size, e.modTime.UTC().Format("2006-01-02 15:04:05"))
	}
	b.WriteString("</table>\n")
}
