package main

import (
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener wraps a worker's listener: it caps open connections, paces
// accepts when several workers share the socket, and counts what it
// accepts.
//
// The cap holds Accept while every slot is taken, so excess clients wait
// in the kernel's accept queue (or go to another worker) instead of being
// accepted and starved.
//
// Pacing is for balance. Every worker's netpoller waits on the one shared
// socket, and a new connection wakes them all (Go cannot ask epoll for
// EPOLLEXCLUSIVE); whichever runs first accepts until the queue is empty,
// so a burst of keep-alive connections lands on one or two workers and
// stays there. Before each accept a worker with open connections sleeps
// for pace times that number, which lets a less loaded worker take the
// next one. A worker with none never waits, so an idle generation answers
// at once, and the direct mode (pace 0) is untouched.
//
// Rejected: one SO_REUSEPORT socket per worker, bound by the parent. The
// kernel would spread connections by hash, but a worker that exits takes
// the connections queued on its socket down with it (reset, not handed to
// another worker), so every drain and every lost worker would reset
// clients; it also lets any process of the same user bind into the group.
// Rejected: blocking accept in each worker, which the kernel wakes one at a
// time, because the shared socket must stay non-blocking for the others.
type limitListener struct {
	net.Listener
	slots chan struct{} // nil: unlimited
	pace  time.Duration // 0: no pacing
	// writeTimeout closes a connection whose writes make no progress for
	// this long; 0: never.
	writeTimeout time.Duration
	open         atomic.Int64
	accepted     *atomic.Int64
	closed       chan struct{}
	closeOnce    sync.Once
}

// acceptPace is the pause per open connection that a worker takes before
// it accepts another, when several workers share the socket; measured in
// bench/run.sh's balance section.
const acceptPace = 20 * time.Microsecond

// maxAcceptPause bounds one pause, so a busy worker still accepts when the
// others are full or gone.
const maxAcceptPause = 2 * time.Millisecond

func newLimitListener(ln net.Listener, maxConns int, pace, writeTimeout time.Duration, accepted *atomic.Int64) *limitListener {
	l := &limitListener{Listener: ln, pace: pace, writeTimeout: writeTimeout, accepted: accepted, closed: make(chan struct{})}
	if maxConns > 0 {
		l.slots = make(chan struct{}, maxConns)
	}
	return l
}

// Accept blocks until a slot is free, the pause is over and a connection
// arrives, or the listener is closed.
func (l *limitListener) Accept() (net.Conn, error) {
	if l.slots != nil {
		select {
		case l.slots <- struct{}{}:
		case <-l.closed:
			return nil, net.ErrClosed
		}
	}
	if err := l.pause(); err != nil {
		l.release()
		return nil, err
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.release()
		return nil, err
	}
	l.accepted.Add(1)
	l.open.Add(1)
	return &limitConn{Conn: c, release: l.connClosed, writeTimeout: l.writeTimeout}, nil
}

// pause sleeps pace per open connection, at most maxAcceptPause.
func (l *limitListener) pause() error {
	n := l.open.Load()
	if l.pace == 0 || n == 0 {
		return nil
	}
	t := time.NewTimer(min(time.Duration(n)*l.pace, maxAcceptPause))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-l.closed:
		return net.ErrClosed
	}
}

// release gives back a slot.
func (l *limitListener) release() {
	if l.slots != nil {
		<-l.slots
	}
}

// connClosed accounts for a closed connection.
func (l *limitListener) connClosed() {
	l.open.Add(-1)
	l.release()
}

// Close unblocks an Accept waiting for a slot or a pause, then closes the
// listener.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitConn gives its slot back once, however often it is closed, and
// keeps a client that stops reading from holding it for ever: every write
// must make progress within writeTimeout, as nginx's send_timeout. The
// deadline is pushed forward only when half of it is used up, so a busy
// connection pays for a clock read per write, not a timer per write.
type limitConn struct {
	net.Conn
	once         sync.Once
	release      func()
	writeTimeout time.Duration
	deadline     atomic.Int64 // UnixNano of the write deadline set last
}

// sendChunk is how much of a file one sendfile call may send before the
// write deadline is pushed forward again.
const sendChunk = 4 << 20

func (c *limitConn) Write(b []byte) (int, error) {
	c.armWrite()
	return c.Conn.Write(b)
}

// ReadFrom keeps net/http's sendfile path for large files, which an
// embedded net.Conn would hide, and sends in chunks so a slow but steady
// reader is not cut off by a deadline set for the whole file.
func (c *limitConn) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := c.Conn.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{c}, r)
	}
	src, remain := r, int64(math.MaxInt64)
	outer, limited := r.(*io.LimitedReader)
	if limited {
		src, remain = outer.R, outer.N // one level, so sendfile still sees the file
	}
	var total int64
	for remain > 0 {
		c.armWrite()
		want := min(remain, sendChunk)
		n, err := rf.ReadFrom(&io.LimitedReader{R: src, N: want})
		total, remain = total+n, remain-n
		if limited {
			outer.N -= n
		}
		if err != nil || n < want {
			return total, err
		}
	}
	return total, nil
}

// armWrite moves the write deadline writeTimeout ahead once less than half
// of it is left.
func (c *limitConn) armWrite() {
	if c.writeTimeout <= 0 {
		return
	}
	now := time.Now()
	if time.Unix(0, c.deadline.Load()).Sub(now) > c.writeTimeout/2 {
		return
	}
	d := now.Add(c.writeTimeout)
	c.deadline.Store(d.UnixNano())
	c.Conn.SetWriteDeadline(d)
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
