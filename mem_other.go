//go:build !linux

package main

import "runtime/metrics"

// residentBytes is, without Linux's /proc, the memory the Go runtime has
// mapped: the heap, stacks and its own structures, not what the program
// allocates outside the runtime.
func residentBytes() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}
