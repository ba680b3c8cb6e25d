//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// execImage writes h to a file it unlinks at once and execs path in this
// process, with the parent's own command line and environment, the
// handover file's descriptor in handoverEnv, and files and the handover
// file inherited: only they lose close-on-exec. It returns only if the
// exec failed, with every descriptor close-on-exec again.
//
// A file, not a pipe: the handover may outgrow a pipe's buffer, and
// nobody would be left to write the rest once the exec took.
func execImage(path string, h *handover, files handoverFiles) error {
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode handover: %w", err)
	}
	f, err := os.CreateTemp(handoverDir(), "servery-handover-")
	if err != nil {
		f, err = os.CreateTemp("", "servery-handover-") // /dev/shm full, or not ours
	}
	if err != nil {
		return fmt.Errorf("handover file: %w", err)
	}
	os.Remove(f.Name()) // open, it lives until the new image closes it
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("handover file: %w", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		return fmt.Errorf("handover file: %w", err)
	}
	inherit := append(files.all(), f)
	// No process forked meanwhile may inherit them (spawn holds
	// ForkLock's read side, as os/exec does).
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	defer func() {
		for _, x := range inherit {
			setCloseOnExec(fdOf(x), true)
		}
	}()
	for _, x := range inherit {
		// The new image could not take over without one of them, and
		// the old one would be gone: fail here instead.
		if err := setCloseOnExec(fdOf(x), false); err != nil {
			return fmt.Errorf("hand over %s: %w", x.Name(), err)
		}
	}
	env := append(os.Environ(), handoverEnv+"="+strconv.Itoa(fdOf(f)))
	err = syscall.Exec(path, os.Args, env)
	return fmt.Errorf("exec %s: %w", path, err)
}

// handoverDir is where the handover file is made, and unlinked at once:
// memory (/dev/shm) where there is one, since it holds the TLS key and
// the ticket keys; the temporary directory otherwise.
func handoverDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return ""
}

// setCloseOnExec sets or clears fd's close-on-exec flag.
func setCloseOnExec(fd int, on bool) error {
	if fd < 0 {
		return syscall.EBADF
	}
	flag := 0
	if on {
		flag = syscall.FD_CLOEXEC
	}
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFD, uintptr(flag)); errno != 0 {
		return errno
	}
	return nil
}
