package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// notifySocket is a unixgram socket standing in for systemd's; it records
// every datagram with the time it arrived.
type notifySocket struct {
	path string
	got  chan datagram
}

type datagram struct {
	at   time.Time
	text string
}

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	// A short directory: socket paths are limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "ntf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ns := &notifySocket{path: filepath.Join(dir, "notify"), got: make(chan datagram, 16)}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: ns.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				close(ns.got)
				return
			}
			ns.got <- datagram{at: time.Now(), text: string(buf[:n])}
		}
	}()
	return ns
}

// next waits for the next datagram.
func (ns *notifySocket) next(t *testing.T) datagram {
	t.Helper()
	select {
	case d := <-ns.got:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no notification arrived")
		return datagram{}
	}
}

// activatedCommand runs servery as systemd would start it: the socket as
// fd 3, LISTEN_FDS, and LISTEN_PID set to servery's own pid, which only
// the shell that becomes servery knows.
func activatedCommand(t *testing.T, ln net.Listener, fds string, args ...string) *exec.Cmd {
	t.Helper()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cmd := exec.Command("/bin/sh", append([]string{"-c", `LISTEN_PID=$$ exec "$0" "$@"`, os.Args[0]}, args...)...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", "LISTEN_FDS="+fds, "LISTEN_FDNAMES=web")
	cmd.ExtraFiles = []*os.File{f}
	return cmd
}

func TestSocketActivationServesOnThePassedSocket(t *testing.T) {
	skipWithoutWorkers(t) // sh, and fd passing
	for _, workers := range []string{"1", "3"} {
		t.Run("workers="+workers, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "index.html", "hello")
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ns := newNotifySocket(t)
			cmd := activatedCommand(t, ln, "1", "-dir", dir, "-workers", workers, "-addr", "127.0.0.1:1")
			cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+ns.path)
			ln.Close() // servery holds the only copy now
			s := launchServery(t, cmd)
			if s.addr != addr {
				t.Errorf("serving on %s; want the passed socket %s", s.addr, addr)
			}
			if !strings.Contains(s.logs(), "the passed socket wins over -addr") {
				t.Errorf("the log does not say which address wins:\n%s", s.logs())
			}
			if code, body, err := get(addr, "/"); err != nil || code != 200 || body != "hello" {
				t.Fatalf("GET / = %d %q %v; want 200 hello", code, body, err)
			}
			if d := ns.next(t); !strings.Contains(d.text, "READY=1") {
				t.Errorf("first notification %q; want READY=1", d.text)
			}
			assertNoParentOnlyEnv(t, s.workerPIDs())
			s.signal(syscall.SIGTERM)
			if d := ns.next(t); !strings.Contains(d.text, "STOPPING=1") {
				t.Errorf("notification after SIGTERM %q; want STOPPING=1", d.text)
			}
			if code := s.wait(10 * time.Second); code != exitOK {
				t.Errorf("exit status %d; want 0", code)
			}
		})
	}
}

// assertNoParentOnlyEnv fails if a worker sees NOTIFY_SOCKET or LISTEN_*.
func assertNoParentOnlyEnv(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			t.Skipf("cannot read a worker's environment: %v", err)
		}
		for kv := range bytes.SplitSeq(b, []byte{0}) {
			if parentOnlyEnv(string(kv)) && !bytes.HasPrefix(kv, []byte(workerEnv+"=")) && !bytes.HasPrefix(kv, []byte(workerNameEnv+"=")) {
				t.Errorf("worker pid %d sees %s", pid, kv)
			}
		}
	}
}

func TestSocketActivationRefusesWhatItCannotServe(t *testing.T) {
	skipWithoutWorkers(t)
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	for name, tc := range map[string]struct {
		fds  string
		file func(t *testing.T) *os.File
		want string
	}{
		"two sockets": {"2", nil, "exactly one socket"},
		"udp socket": {"1", func(t *testing.T) *os.File {
			f, err := udp.(*net.UDPConn).File()
			if err != nil {
				t.Fatal(err)
			}
			return f
		}, "not a listening socket"},
	} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			cmd := activatedCommand(t, ln, tc.fds, "-dir", t.TempDir())
			if tc.file != nil {
				cmd.ExtraFiles = []*os.File{tc.file(t)}
			}
			out, err := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(string(out), tc.want) {
				t.Errorf("exit %d (%v), output %q; want %d and %q", code, err, out, exitUsage, tc.want)
			}
		})
	}
}

