package main

// encoding.go is content coding for the static site: which codings a
// client accepts (Accept-Encoding with its q-values), the precompressed
// sidecar files (name.br, name.zst, name.gz) beside a file, and the gzip
// form made on the fly when there is no .gz sidecar.

import (
	"crypto/sha256"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// coding is a content coding servery can serve, in order of preference at
// equal q: brotli and zstd compress text better than gzip, and the
// standard library encodes neither, so they come only from sidecars.
type coding int

const (
	codingBr coding = iota
	codingZstd
	codingGzip
	numCodings
)

// codings names each coding as Accept-Encoding and Content-Encoding spell it,
// and the suffix of its sidecar file.
var codings = [numCodings]struct {
	name, suffix string
	header       []string // the Content-Encoding value, shared: never modify
}{
	codingBr:   {"br", ".br", []string{"br"}},
	codingZstd: {"zstd", ".zst", []string{"zstd"}},
	codingGzip: {"gzip", ".gz", []string{"gzip"}},
}

// encodedForm is one compressed representation of a cached file: a sidecar's
// bytes, or the gzip form made when the entry was built. Like the entry, it
// never changes once built.
type encodedForm struct {
	coding       coding
	body         []byte
	etag, length []string
}

// acceptedQ holds a client's q-values for each coding in thousandths, and
// for "*"; -1 where the header does not name it.
type acceptedQ struct {
	q    [numCodings]int
	star int
}

// parseAcceptEncoding reads the Accept-Encoding values (RFC 9110 §12.5.3).
// It slices the strings in place, so the hot path allocates nothing. A
// coding named twice keeps its first q; a malformed q counts as 0, so a
// header the server cannot read never gets a coding it may not want.
func parseAcceptEncoding(values []string) acceptedQ {
	a := acceptedQ{q: [numCodings]int{-1, -1, -1}, star: -1}
	for _, v := range values {
		for v != "" {
			var item string
			item, v, _ = strings.Cut(v, ",")
			name, params, _ := strings.Cut(item, ";")
			name = strings.TrimSpace(name)
			slot := &a.star
			switch {
			case name == "*":
			case strings.EqualFold(name, "br"):
				slot = &a.q[codingBr]
			case strings.EqualFold(name, "zstd"):
				slot = &a.q[codingZstd]
			case strings.EqualFold(name, "gzip"), strings.EqualFold(name, "x-gzip"):
				slot = &a.q[codingGzip]
			default:
				continue
			}
			if *slot < 0 {
				*slot = qValue(params)
			}
		}
	}
	return a
}

// weight returns the q of c: its own, else that of "*", else 0.
func (a acceptedQ) weight(c coding) int {
	if a.q[c] >= 0 {
		return a.q[c]
	}
	return max(a.star, 0)
}

// codingSet is a set of codings, one bit each.
type codingSet uint8

func (s codingSet) has(c coding) bool { return s&(1<<c) != 0 }

// best returns the coding in avail that the client weighs highest, the
// earlier one at equal q, or -1 when it accepts none of them.
func (a acceptedQ) best(avail codingSet) coding {
	pick, top := coding(-1), 0
	for c := range numCodings {
		if w := a.weight(c); w > top && avail.has(c) {
			pick, top = c, w
		}
	}
	return pick
}

// qValue parses the parameters of one Accept-Encoding item for its weight
// in thousandths: 1000 without a q, 0 for one that is malformed.
func qValue(params string) int {
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		p = strings.TrimSpace(p)
		if len(p) < 2 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=' {
			continue
		}
		return parseQ(p[2:])
	}
	return 1000
}

// parseQ parses a qvalue: "0" or "1", optionally followed by a dot and at
// most three digits (RFC 9110 §12.4.2).
func parseQ(s string) int {
	if s == "" || (s[0] != '0' && s[0] != '1') || len(s) > 5 || (len(s) > 1 && s[1] != '.') {
		return 0
	}
	q := int(s[0]-'0') * 1000
	scale := 100
	for i := 2; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0
		}
		q += int(s[i]-'0') * scale
		scale /= 10
	}
	return min(q, 1000)
}

// sidecarName is the file beside name that holds its form in coding c.
func sidecarName(name string, c coding) string { return name + codings[c].suffix }

