package main

// cache.go is the static runtime's per-worker memory: file versions, cache
// entries with their precomputed headers and gzip form, the CLOCK-evicted
// cache within -cache-bytes, and the remembered digests of large files.

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// fileVersion identifies one version of a file. The inode catches a file
// replaced by rename even when its size and modification time match.
type fileVersion struct {
	size    int64
	modTime int64 // UnixNano
	inode   uint64
}

// versionOf returns the version of the file described by fi.
func versionOf(fi fs.FileInfo) fileVersion {
	return fileVersion{size: fi.Size(), modTime: fi.ModTime().UnixNano(), inode: inode(fi)}
}

// digestTag returns the opaque part of an ETag for content with the given
// SHA-256 sum: 16 bytes of it, base64url, which is ample to tell versions apart.
func digestTag(sum []byte) string {
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// cacheEntry is one cached file: its bytes, compressed forms and response
// headers, all computed once when the entry is built and never changed
// after, so any number of goroutines read it without locks. Only checked,
// ref and slot change.
type cacheEntry struct {
	key, name string // cache key and root-relative file name
	version   fileVersion
	sidecars  [numCodings]fileVersion // of the usable sidecars when built; zero: none
	modTime   time.Time
	body      []byte
	forms     []*encodedForm // compressed forms, by coding
	codings   codingSet      // the codings of forms

	// The header values are built once as one-element slices so the hot
	// path can assign them into the header map without formatting anything.
	compressible, vary   bool
	contentType, etag    []string
	lastModified, length []string
	cacheControl         []string // nil: none

	cost    int64        // bytes charged to the cache budget
	checked atomic.Int64 // UnixNano of the last load or stat that matched
	ref     atomic.Bool  // hit since the clock hand last passed
	slot    int          // index in staticCache.ring, -1 when not cached; guarded by staticCache.mu
}

// loadEntry reads an open small file into a new cache entry. The version
// comes from the stat taken before the read, so a write racing with the read
// shows up as a changed version at the next revalidation instead of hiding
// behind it.
func (h *staticHandler) loadEntry(key, name string, f *os.File, fi fs.FileInfo) (*cacheEntry, error) {
	// The entry counts as checked when the read begins, not when it ends:
	// a slow read must not stretch the window in which it is trusted.
	checked := h.now().UnixNano()
	body := make([]byte, fi.Size())
	n, err := io.ReadFull(f, body)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	e := &cacheEntry{key: key, name: name, version: versionOf(fi), modTime: fi.ModTime(), body: body[:n], slot: -1}
	e.sidecars = h.statSidecars(name, e.version.modTime)
	e.checked.Store(checked)
	e.setHeaders(name)
	e.cacheControl = h.cacheControl(name, e.contentType[0])
	h.loadForms(e)
	// Every form varies with Accept-Encoding once the file has another.
	e.vary = e.compressible || e.sidecars != [numCodings]fileVersion{}
	e.cost = int64(len(e.body)) + entryOverheadBytes
	for _, f := range e.forms {
		e.cost += int64(len(f.body))
	}
	return e, nil
}

// setHeaders computes the entry's identity header values from its body.
func (e *cacheEntry) setHeaders(name string) {
	sum := sha256.Sum256(e.body)
	tag := digestTag(sum[:])
	ctype := contentType(name, bytes.NewReader(e.body))
	e.contentType = []string{ctype}
	e.etag = []string{`"` + tag + `"`}
	e.lastModified = []string{e.modTime.UTC().Format(http.TimeFormat)}
	e.length = []string{strconv.Itoa(len(e.body))}
	e.compressible = compressibleType(ctype)
}

// gzipWriters recycles gzip writers across cache fills: each one holds
// about a megabyte of compressor state, too much to allocate per file.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestCompression) // the level is valid
	return zw
}}

// gzipBytes returns body compressed with gzip at the best compression level,
// since it is done once per entry.
func gzipBytes(body []byte) []byte {
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(&buf)
	zw.Write(body) // writes to a bytes.Buffer cannot fail
	zw.Close()
	return buf.Bytes()
}

// staticCache holds the entries of one staticHandler within a byte budget.
// A hit takes only the read lock and sets the entry's atomic reference bit,
// so concurrent hits never queue on a write lock the way moving an element in
// an LRU list would. Eviction runs the CLOCK algorithm over those bits: the
// hand sweeps the ring, giving entries hit since its last pass a second
// chance and evicting the first one that was not, an approximation of LRU.
type staticCache struct {
	mu      sync.RWMutex
	entries map[string]*cacheEntry
	ring    []*cacheEntry // the clock; each entry's slot is its index here
	hand    int
	used    int64 // sum of the cost of the entries
	budget  int64
}

