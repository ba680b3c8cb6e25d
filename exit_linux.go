//go:build linux && !(mips || mipsle || mips64 || mips64le)

package main

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// Linux's numbers for waiting on a process by its pidfd: the system call
// is 434 on every architecture but MIPS's, which keeps its own table.
const (
	sysPidfdOpen = 434
	pPIDFD       = 3          // waitid's idtype: id is a pidfd
	wNoWait      = 0x01000000 // waitid: leave the child waitable
)

// awaitExit blocks until the child pid has exited, without reaping it:
// cmd.Wait then returns at once. It holds no OS thread while it waits. A
// goroutine in cmd.Wait sits in a wait system call, and the runtime gives
// each such goroutine a thread of its own: one per worker, which under a
// process limit (ulimit -u, a cgroup's pids.max) made the runtime abort
// when it could not create the next. Here the runtime's poller watches a
// pidfd instead, which turns readable when the process exits, as it
// watches a socket. It fails only where the kernel lacks pidfd_open
// (before 5.3) or waitid on a pidfd (before 5.4), and the caller then
// waits as before.
//
// The pid cannot name another process meanwhile: the parent reaps its
// workers, and until it does the kernel keeps the pid.
func awaitExit(pid int) error {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), syscall.O_NONBLOCK, 0)
	if errno != 0 {
		return fmt.Errorf("pidfd_open: %w", errno)
	}
	f := os.NewFile(fd, "pidfd")
	defer f.Close()
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	err = raw.Read(func(fd uintptr) bool {
		exited, err := waitable(fd)
		werr = err
		return exited || err != nil // false: wait until the pidfd is readable
	})
	if err == nil {
		err = werr
	}
	return err
}

// waitable reports whether the process of pidfd has exited, leaving it
// waitable.
func waitable(pidfd uintptr) (bool, error) {
	var info [128]byte // siginfo_t; si_signo, its first field, stays 0 while it runs
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPIDFD, pidfd, uintptr(unsafe.Pointer(&info[0])),
			syscall.WEXITED|syscall.WNOHANG|wNoWait, 0, 0)
		switch errno {
		case 0:
			return *(*int32)(unsafe.Pointer(&info[0])) != 0, nil
		case syscall.EINTR:
			continue
		}
		return false, fmt.Errorf("waitid: %w", errno)
	}
}
