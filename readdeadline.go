package main

import (
	"errors"
	"os"
	"sync"
	"time"
)

// lazyRead keeps a connection's read deadlines off the runtime's timer
// heap on the hot path. net/http sets a keep-alive connection's read
// deadline five times per request with servery's timeouts (the header
// timeout as a request begins, none once its header is read, a deadline
// in the past and none again to end its background read, the idle
// timeout once it is answered), and each deadline that reaches the
// socket moves a timer in the runtime: a CPU profile against bare
// net/http, which sets no timeouts, showed them among the difference.
//
// lazyRead puts a deadline on the socket only when it is earlier than the
// one there; a later or cleared one waits. When the deadline on the
// socket fires before the one wanted, Read puts the wanted one on and
// reads again. The deadline in force is therefore never later than the
// one net/http asked for, so a client that sends its header slowly, or
// idles, is cut when net/http means it to be.
//
// A deadline put on later goes at most span (the header timeout) ahead.
// The one that follows the past deadline ending a background read is
// put on at once, as the past one is known to have passed (it is earlier
// than a clock reading taken before), and spanned: it is then no later
// than the header timeout net/http sets moments later, which can wait
// too. So a keep-alive request puts two read deadlines on the socket (the
// past one, and the step after it), where bare net/http puts two (the
// past one, and a clear); an idle connection pays one wake-up per span.
type lazyRead struct {
	mu    sync.Mutex
	want  int64 // UnixNano of the read deadline asked for; 0: none
	armed int64 // UnixNano of the one on the socket; 0: none
	span  int64 // the longest step of a deadline put on later, in ns; 0: none
	seen  int64 // UnixNano of a clock reading, so earlier times have passed
}

// SetReadDeadline asks for t as the read deadline. It puts t on the
// socket at once when t is earlier than the deadline there, or there is
// none; a deadline in the past (net/http's way to end a blocked read) is
// therefore always put on at once. Once the one there is known to have
// passed, it steps to the one wanted at once.
func (c *limitConn) SetReadDeadline(t time.Time) error {
	r := &c.rd
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want = unixNano(t)
	switch {
	case r.want != 0 && (r.armed == 0 || r.want < r.armed):
		r.armed = r.want
		return c.Conn.SetReadDeadline(t)
	case r.armed != 0 && r.armed < r.seen:
		return c.step(time.Now().UnixNano(), true)
	}
	return nil
}

// Read reads, and reads again when the deadline that ended it was
// earlier than the one wanted now.
func (c *limitConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || !c.rearmRead() {
			return n, err
		}
	}
}

// rearmRead reports whether the deadline that fired was early: then it
// steps to the deadline wanted now, and the read is to be tried again. A
// wanted deadline that has passed, or the one on the socket, is a real
// timeout.
func (c *limitConn) rearmRead() bool {
	r := &c.rd
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now().UnixNano()
	if r.armed == r.want || (r.want != 0 && r.want <= now) {
		return false // what fired is what was wanted
	}
	return c.step(now, false) == nil
}

// step puts the deadline wanted on the socket, at most span after now;
// none stays none unless ahead, when it is a step after a background
// read ended and a request is to follow, which will want a deadline.
func (c *limitConn) step(now int64, ahead bool) error {
	r := &c.rd
	r.seen = now
	r.armed = r.want
	if r.span > 0 && r.want == 0 && ahead {
		r.armed = now + r.span
	} else if r.span > 0 && r.want != 0 {
		r.armed = min(r.want, now+r.span)
	}
	var t time.Time
	if r.armed != 0 {
		t = time.Unix(0, r.armed)
	}
	return c.Conn.SetReadDeadline(t)
}

// setBoth records t as both the wanted and the armed read deadline, for
// SetDeadline, which puts it on the socket itself.
func (r *lazyRead) setBoth(t time.Time) {
	r.mu.Lock()
	r.want = unixNano(t)
	r.armed = r.want
	r.mu.Unlock()
}

// unixNano is t in UnixNano, or 0 for the zero time (no deadline); a
// time at or before 1970 is 1, which is as past as it.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(t.UnixNano(), 1)
}
