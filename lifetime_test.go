package main

// lifetime_test.go: a service that replaces workers for months keeps
// nothing of the ones it replaced but their counts: the parent's
// descriptors, goroutines, threads and memory stay flat.

import (
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recycledCount counts the recycles the logs report so far.
func recycledCount(logs string) int { return strings.Count(logs, `msg="worker recycled"`) }

// waitRecycled waits until the logs report at least n recycles, at most
// within, and fails the test otherwise.
func (h *harness) waitRecycled(n int, within time.Duration) {
	h.t.Helper()
	for deadline := time.Now().Add(within); recycledCount(h.readLogs()) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d recycles within %v; want %d", recycledCount(h.readLogs()), within, n)
		}
	}
}

func TestReplacedWorkersLeaveNothingInTheParent(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc")
	}
	h := newHealHarness(t, 2, nil, testHeal, func(c *supervisorConfig) { c.MaxAge = 100 * time.Millisecond })
	h.start()
	gen := h.gens[0]
	// held reads what the parent holds: its descriptors and goroutines,
	// the workers the generation lists, and how many of those run (not
	// yet reaped). A worker reaped a moment ago may still be listed while
	// the next recycle's starts.
	held := func() (fds, goroutines, listed, running int) {
		gen.mu.Lock()
		defer gen.mu.Unlock()
		for _, p := range gen.all {
			select {
			case <-p.exited:
			default:
				running++
			}
		}
		return openFDs(t), runtime.NumGoroutine(), len(gen.all), running
	}
	// Floors over a few recycles each, not one reading: a recycle under
	// way holds a third worker, its pipes and its goroutines, for as long
	// as a busy box makes it take. A leak raises the floor by one of each
	// per recycle. The most workers running at once is the N+1 rule's.
	floor := func(recycles int) (fds, gs, listed, running int) {
		fds, gs, listed = math.MaxInt, math.MaxInt, math.MaxInt
		deadline := time.Now().Add(time.Minute)
		for n := recycledCount(h.readLogs()); recycledCount(h.readLogs()) < n+recycles; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d recycles in a minute", recycles)
			}
			f, g, l, r := held()
			fds, gs, listed, running = min(fds, f), min(gs, g), min(listed, l), max(running, r)
		}
		return fds, gs, listed, running
	}
	h.waitRecycled(4, 30*time.Second) // the runtime's own descriptors and goroutines, opened once
	fds0, gs0, _, _ := floor(4)
	const recycles = 20
	h.waitRecycled(8+recycles, 2*time.Minute)
	fds, gs, listed, running := floor(4)
	// The slack is one recycle under way (its worker's pipes and pidfd,
	// the listener's copy as it spawns: up to 6), which a busy box may
	// keep going throughout a window; a leak of one a recycle is 20.
	if fds > fds0+6 || gs > gs0+4 || listed > 3 || running > 3 {
		t.Errorf("after %d more recycles the parent holds %d descriptors (%d before), %d goroutines (%d before) and lists %d workers; up to %d ran at once; want them flat, and at most 3 workers",
			recycles, fds, fds0, gs, gs0, listed, running)
	}
}

func TestFailedReplacementsLeaveNothingInTheParent(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc")
	}
	// Slot 1's replacements exit during their barrier without a word: the
	// barrier takes their exit, and nothing else watches them.
	h := newHealHarness(t, 2, map[int]string{1: faultExitLater}, testHeal, func(c *supervisorConfig) { c.MaxAge = 50 * time.Millisecond })
	h.start()
	gen := h.gens[0]
	failed := func() int { return strings.Count(h.readLogs(), `msg="worker recycle failed" generation=1 worker=1`) }
	waitFailed := func(n int) {
		for deadline := time.Now().Add(30 * time.Second); failed() < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d failed recycles within 30s; want %d", failed(), n)
			}
		}
	}
	// Floors over a few failures each, not one reading: slot 0 recycles
	// every 50 ms meanwhile, and a recycle under way holds a third
	// worker's pipes and pidfd for as long as a busy box makes it take. A
	// leak raises the floors by at least one per failed recycle.
	floor := func(failures int) (fds, workers int) {
		fds, workers = math.MaxInt, math.MaxInt
		deadline := time.Now().Add(time.Minute)
		for n := failed(); failed() < n+failures; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d failed recycles in a minute", failures)
			}
			gen.mu.Lock()
			w := len(gen.all)
			gen.mu.Unlock()
			fds, workers = min(fds, openFDs(t)), min(workers, w)
		}
		return fds, workers
	}
	waitFailed(2)
	fds0, _ := floor(2)
	waitFailed(10) // the backoff caps at 200 ms here
	fds, workers := floor(2)
	if workers > 3 || fds > fds0+4 {
		t.Errorf("after %d failed recycles the generation holds at least %d workers and the parent %d descriptors (%d after 4); want at most 3 and flat", failed(), workers, fds, fds0)
	}
}
