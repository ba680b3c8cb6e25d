//go:build windows

package main

import (
	"os"
	"syscall"
)

// kill ends one process. Tests that start workers do not run on Windows,
// where -workers above 1 is refused; this keeps the tests compiling there.
func kill(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

// killGroup ends the process: Windows has no process groups to signal.
func killGroup(pid int) { kill(pid) }

// pause and unpause have no Windows counterpart; the tests that use them
// start workers, which do not run there.
func pause(int)   {}
func unpause(int) {}

// exists reports whether a process with this pid can be found.
func exists(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}

// setSendBuffer sets a socket's SO_SNDBUF.
func setSendBuffer(fd uintptr, bytes int) error {
	return syscall.SetsockoptInt(syscall.Handle(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, bytes)
}

// sigMore and sigFewer, SIGTTIN and SIGTTOU elsewhere, do not exist on
// Windows, where no service scales; they keep the tests compiling.
const sigMore, sigFewer = syscall.Signal(-1), syscall.Signal(-1)
