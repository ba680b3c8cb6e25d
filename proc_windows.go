//go:build windows

package main

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
)

// multiWorker is false: os/exec cannot pass ExtraFiles on Windows, so the
// listener cannot be shared and -workers above 1 is a configuration error.
const multiWorker = false

var errNoWorkers = errors.New("worker processes are not supported on windows")

// newSession does nothing: Windows has no sessions to lead.
func newSession(*exec.Cmd) {}

// signalGroup is never reached on Windows, where no worker is started.
func signalGroup(int, os.Signal) error { return errNoWorkers }

// signalProcess has no worker to signal: Windows runs none.
func signalProcess(int, syscall.Signal) error { return errNoWorkers }

// listenerFile is never reached on Windows, where no worker is started.
func listenerFile(net.Listener) (*os.File, error) { return nil, errNoWorkers }

// checkListening cannot inspect a socket on Windows; systemd does not
// exist there, so no socket is ever passed.
func checkListening(*os.File) error { return errNoWorkers }

// closeInheritedOnExec does nothing: no worker is started on Windows.
func closeInheritedOnExec() {}

// protocolPipes has no pipes to find: Windows runs no worker processes.
func protocolPipes() (in, out *os.File, err error) { return nil, nil, errNoWorkers }

// accessOutput is unused: Windows has no worker processes.
func accessOutput(runtimeConfig) (io.Writer, error) { return nil, errNoWorkers }

// watchReopens does nothing: Windows has no SIGUSR1, and logrotate's
// way of moving a file that is open does not work there.
func watchReopens(*frontEnd) {}

// watchScaling does nothing: Windows has no SIGTTIN or SIGTTOU, and no
// workers to scale.
func watchScaling(*frontEnd) {}

// watchUpgrades does nothing: Windows has no SIGUSR2.
func watchUpgrades(*frontEnd) {}

// survivePipeBreaks does nothing: Windows has no SIGPIPE.
func survivePipeBreaks() {}
