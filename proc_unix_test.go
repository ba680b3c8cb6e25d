//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// kill sends SIGKILL to one process, as the OOM killer would.
func kill(pid int) { syscall.Kill(pid, syscall.SIGKILL) }

// killGroup sends SIGKILL to the process group pid leads: a worker and
// everything it started.
func killGroup(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }

// pause stops a process (SIGSTOP): it accepts nothing until unpause.
// It returns once every thread has stopped, where /proc says so: a stop
// reaches a Go process's threads one by one, and its netpoller could
// still take a connection made right after kill returns.
func pause(pid int) {
	syscall.Kill(pid, syscall.SIGSTOP)
	deadline := time.Now().Add(10 * time.Second)
	for !stopped(pid) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// stopped reports whether every thread of pid is stopped, or pid is
// gone; true where there is no /proc to ask.
func stopped(pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return true
	}
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			continue // the thread has exited
		}
		// The state follows the name, which is in parentheses and may
		// hold anything: look after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		if state := b[i+2]; state != 'T' && state != 't' && state != 'Z' && state != 'X' {
			return false
		}
	}
	return true
}

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

// sigMore and sigFewer ask the parent for one worker more and one less
// (scale.go).
const sigMore, sigFewer = syscall.SIGTTIN, syscall.SIGTTOU
