package main

// evict.go is how -max-conns makes room for a new client: like nginx,
// which closes keep-alive connections when it runs out of them, a worker
// whose every slot is taken closes the connection idle longest, so a
// few clients that keep connections open and idle cannot lock everyone
// else out for -idle-timeout. It holds limitListener's and limitConn's
// methods for it; the status listener's cap (statusConns in status.go)
// is the same idea for a listener that must never make a client wait.

import (
	"net"
	"sync"
	"sync/atomic"
)

// What limitConn.idle holds when it is no idle sequence number.
const (
	// notIdle: a new connection before its first request, one that reads
	// a request or answers it (an HTTP/2 one: with a stream open), or a
	// hijacked one. Never closed to make room.
	notIdle = 0
	// connEvicted: closed to make room; no request that began after
	// that may run (counting).
	connEvicted = -1
)

// idleConns is what a capped limitListener knows of its open connections
// to make room among them. A connection joins and leaves the set under
// the lock, once each; a request never takes the lock. Idle connections
// are ordered by a sequence number, not a clock: the one with the lowest
// went idle first.
//
// A connection is idle between two HTTP/1 requests, or while an HTTP/2
// one has no stream open, as net/http's ConnState says (trackConns marks
// it). A connection that has sent nothing since its TLS handshake or
// since it was accepted is not idle: -header-timeout bounds those.
//
// Closing an idle keep-alive connection races a request its client may
// be sending at that moment, as the idle timeout does; the client sees
// the connection close before any byte of an answer, which clients retry
// for idempotent requests. So that a request is never run on a
// connection closed under it, the close and the request's start are
// decided by one compare-and-swap: markBusy (the request has been read)
// and evict (the connection is closed) each change idle from the same
// sequence number, and only one succeeds; a request that began after an
// eviction is dropped unanswered, before its handler runs (counting).
//
// Rejected: closing a connection whose request runs, the oldest say, as
// the status listener does as its last resort: a worker's requests may
// be long downloads or uploads, and cutting one loses work; a new client
// waits in the kernel's queue instead, as before. Rejected: a clock read
// per request to find the longest idle; the sequence number costs one
// atomic add, and the order is the same.
type idleConns struct {
	mu    sync.Mutex
	conns map[*limitConn]struct{} // open connections; nil without a cap
	seq   atomic.Int64            // the last idle sequence number handed out
	// waiting is set while an Accept waits for a slot or for a connection
	// to go idle; a connection that goes idle then puts a token in wake.
	waiting atomic.Bool
	wake    chan struct{}
}

func (s *idleConns) add(c *limitConn) {
	if s.conns == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns[c] = struct{}{}
}

func (s *idleConns) remove(c *limitConn) {
	if s.conns == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// markIdle records that c went idle: after an HTTP/1 response, or when
// an HTTP/2 connection's last stream closed. Without a cap it does
// nothing.
func (c *limitConn) markIdle() {
	s := &c.ln.idle
	if s.conns == nil {
		return
	}
	c.idle.CompareAndSwap(notIdle, s.seq.Add(1))
	if s.waiting.Load() {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// markBusy records that c has a request to answer. If c was evicted
// first, it stays so, and counting drops the request.
func (c *limitConn) markBusy() {
	if v := c.idle.Load(); v > notIdle {
		c.idle.CompareAndSwap(v, notIdle)
	}
}

// evicted reports whether c was closed to make room. A nil c never was.
func (c *limitConn) evicted() bool {
	return c != nil && c.idle.Load() == connEvicted
}

// awaitSlot takes a slot, waiting while every one is taken and no
// connection is idle. It returns evict true, holding no slot, when every
// slot is taken and a connection is idle: Accept then accepts and makes
// room. Without a cap it returns at once.
func (l *limitListener) awaitSlot() (evict bool, err error) {
	if l.slots == nil {
		return false, nil
	}
	select {
	case l.slots <- struct{}{}:
		return false, nil
	default:
	}
	l.idle.waiting.Store(true)
	defer l.idle.waiting.Store(false)
	for l.idle.longest() == nil {
		if took, err := l.slotOrWake(); took || err != nil {
			return false, err
		}
	}
	return true, nil
}

// makeRoom takes a slot for a connection accepted while every slot was
// taken: it closes the connection idle longest, whose Close gives its
// slot back, and takes that slot. If every connection has become busy
// meanwhile, it waits as awaitSlot does, with the new client accepted.
func (l *limitListener) makeRoom() error {
	l.idle.waiting.Store(true)
	defer l.idle.waiting.Store(false)
	for {
		select {
		case l.slots <- struct{}{}:
			return nil
		default:
		}
		if v := l.idle.longest(); v != nil {
			v.evict()
			continue
		}
		if took, err := l.slotOrWake(); took || err != nil {
			return err
		}
	}
}

// slotOrWake blocks until it takes a slot (took), a connection goes idle,
// or the listener is closed (net.ErrClosed).
func (l *limitListener) slotOrWake() (took bool, err error) {
	select {
	case l.slots <- struct{}{}:
		return true, nil
	case <-l.idle.wake:
		return false, nil
	case <-l.closed:
		return false, net.ErrClosed
	}
}

// longest returns the connection idle longest, or nil if none is idle.
func (s *idleConns) longest() *limitConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	var victim *limitConn
	var vseq int64
	for c := range s.conns {
		if seq := c.idle.Load(); seq > notIdle && (victim == nil || seq < vseq) {
			victim, vseq = c, seq
		}
	}
	return victim
}

// evict closes c if it is still idle, and reports whether it did. Its
// Close gives its slot back before it returns.
func (c *limitConn) evict() bool {
	v := c.idle.Load()
	if v <= notIdle || !c.idle.CompareAndSwap(v, connEvicted) {
		return false
	}
	c.Close()
	return true
}
