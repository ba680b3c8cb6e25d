package main

import (
	"net/http"
	"sync/atomic"
	"time"
)

// dateHeader is the value of the Date header for the second a request
// began, formatted once a second rather than once a response. net/http
// and its HTTP/2 server each read the clock and format a Date for every
// response whose handler set none; counting sets this one from the clock
// read it makes anyway (for the request metrics), so a response costs
// neither. A handler that sets its own Date replaces it.
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
