//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// claimStdio moves the protocol's pipes, which the parent set up as the
// worker's stdin and stdout, to descriptors of the worker's own, and
// points stdout at stderr and stdin at /dev/null. It runs before any App
// code: the protocol is JSON lines, and one fmt.Println in a handler, or
// a library that prints, on the pipe the parent reads would be a
// malformed line and cost the worker its life. This way a program's
// prints land in servery's log, as its log lines do, and whatever reads
// stdin finds it empty.
func claimStdio() (in, out *os.File, err error) {
	inFD, err := dupCloseOnExec(0)
	if err != nil {
		return nil, nil, fmt.Errorf("claim stdin: %w", err)
	}
	outFD, err := dupCloseOnExec(1)
	if err != nil {
		syscall.Close(inFD)
		return nil, nil, fmt.Errorf("claim stdout: %w", err)
	}
	null, err := os.Open(os.DevNull)
	if err == nil {
		err = dupTo(int(null.Fd()), 0)
		null.Close()
	}
	if err == nil {
		err = dupTo(2, 1)
	}
	if err != nil {
		syscall.Close(inFD)
		syscall.Close(outFD)
		return nil, nil, fmt.Errorf("redirect stdio: %w", err)
	}
	return os.NewFile(uintptr(inFD), "protocol-in"), os.NewFile(uintptr(outFD), "protocol-out"), nil
}

// dupCloseOnExec duplicates fd to a new descriptor that no child inherits.
func dupCloseOnExec(fd int) (int, error) {
	// Under ForkLock, as os/exec's own descriptors are, so no child
	// forked in between inherits the copy before it is close-on-exec.
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	nfd, err := syscall.Dup(fd)
	if err == nil {
		syscall.CloseOnExec(nfd)
	}
	return nfd, err
}