// usableSidecar reports whether fi, a sidecar's stat, may stand for a file
// last modified at modTime (UnixNano): a regular file at least as new, to
// the second. An older one is stale, left from a release before the file
// was edited, and is never served. Whole seconds, because tools that copy
// the file's time to the sidecar may drop the fraction: Debian's brotli -k
// (1.0.9) turns 15:15:02.796 into 15:15:02.000. The cost is that a file
// edited within the same second after its sidecar was written still counts
// as matching it.
func usableSidecar(fi fs.FileInfo, modTime int64) bool {
	return fi.Mode().IsRegular() && fi.ModTime().Unix() >= time.Unix(0, modTime).Unix()
}

// statSidecars returns the version of each usable sidecar of name, the zero
// version where there is none. A cache entry remembers them, so adding,
// replacing or removing a sidecar is noticed as a change of the entry.
func (h *staticHandler) statSidecars(name string, modTime int64) (v [numCodings]fileVersion) {
	for c := range numCodings {
		if fi, err := h.root.Stat(sidecarName(name, c)); err == nil && usableSidecar(fi, modTime) {
			v[c] = versionOf(fi)
		}
	}
	return v
}

// loadForms builds e's compressed forms: every usable sidecar that fits the
// gzip entry cap and reads whole, and a gzip form made from the body when the
// type compresses well and there is no .gz sidecar. A sidecar that cannot
// be read is left out, so the client gets the file instead.
func (h *staticHandler) loadForms(e *cacheEntry) {
	for c := range numCodings {
		if e.sidecars[c] == (fileVersion{}) {
			continue
		}
		if body, ok := h.readSidecar(e.name, c, e.sidecars[c]); ok {
			sum := sha256.Sum256(body)
			e.forms = append(e.forms, newForm(c, body, digestTag(sum[:])))
			e.codings |= 1 << c
		}
	}
	if e.codings.has(codingGzip) || !e.compressible || len(e.body) < gzipMinBytes {
		return
	}
	// Every worker runs the same compressor, so equal identity bytes mean
	// equal gzip bytes, and the identity digest can name them.
	if gz := gzipBytes(e.body); len(gz) < len(e.body) {
		sum := sha256.Sum256(e.body)
		e.forms = append(e.forms, newForm(codingGzip, gz, digestTag(sum[:])+"-gzip"))
		e.codings |= 1 << codingGzip
	}
}

func newForm(c coding, body []byte, tag string) *encodedForm {
	return &encodedForm{coding: c, body: body, etag: []string{`"` + tag + `"`}, length: []string{strconv.Itoa(len(body))}}
}

// readSidecar reads name's sidecar for c if it is still version v and no
// larger than the gzip entry cap (maxGzipEntryBytes).
func (h *staticHandler) readSidecar(name string, c coding, v fileVersion) ([]byte, bool) {
	if v.size > h.maxGzip {
		return nil, false
	}
	f, fi, ok := h.openRegular(sidecarName(name, c))
	if !ok {
		return nil, false
	}
	defer f.Close()
	if versionOf(fi) != v {
		return nil, false
	}
	body := make([]byte, v.size)
	if _, err := io.ReadFull(f, body); err != nil {
		return nil, false
	}
	return body, true
}

// pick returns the form of e that a client sending the Accept-Encoding
// values prefers, or nil for the identity form.
func (e *cacheEntry) pick(values []string) *encodedForm {
	c := parseAcceptEncoding(values).best(e.codings)
	for _, f := range e.forms {
		if f.coding == c {
			return f
		}
	}
	return nil
}

// openSidecar opens the sidecar the client prefers for a file streamed from
// disk, skipping any that is missing, stale or unreadable. It returns nil
// when the file should go out as it is. Each is opened by openRegular, so
// a FIFO named like a sidecar cannot block the open.
func (h *staticHandler) openSidecar(name string, modTime int64, a acceptedQ) (*os.File, fs.FileInfo, coding) {
	untried := codingSet(1<<numCodings - 1)
	for {
		c := a.best(untried)
		if c < 0 {
			return nil, nil, -1
		}
		untried &^= 1 << c
		f, fi, ok := h.openRegular(sidecarName(name, c))
		if !ok {
			continue
		}
		if usableSidecar(fi, modTime) {
			return f, fi, c
		}
		f.Close()
	}
}