// get returns the entry for key, or nil, and marks it recently used.
func (c *staticCache) get(key string) *cacheEntry {
	c.mu.RLock()
	e := c.entries[key]
	c.mu.RUnlock()
	// Load first so a hot entry's cache line is not written on every hit.
	if e != nil && !e.ref.Load() {
		e.ref.Store(true)
	}
	return e
}

// add inserts e, evicting others until the budget holds. An entry larger
// than the whole budget is not added. If the key already has an entry, e
// replaces it only when e holds another version and current reports that
// this version is still the file's: a slow request that read the file
// before an edit must not put the old bytes back over the new ones a later
// request cached. current runs under the write lock, so no other add can
// slip in between its check and the replacement; it is a stat, and it runs
// only when versions differ, which is rare.
func (c *staticCache) add(e *cacheEntry, current func(*cacheEntry) bool) {
	if e.cost > c.budget {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.entries[e.key]; old != nil {
		if (old.version == e.version && old.sidecars == e.sidecars) || !current(e) {
			return
		}
		c.removeLocked(old)
	}
	c.evictLocked(e.cost)
	e.slot = len(c.ring)
	c.ring = append(c.ring, e)
	c.entries[e.key] = e
	c.used += e.cost
}

// remove drops e if it is still cached; an entry already evicted or replaced
// is left alone.
func (c *staticCache) remove(e *cacheEntry) {
	c.mu.Lock()
	c.removeLocked(e)
	c.mu.Unlock()
}

// evictLocked advances the clock hand, evicting entries, until cost more
// bytes fit in the budget. Every entry passed over loses its reference bit,
// so at most two sweeps evict one entry.
func (c *staticCache) evictLocked(cost int64) {
	for c.used+cost > c.budget && len(c.ring) > 0 {
		if c.hand >= len(c.ring) {
			c.hand = 0
		}
		e := c.ring[c.hand]
		if e.ref.Swap(false) {
			c.hand++
			continue
		}
		c.removeLocked(e)
	}
}

// removeLocked takes e out of the map and the ring. The last entry of the
// ring moves into e's slot, which shuffles the clock order slightly but keeps
// removal O(1).
func (c *staticCache) removeLocked(e *cacheEntry) {
	if e.slot < 0 {
		return
	}
	last := len(c.ring) - 1
	moved := c.ring[last]
	c.ring[e.slot] = moved
	moved.slot = e.slot
	c.ring[last] = nil
	c.ring = c.ring[:last]
	e.slot = -1
	delete(c.entries, e.key)
	c.used -= e.cost
}

// digestMemo remembers the ETag of each file too large to cache, for the
// file's current version, so a big file is hashed once per version and
// worker rather than once per request. The cost: the first request for a
// version reads the whole file before answering (SHA-256 runs at roughly
// 1-2 GB/s on one core, so about a second for a 1 GiB file), and two
// requests racing on a new version may both hash it; later requests pay one
// map lookup. The memo is bounded by digestMemoEntries names and drops an
// arbitrary one when full, which costs only a re-hash later.
type digestMemo struct {
	mu   sync.Mutex
	tags map[string]memoTag // by root-relative file name
}

// memoTag is the ETag of one version of a file.
type memoTag struct {
	version fileVersion
	etag    string
}

// etag returns the quoted ETag of the open file f, named name and described
// by fi, hashing the file only if this version is not remembered.
func (m *digestMemo) etag(name string, f *os.File, fi fs.FileInfo) (string, error) {
	v := versionOf(fi)
	m.mu.Lock()
	t, ok := m.tags[name]
	m.mu.Unlock()
	if ok && t.version == v {
		return t.etag, nil
	}
	sum := sha256.New()
	// A SectionReader reads with ReadAt, leaving f's offset at the start
	// for http.ServeContent.
	if _, err := io.Copy(sum, io.NewSectionReader(f, 0, fi.Size())); err != nil {
		return "", fmt.Errorf("hash %s: %w", name, err)
	}
	t = memoTag{version: v, etag: `"` + digestTag(sum.Sum(nil)) + `"`}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tags[name]; !ok && len(m.tags) >= digestMemoEntries {
		for k := range m.tags {
			delete(m.tags, k)
			break
		}
	}
	m.tags[name] = t
	return t.etag, nil
}
