//go:build unix

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// multiWorker reports whether this platform can share a listener with
// worker processes.
const multiWorker = true

// newSession makes the worker lead a new session, and so a new process
// group whose id is its pid: one signal to the group then reaches the
// worker's descendants as well. It also keeps a terminal's Ctrl-C, which
// goes to the foreground group, from reaching workers behind the parent's
// back; the parent alone decides when they stop.
//
// Rejected: Pdeathsig. It is Linux-only, fires when the forking thread
// (not the process) exits, and would kill a worker mid-request; EOF on the
// liveness pipe gives a drain instead, on every Unix.
func newSession(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// signalGroup sends sig to the process group led by pid.
func signalGroup(pid int, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("signal %v: not a syscall.Signal", sig)
	}
	if err := syscall.Kill(-pid, s); err != nil {
		return fmt.Errorf("signal group %d: %w", pid, err)
	}
	return nil
}

// setNonblock puts the listening socket's shared open file description
// back in non-blocking mode.
func setNonblock(ln net.Listener) error {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return fmt.Errorf("listener %T has no descriptor", ln)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), true) }); err != nil {
		return err
	}
	return serr
}

// errNotListening is returned for a passed descriptor that is not a
// listening socket.
var errNotListening = errors.New("not a listening socket")

// checkListening reports whether f is a socket in the listening state, so
// a connected or datagram socket passed by a service manager is refused
// with a clear error instead of failing at the first accept.
func checkListening(f *os.File) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var listening int
	var serr error
	err = raw.Control(func(fd uintptr) {
		listening, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errNotListening, err)
	}
	if listening == 0 {
		return errNotListening
	}
	return nil
}

// closeInheritedOnExec marks every descriptor above stderr close-on-exec.
// Go opens its own that way, but whatever servery itself inherited without
// the flag (a shell's stray fd, a service manager's extra socket) would
// otherwise pass into every worker, which must hold exactly stdin, stdout,
// stderr and the listener.
func closeInheritedOnExec() {
	entries, err := os.ReadDir("/dev/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
