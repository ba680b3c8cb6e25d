//go:build unix

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

// watchReopens reopens the access log at each SIGUSR1, as nginx does
// for logrotate's postrotate step.
func watchReopens(fe *frontEnd) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			fe.reopenLogs()
		}
	}()
}

// watchScaling turns SIGTTIN into one worker more and SIGTTOU into one
// less, as gunicorn does, and keeps either from stopping the parent,
// which is their default for a process with a terminal. The Service
// takes them once it runs (runService); until then they wait in
// fe.scales, and more than it holds are dropped.
func watchScaling(fe *frontEnd) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTTIN, syscall.SIGTTOU)
	go func() {
		for sig := range sigs {
			delta, name := 1, "SIGTTIN"
			if sig == syscall.SIGTTOU {
				delta, name = -1, "SIGTTOU"
			}
			fe.log.Info("scale requested", "signal", name, "generation", fe.generation.Load())
			select {
			case fe.scales <- delta:
			default:
				fe.log.Warn("scale dropped: too many asked for before the service runs", "signal", name)
			}
		}
	}()
}

// watchUpgrades makes SIGUSR2, which nginx and gunicorn take as
// "upgrade the binary", ask for an in-place upgrade of the parent
// (upgrade.go); Go's default would take it and do nothing. Signals
// that come while one waits are the same upgrade.
func watchUpgrades(fe *frontEnd) {
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	go func() {
		for range usr2 {
			select {
			case fe.upgrades <- struct{}{}:
			default:
			}
		}
	}()
}

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

// signalProcess sends sig to the process pid alone.
func signalProcess(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signal %d: %w", pid, err)
	}
	return nil
}

// listenerFile duplicates the listening socket as a file for ExtraFiles.
// A file, not a descriptor number, because os/exec maps ExtraFiles[0] to
// fd 3 in the child whatever number it has here.
//
// Why not ln.File: exec.Cmd.Start calls Fd on every ExtraFiles entry, and
// the Fd of a file from net's File puts the descriptor in blocking mode
// (Go issue 29277). The mode belongs to the open file description that the
// parent, every worker and every later generation share, so while workers
// start, an accept already running in another worker could block a whole
// thread. os.NewFile over a dup keeps the mode it finds: its Fd changes
// nothing.
func listenerFile(ln net.Listener) (*os.File, error) {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("listener %T cannot be shared", ln)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("share listener: %w", err)
	}
	var dup int
	var derr error
	err = raw.Control(func(fd uintptr) {
		// Under ForkLock, as os/exec's own descriptors are, so no child
		// forked in between inherits the copy before it is close-on-exec.
		syscall.ForkLock.RLock()
		defer syscall.ForkLock.RUnlock()
		if dup, derr = syscall.Dup(int(fd)); derr == nil {
			syscall.CloseOnExec(dup)
		}
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return nil, fmt.Errorf("share listener: %w", err)
	}
	return os.NewFile(uintptr(dup), "listener"), nil
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
// stderr, the listener and the protocol's two pipes.
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
