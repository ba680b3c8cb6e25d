//go:build unix

package main

import (
	"errors"
	"syscall"
)

// kill sends SIGKILL to one process, as the OOM killer would.
func kill(pid int) { syscall.Kill(pid, syscall.SIGKILL) }

// killGroup sends SIGKILL to the process group pid leads: a worker and
// everything it started.
func killGroup(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }

// pause stops a process (SIGSTOP): it accepts nothing until unpause.
func pause(pid int) { syscall.Kill(pid, syscall.SIGSTOP) }

// unpause continues a paused process.
func unpause(pid int) { syscall.Kill(pid, syscall.SIGCONT) }

// exists reports whether a process with this pid exists, zombies included.
func exists(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// setSendBuffer sets a socket's SO_SNDBUF.
func setSendBuffer(fd uintptr, bytes int) error {
	return syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, bytes)
}
