package main

import (
	"errors"
	"os"
	"sync"
	"time"
)

// lazyRead keeps a connection's read deadlines off the runtime's timer
// heap on the hot path. With servery's header and idle timeouts, net/http
// sets a keep-alive connection's read deadline six times per request (the
// header timeout as a request begins, none once its header is read, none
// as its background read starts, a deadline in the past and none again to
// end that read, the idle timeout once it is answered), and each one that
// reaches the socket takes the runtime's lock on it, and a positive one
// reads the clock twice and moves a timer: a CPU profile against bare
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
// The one that follows the past deadline ending a background read is put
// on at once, since the past one is known to have passed (it is earlier
// than a clock reading already taken), and spanned: it is then no later
// than the header timeout net/http sets moments later, which can wait
// too. So a keep-alive request puts two read deadlines on the socket, the
// past one and the step after it, where bare net/http puts all six of its
// own (five of them none), and no read fails for want of a re-arm. An idle
// connection pays one wake-up per span.
//
// Deadlines are kept as offsets from deadlineEpoch, whose monotonic
// reading they share, so a step of the wall clock moves none of them, as
// it moves none of net/http's.
type lazyRead struct {
	mu    sync.Mutex
	want  int64 // the read deadline asked for, as an offset; 0: none
	armed int64 // the one on the socket, as an offset; 0: none
	span  int64 // the longest step of a deadline put on later, in ns; 0: none
	// seen is a clock reading as an offset, so earlier deadlines have
	// passed; 0 (the epoch, before any connection) until the first step.
	seen int64
}

// deadlineEpoch is the origin of lazyRead's offsets.
var deadlineEpoch = time.Now()

// offset is t as an offset from deadlineEpoch, or 0 for the zero time (no
// deadline). One that falls on 0 is -1, as past as it; one beyond the
// int64 range saturates (time.Time.Sub).
func offset(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	if d := int64(t.Sub(deadlineEpoch)); d != 0 {
		return d
	}
	return -1
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
	r.want = offset(t)
	switch {
	case r.want != 0 && (r.armed == 0 || r.want < r.armed):
		r.armed = r.want
		return c.Conn.SetReadDeadline(t)
	case r.armed != 0 && r.armed < r.seen:
		return c.step(int64(time.Since(deadlineEpoch)), true)
	}
	return nil
}

// Read reads, and reads again when the deadline that ended it, having
// read nothing, was earlier than the one wanted now.
func (c *limitConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if err == nil || n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) || !c.rearmRead() {
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
	if r.armed == r.want {
		return false // what fired is what was wanted: net/http's past one, mostly
	}
	now := int64(time.Since(deadlineEpoch))
	if r.want != 0 && r.want <= now {
		return false // the one wanted has passed too
	}
	return c.step(now, false) == nil
}

// step puts the deadline wanted on the socket, at most span after now.
// None stays none, unless ahead: after a background read ends, a request
// usually follows, whose header timeout is to find a deadline no later
// than its own already there (if none follows, the one put on fires once
// and steps to none).
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
		t = deadlineEpoch.Add(time.Duration(r.armed))
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets both deadlines: the read one as wanted and on the
// socket, under the read deadline's lock so a concurrent SetReadDeadline
// cannot come between, and the write one remembered (noteDeadline).
func (c *limitConn) SetDeadline(t time.Time) error {
	c.noteDeadline(t)
	r := &c.rd
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want = offset(t)
	r.armed = r.want
	return c.Conn.SetDeadline(t)
}
