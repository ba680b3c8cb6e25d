package main

// memory.go is a worker's watch over its own memory (-max-worker-memory):
// past the bound it asks to be recycled, as at its other limits
// (worker.go, askToRecycle). residentBytes, per system, is in mem_*.go.

import (
	"fmt"
	"os"
	"time"
)

// memoryLimit returns, for a worker whose memory is bounded, a Go soft
// memory limit a tenth below the bound, so the collector works harder
// before a recycle is needed, unless the environment already sets one.
func memoryLimit(maxMemory int64) (string, bool) {
	if maxMemory <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return "", false
	}
	return fmt.Sprintf("GOMEMLIMIT=%dB", maxMemory-maxMemory/10), true
}

// memoryCheck is how often a worker with -max-worker-memory reads its
// resident memory: one small file read a second.
const memoryCheck = time.Second

// memoryOver sends the worker's resident memory once it exceeds limit,
// looking every memoryCheck until done closes; nil for no limit.
func memoryOver(limit int64, done <-chan struct{}) <-chan int64 {
	if limit <= 0 {
		return nil
	}
	over := make(chan int64, 1)
	go func() {
		t := time.NewTicker(memoryCheck)
		defer t.Stop()
		for {
			if rss := residentBytes(); rss > limit {
				over <- rss
				return
			}
			select {
			case <-t.C:
			case <-done:
				return
			}
		}
	}()
	return over
}
