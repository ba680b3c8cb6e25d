//go:build unix

package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// survivePipeBreaks makes a write to fd 1 or 2 whose reader has gone
// fail with EPIPE, where Go would end the process with SIGPIPE: the
// parent reads a worker's stdout and stderr (output.go), and a worker
// whose parent died must still drain and exit as it would have. The
// signal is caught, not ignored, so the children a program starts get
// SIGPIPE at its default: an ignored signal would be inherited, and a
// shell pipeline the program runs would never end at a closed reader.
func survivePipeBreaks() { signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) }

// protocolPipes returns the protocol's two pipes, which the parent passed
// as fds 4 and 5, and marks them close-on-exec: a child the program starts
// must not hold the read end of the liveness pipe, nor keep the parent's
// reader from its EOF by holding the write end. A descriptor that is not a
// pipe means the worker was not started by a parent of this protocol
// (one before version 7 passed its pipes as stdin and stdout), and
// whatever it is stays open for whoever opened it.
func protocolPipes() (in, out *os.File, err error) {
	if in, err = inheritedPipe(protocolInFD, "protocol-in"); err != nil {
		return nil, nil, err
	}
	if out, err = inheritedPipe(protocolOutFD, "protocol-out"); err != nil {
		return nil, nil, err
	}
	return in, out, nil
}

// accessOutput is where a worker's access lines go: the pipe the parent
// reads them from (its fd 6), when the parent says it passed one; nil
// without an access log; stderr otherwise.
func accessOutput(cfg runtimeConfig) (io.Writer, error) {
	switch {
	case cfg.AccessLog == "":
		return nil, nil
	case cfg.AccessPipe:
		return inheritedPipe(accessLogFD, "access-log")
	default:
		return os.Stderr, nil
	}
}

// inheritedPipe wraps fd, if it is a pipe, as a file that no child
// inherits.
func inheritedPipe(fd int, name string) (*os.File, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%s, fd %d: %w", name, fd, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return nil, fmt.Errorf("%s, fd %d: not a pipe", name, fd)
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), name), nil
}
