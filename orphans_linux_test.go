package main

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// adoptOrphans makes the test process, until the test ends, the parent
// of every process its children leave orphaned (PR_SET_CHILD_SUBREAPER),
// so a test that kills servery's parent can learn how each worker
// exited, which only a parent can. It reports whether it could.
func adoptOrphans(t *testing.T) bool {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		t.Logf("cannot become a subreaper: %v", e)
		return false
	}
	t.Cleanup(func() { syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0) })
	return true
}

// orphanExit waits, within d, for pid, an orphan adoptOrphans adopted,
// to exit, reaps it and returns how it ended.
func orphanExit(pid int, d time.Duration) (syscall.WaitStatus, error) {
	deadline := time.Now().Add(d)
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		switch {
		case err != nil:
			return ws, err
		case got == pid:
			return ws, nil
		case time.Now().After(deadline):
			return ws, errors.New("still running")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
