package main

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// clockTick is the unit of /proc/PID/stat's CPU times: USER_HZ, which
// Linux fixes at 100 for user space on every architecture Go supports.
const clockTick = 10 * time.Millisecond

// processCPU returns the CPU time process pid has used, user and system,
// from /proc/PID/stat, and whether it could be read. The parent's probe
// reads it for a worker that is late to answer, to tell a stopped one
// from a busy one (hang.go).
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// count the fields after its last ')'. utime and stime are fields 14
	// and 15, so the 12th and 13th after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * clockTick, true
}