func TestReadyIsNotifiedOnlyOnceEveryWorkerIsReady(t *testing.T) {
	skipWithoutWorkers(t)
	const delay = 500 * time.Millisecond
	ns := newNotifySocket(t)
	slowPID := filepath.Join(t.TempDir(), "slow.pid")
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-dir", t.TempDir(), "-workers", "3")
	// One worker of this servery, the one that claims slowPID, reports
	// ready late; the others are ready at once.
	cmd.Env = append(os.Environ(), mainEnv+"=1", "NOTIFY_SOCKET="+ns.path,
		faultEnv+"="+faultSlowReadyOne, pidFileEnv+"="+slowPID, delayEnv+"="+delay.String())
	launched := time.Now()
	s := launchServery(t, cmd)
	d := ns.next(t)
	logs := s.logs()
	if !strings.Contains(d.text, "READY=1") || !strings.Contains(d.text, "STATUS=3 workers ready") {
		t.Fatalf("first notification %q; want READY=1 with the worker count", d.text)
	}
	if took := d.at.Sub(launched); took < delay {
		t.Errorf("READY=1 after %v; want it after the slow worker's late ready (%v)", took, delay)
	}
	pid, err := os.ReadFile(slowPID)
	if err != nil {
		t.Fatalf("no worker claimed the slow part: %v", err)
	}
	if !regexp.MustCompile(`msg=ready generation=1 worker=\d pid=` + string(pid) + ` `).MatchString(logs) {
		t.Errorf("READY=1 came before the slow worker (pid %s) was ready:\n%s", pid, logs)
	}
	if n := strings.Count(logs, "msg=ready "); n != 3 {
		t.Errorf("%d workers logged ready by READY=1; want 3", n)
	}
}

func TestLostWorkerIsNotified(t *testing.T) {
	skipWithoutWorkers(t)
	ns := newNotifySocket(t)
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-dir", t.TempDir(), "-workers", "2", "-max-restarts", "0")
	cmd.Env = append(os.Environ(), mainEnv+"=1", "NOTIFY_SOCKET="+ns.path)
	s := launchServery(t, cmd)
	ns.next(t) // READY=1
	kill(s.workerPIDs()[1])
	// One datagram, so the manager sees the reason and the stop together.
	if d := ns.next(t); !strings.Contains(d.text, "STATUS=worker 1") || !strings.Contains(d.text, "STOPPING=1") {
		t.Errorf("notification %q; want a STATUS naming worker 1 with STOPPING=1", d.text)
	}
	s.wait(10 * time.Second)
}

func TestNoNotifySocketMeansNoNotification(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	n := newNotifier(nil) // a nil logger: any attempt to send or log would panic
	n.notify("READY=1")
	if n.addr != nil {
		t.Errorf("notifier has address %v without NOTIFY_SOCKET", n.addr)
	}
	s := startServery(t, "-dir", t.TempDir())
	if strings.Contains(s.logs(), "sd_notify") {
		t.Errorf("servery spoke of sd_notify without NOTIFY_SOCKET:\n%s", s.logs())
	}
	if _, _, err := get(s.addr, "/"); err != nil {
		t.Fatal(err)
	}
}

func TestANotifySocketNobodyReadsNeverHoldsTheLoop(t *testing.T) {
	dir, err := os.MkdirTemp("", "ntf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	addr := &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"}
	deaf, err := net.ListenUnixgram("unixgram", addr) // never read
	if err != nil {
		t.Fatal(err)
	}
	defer deaf.Close()
	fill, err := net.DialUnix("unixgram", nil, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fill.Close()
	for {
		fill.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := fill.Write(make([]byte, 1024)); err != nil {
			break // its queue is full
		}
	}
	t.Setenv("NOTIFY_SOCKET", addr.Name)
	n := newNotifier(slog.New(slog.NewTextHandler(io.Discard, nil)))
	done := make(chan struct{})
	go func() {
		n.notify("READY=1") // as the lifecycle loop does
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("a notification to a service manager that does not read held the lifecycle loop")
	}
}
