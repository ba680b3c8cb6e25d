package main

import (
	"strconv"
	"syscall"
	"unsafe"
)

// monotonicUsec is the MONOTONIC_USEC= field systemd wants with
// RELOADING=1: CLOCK_MONOTONIC in microseconds, which Go's time package
// keeps to itself.
func monotonicUsec() string {
	var ts syscall.Timespec
	const clockMonotonic = 1
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	// int64 first: on 32-bit platforms the fields are 32 bits wide.
	return "MONOTONIC_USEC=" + strconv.FormatInt(int64(ts.Sec)*1e6+int64(ts.Nsec)/1e3, 10)
}
