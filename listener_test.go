package main

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// newTestLimitListener wraps a loopback listener.
func newTestLimitListener(t *testing.T, maxConns int, pace time.Duration) *limitListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(ln, maxConns, pace, new(atomic.Int64))
	t.Cleanup(func() { l.Close() })
	return l
}

// acceptAsync accepts once in the background.
func acceptAsync(l *limitListener) <-chan error {
	done := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	return done
}

func dialOrFail(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestAcceptPaceNeverDelaysAnIdleWorker(t *testing.T) {
	l := newTestLimitListener(t, 0, time.Hour)
	dialOrFail(t, l)
	select {
	case err := <-acceptAsync(l):
		if err != nil {
			t.Fatalf("Accept() = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept with no open connection paused; want it immediate")
	}
}

func TestAcceptPacePausesABusyWorker(t *testing.T) {
	l := newTestLimitListener(t, 0, time.Hour)
	dialOrFail(t, l)
	dialOrFail(t, l)
	held, err := l.Accept() // one open connection: the next accept pauses
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	began := time.Now()
	c, err := l.Accept() // the second connection is already queued
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if waited := time.Since(began); waited < maxAcceptPause {
		t.Errorf("a busy worker accepted after %v; want a pause of at least %v", waited, maxAcceptPause)
	}
}

func TestAcceptPauseIsBoundedAndEndsOnClose(t *testing.T) {
	l := newTestLimitListener(t, 0, time.Hour)
	for range 3 {
		dialOrFail(t, l)
	}
	held, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// One open connection and an hour's pace: the pause is still capped.
	if err := <-acceptAsync(l); err != nil {
		t.Fatalf("Accept() = %v; want a connection after at most %v", err, maxAcceptPause)
	}
	l.Close()
	if err := <-acceptAsync(l); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept() after Close = %v; want net.ErrClosed", err)
	}
}

func TestMaxConnsSlotFreedWhenConnectionCloses(t *testing.T) {
	l := newTestLimitListener(t, 1, 0)
	dialOrFail(t, l)
	dialOrFail(t, l)
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	done := acceptAsync(l)
	select {
	case err := <-done:
		t.Fatalf("second Accept() = %v with the only slot taken; want it to wait", err)
	case <-time.After(50 * time.Millisecond):
	}
	first.Close()
	first.Close() // a second close must not free a second slot
	if err := <-done; err != nil {
		t.Fatalf("Accept() after a slot freed = %v", err)
	}
	if n := l.open.Load(); n != 0 {
		t.Errorf("open connections = %d after both closed; want 0", n)
	}
}
