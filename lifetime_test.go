package main

// lifetime_test.go: a service that replaces workers for months keeps
// nothing of the ones it replaced but their counts: the parent's
// descriptors, goroutines, threads and memory stay flat.

import (
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
	held := func() (fds, goroutines, workers int) {
		gen.mu.Lock()
		defer gen.mu.Unlock()
		return openFDs(t), runtime.NumGoroutine(), len(gen.all)
	}
	h.waitRecycled(4, 30*time.Second) // the runtime's own descriptors and goroutines, opened once
	fds0, gs0, _ := held()
	const recycles = 20
	h.waitRecycled(4+recycles, 60*time.Second)
	fds, gs, workers := held()
	// A recycle under way holds a third worker, its two pipes and its
	// goroutines: the slack. A leak grows by one of each per recycle.
	if fds > fds0+4 || gs > gs0+8 || workers > 3 {
		t.Errorf("after %d more recycles the parent holds %d descriptors (%d before), %d goroutines (%d before) and %d workers; want them flat, and at most 3 workers",
			recycles, fds, fds0, gs, gs0, workers)
	}
}
