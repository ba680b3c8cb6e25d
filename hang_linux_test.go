package main

// hang_linux_test.go: a worker late to answer because its own handler
// holds its CPU is not hung. Linux alone reads another process's CPU
// time (cpu_linux.go); elsewhere silence alone decides.

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// hog computes for d without a preemption point, as a long loop of
// arithmetic does: its clock is read by a raw system call, which has
// none. A worker with one P and asynchronous preemption off
// (GODEBUG=asyncpreemptoff=1) runs nothing else meanwhile, so it
// answers the probe only once hog returns, however fast the machine.
func hog(d time.Duration) {
	var ts syscall.Timespec
	const monotonic = 1 // CLOCK_MONOTONIC
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, monotonic, uintptr(unsafe.Pointer(&ts)), 0)
	end := int64(ts.Sec)*1e9 + int64(ts.Nsec) + int64(d) // int32 fields on 32-bit Linux
	for int64(ts.Sec)*1e9+int64(ts.Nsec) < end {
		syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, monotonic, uintptr(unsafe.Pointer(&ts)), 0)
	}
}

func TestWorkerBusyWithItsOwnRequestsIsNeverFoundHung(t *testing.T) {
	// One request computes for 2 s in a worker whose runtime can run
	// nothing else: the probe's question, asked every quarter of the 1 s
	// timeout, waits 1-2.3 s for its answer, late but within
	// busySilence timeouts, while the worker's CPU is taken. Late is not
	// hung: the warning says so, and the request is answered.
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-status-addr", "127.0.0.1:0", "-marks", t.TempDir(),
		"-workers", "2", "-worker-timeout", "1s", "-slow", "2s")
	cmd.Env = append(os.Environ(), mainEnv+"=1", appEnv+"=probe", "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1")
	s := launchServery(t, cmd)
	code, body, err := get(s.addr, "/hog")
	if err != nil || code != 200 {
		t.Fatalf("GET /hog: %d %q, %v:\n%s", code, body, err, s.logs())
	}
	waitLog(t, s, `msg="worker late to answer, but running" generation=1 worker=\d pid=\d+ silent_for=\S+ timeout=1s`)
	if code, body, err := get(s.addr, "/"); err != nil || code != 200 || strings.Contains(s.logs(), "worker hung") {
		t.Errorf("after the busy request: GET / %d %q, %v; a worker busy with its own request was found hung:\n%s",
			code, body, err, s.logs())
	}
}
