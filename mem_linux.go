package main

import (
	"bytes"
	"os"
	"strconv"
)

// residentBytes is this process's resident set: what the OOM killer
// weighs, the Go heap and everything else (cgo, the binary's pages, what
// the kernel has not yet taken back). The Go runtime's own figure would
// miss what the program allocates outside it. 0 if it cannot be read.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(string(f[1]), 10, 64)
	return pages * int64(os.Getpagesize())
}
