package main

import (
	"errors"
	"os"
	"sync"
	"time"
)

// lazyRead keeps a connection's read deadlines off the runtime's timer
// heap on the hot path. net/http sets a keep-alive connection's read
// deadline three times per request (the header timeout as a request
// begins, none once its header is read, the idle timeout once it is
// answered), and each set moves a timer in the runtime: a CPU profile
// against bare net/http, which sets none, showed them among the
// difference.
//
// lazyRead puts a deadline on the socket only when it is earlier than the
// one there; a later or cleared one waits. When the deadline on the
// socket fires before the one wanted, Read puts the wanted one on and
// reads again. The deadline in force is therefore never later than the
// one net/http asked for, so a client that sends its header slowly, or
// idles, is cut when net/http means it to be; what the laziness costs is
// one wake-up each time an early deadline fires, at most one per header
// timeout of a busy connection's life.
//
// A re-armed deadline goes at most span (the header timeout) ahead. On a
// keep-alive connection the early fire comes from net/http ending its
// background read with a deadline in the past; the re-arm is then for the
// idle timeout, and the header timeout set moments later would be earlier
// and reach the socket. Stepped by span, the re-armed one is no later
// than the header timeout's, which can then wait too: a request moves
// the socket's read deadline twice (the past one, and the re-arm), as
// bare net/http, which sets no timeouts, moves it twice to end its
// background read (the past one, and a clear). An idle connection pays
// one wake-up per span.
type lazyRead struct {
	mu    sync.Mutex
	want  int64 // UnixNano of the read deadline asked for; 0: none
	armed int64 // UnixNano of the one on the socket; 0: none
	span  int64 // the longest step of a re-armed deadline, in ns; 0: none
}

// SetReadDeadline asks for t as the read deadline. It puts t on the
// socket at once only when t is earlier than the deadline there, or there
// is none; a deadline in the past (net/http's way to end a blocked
// read) is therefore always put on at once.
func (c *limitConn) SetReadDeadline(t time.Time) error {
	r := &c.rd
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want = unixNano(t)
	if r.want == 0 || (r.armed != 0 && r.armed <= r.want) {
		return nil
	}
	r.armed = r.want
	return c.Conn.SetReadDeadline(t)
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
// puts the deadline wanted now on the socket (or none; at most span
// ahead), and the read is to be tried again. A wanted deadline that has
// passed, or the one on the socket, is a real timeout.
func (c *limitConn) rearmRead() bool {
	r := &c.rd
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now().UnixNano()
	if r.armed == r.want || (r.want != 0 && r.want <= now) {
		return false // what fired is what was wanted
	}
	r.armed = r.want
	if r.want != 0 && r.span > 0 {
		r.armed = min(r.want, now+r.span)
	}
	var t time.Time
	if r.armed != 0 {
		t = time.Unix(0, r.armed)
	}
	return c.Conn.SetReadDeadline(t) == nil
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
