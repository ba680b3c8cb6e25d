package main

import (
	"net/http"
	"sync/atomic"
	"time"
)

// stampDate sets the Date of a response whose header is about to go out,
// unless its handler set one, from a value formatted once a second.
// net/http and its HTTP/2 server each format a Date for every response
// whose header has none (HTTP/2 into a new string each time); with this
// one in place, they format none. It is called as the header is
// committed, as theirs is, so the Date is the response's own second, not
// the second its request began: a slow handler's Date is not stale, nor
// earlier than a Last-Modified read while it ran. A handler that sets
// Date, or adds one (a reverse proxy copying its upstream's header),
// keeps its own.
func stampDate(h http.Header) {
	if _, ok := h["Date"]; !ok {
		h["Date"] = httpDate.at(time.Now())
	}
}

// httpDate is the process's Date value, shared by its servers.
var httpDate dateHeader

// dateHeader holds the Date value of the second it was last asked for.
//
// The slice is shared by every response of that second and only read:
// net/http writes it out, HTTP/2 copies it; a handler's Set or Add makes
// a slice of its own.
type dateHeader struct {
	now atomic.Pointer[dateValue]
}

// dateValue is one second's Date.
type dateValue struct {
	sec   int64
	value []string
}

// at returns the Date value for t, formatting it only on the first call
// in t's second.
func (d *dateHeader) at(t time.Time) []string {
	sec := t.Unix()
	if v := d.now.Load(); v != nil && v.sec == sec {
		return v.value
	}
	v := &dateValue{sec: sec, value: []string{t.UTC().Format(http.TimeFormat)}}
	d.now.Store(v)
	return v.value
}
