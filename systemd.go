package main

// systemd.go fits servery to a service manager: socket activation (take
// the listener systemd bound) and sd_notify readiness (tell it when the
// whole generation serves, not merely when the parent started). Both are
// the documented protocols, spoken with the standard library alone.

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// listenFDsStart is the first descriptor systemd passes (SD_LISTEN_FDS_START).
const listenFDsStart = 3

// activatedListener returns the listener systemd passed, when LISTEN_PID
// names this process, and false when none was passed. It removes the
// LISTEN_* variables from the environment either way, as sd_listen_fds
// does, so nothing started later mistakes them for its own. One TCP
// listening socket is supported; anything else is an error.
func activatedListener() (net.Listener, bool, error) {
	pid, fds, names := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS"), os.Getenv("LISTEN_FDNAMES")
	for _, name := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		os.Unsetenv(name)
	}
	if fds == "" || pid != strconv.Itoa(os.Getpid()) {
		return nil, false, nil
	}
	if fds != "1" {
		return nil, false, fmt.Errorf("LISTEN_FDS=%s (names %q): servery takes exactly one socket", fds, names)
	}
	f := os.NewFile(listenFDsStart, "systemd-socket")
	defer f.Close() // the listener holds its own duplicate
	if err := checkListening(f); err != nil {
		return nil, false, fmt.Errorf("socket passed as fd %d: %w", listenFDsStart, err)
	}
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, false, fmt.Errorf("socket passed as fd %d: %w", listenFDsStart, err)
	}
	if _, ok := ln.(*net.TCPListener); !ok {
		ln.Close()
		return nil, false, fmt.Errorf("socket passed as fd %d is %s, want a TCP listener", listenFDsStart, ln.Addr().Network())
	}
	return ln, true, nil
}

// notifier sends service-manager notifications to NOTIFY_SOCKET, one
// unixgram datagram per message. Its zero value (no socket) sends nothing.
// It sends what it is given, in the order given: the lifecycle loop alone
// notifies, in the order of its decisions, so a stopping service never
// becomes ready again (lifecycle.go).
type notifier struct {
	addr *net.UnixAddr
	log  *slog.Logger
}

// newNotifier reads NOTIFY_SOCKET: a path, or "@name" for the abstract
// namespace, which Go's net package maps for us. The variable stays in the
// parent's environment; workers never get it, since under systemd's
// default NotifyAccess=main only the main process may notify.
func newNotifier(log *slog.Logger) *notifier {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return &notifier{}
	}
	return &notifier{addr: &net.UnixAddr{Name: path, Net: "unixgram"}, log: log}
}

// notify sends the states as one datagram, such as "READY=1" and
// "STATUS=4 workers ready". Failure is logged, never fatal: the service
// manager, not servery, decides what a missing notification means.
func (n *notifier) notify(states ...string) {
	if n.addr == nil {
		return
	}
	states = slices.DeleteFunc(states, func(s string) bool { return s == "" })
	if err := n.send(strings.Join(states, "\n") + "\n"); err != nil {
		n.log.Warn("sd_notify failed", "socket", n.addr.Name, "err", err)
	}
}

// watchdogPeriod returns how often to tell systemd the service is alive
// (WATCHDOG=1): half the WatchdogSec= it set in WATCHDOG_USEC, as
// sd_watchdog_enabled advises, if it is meant for this process
// (WATCHDOG_PID, when set, is its pid); 0 without a watchdog.
func watchdogPeriod() time.Duration {
	usec, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || usec <= 0 {
		return 0
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0
	}
	return time.Duration(usec) * time.Microsecond / 2
}

// watchdog asks the lifecycle loop to send WATCHDOG=1 every period until
// the service has ended. The loop sends it, between its decisions, so a
// loop that no longer takes events stops the pings, and the service
// manager restarts the service (WatchdogSec=): the supervisor itself is
// watched, as the parent watches its workers.
func (v *Service) watchdog(period time.Duration) { v.every(period, evWatchdog{}) }

// notifyTimeout bounds one notification: the lifecycle loop sends it,
// and a service manager that does not read its socket must not stall
// every decision behind it. A notification that does not fit in time is
// dropped, and logged.
const notifyTimeout = 100 * time.Millisecond

func (n *notifier) send(msg string) error {
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	conn.SetWriteDeadline(time.Now().Add(notifyTimeout))
	if _, err := conn.Write([]byte(msg)); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}
