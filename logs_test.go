package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serviceLines are the log lines about the service rather than a
// generation, made once before any generation starts; DESIGN.md's Logs
// section lists the same.
var serviceLines = []string{`msg="tls identity"`, `msg="socket activation"`, `msg="status listener"`,
	`msg="socket activation: the passed socket wins over -addr"`}

// TestEveryLifecycleLineNamesItsGeneration runs servery, started by socket
// activation with TLS, a status listener and a shutdown delay, through a
// start, a reload, a lost worker's respawn and a recycle (with workers), a
// reload that fails in its workers, and a stop whose delay a second signal
// skips, in both modes; it requires every log line but the service's own,
// the workers' lines included, to say which generation it is about. (Ticket
// key rotation, once a day, is TestTicketKeyRotationLineNamesTheGeneration's.)
func TestEveryLifecycleLineNamesItsGeneration(t *testing.T) {
	skipWithoutWorkers(t) // socket activation starts servery through sh
	for _, workers := range []string{"1", "2"} {
		t.Run("workers="+workers, func(t *testing.T) {
			dir := t.TempDir()
			id, err := selfSignedIdentity("127.0.0.1", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, "cert.pem", string(id.CertPEM))
			writeFile(t, dir, "key.pem", string(id.KeyPEM))
			cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
			site := t.TempDir()
			writeFile(t, site, "index.html", "hello")
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			// -addr too, which the passed socket overrides, with a warning.
			args := []string{"-dir", site, "-workers", workers, "-tls-cert", cert, "-tls-key", key,
				"-status-addr", "127.0.0.1:0", "-shutdown-delay", "10s", "-addr", "127.0.0.1:1"}
			if workers != "1" {
				args = append(args, "-max-requests", "20")
			}
			cmd := activatedCommand(t, ln, "1", args...)
			ln.Close() // servery holds the only copy now
			s := launchServery(t, cmd)
			s.signal(syscall.SIGHUP)
			waitLog(t, s, `msg=reloaded generation=2`)
			if workers != "1" {
				pids := s.workerPIDs() // generation 2's come last
				kill(pids[len(pids)-1])
				waitLog(t, s, `msg="worker respawned" generation=2`)
				client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
				for range 60 {
					if resp, err := client.Get("https://" + s.addr + "/"); err == nil {
						resp.Body.Close()
					}
				}
				client.CloseIdleConnections()
				waitLog(t, s, `msg="worker recycled" generation=2`)
			}
			// A directory that is gone fails the next reload in its
			// workers' App start.
			if err := os.Rename(site, site+".gone"); err != nil {
				t.Fatal(err)
			}
			s.signal(syscall.SIGHUP)
			waitLog(t, s, `msg="reload failed, still serving"`)
			s.signal(syscall.SIGTERM)
			waitLog(t, s, `msg="shutdown delay: not ready, serving on"`)
			s.signal(syscall.SIGTERM) // skips the delay
			if code := s.wait(10 * time.Second); code != exitOK {
				t.Fatalf("exit status %d; want 0", code)
			}
			if !strings.Contains(s.logs(), `level=WARN msg="socket activation: the passed socket wins over -addr"`) {
				t.Error("no warning that the passed socket wins over -addr")
			}
			for _, line := range strings.Split(strings.TrimSpace(s.logs()), "\n") {
				if !strings.Contains(line, " generation=") && !slices.ContainsFunc(serviceLines, func(msg string) bool {
					return strings.Contains(line, msg)
				}) {
					t.Errorf("log line without generation=: %s", line)
				}
			}
		})
	}
}

// TestRollbackLogsItsTerminationsAsPlanned requires a rollback before
// commit to log its terminations as what they are: the plan, not workers
// outliving a deadline, with no counters for workers that never served.
func TestRollbackLogsItsTerminationsAsPlanned(t *testing.T) {
	h := newHarness(t, 4, map[int]string{1: faultFail})
	if err := h.sup.Start(context.Background()); err == nil {
		t.Fatal("Start() = nil; want the injected failure")
	}
	h.assertAllGone()
	logs := h.readLogs()
	for _, bad := range []string{"level=WARN", "reported=false", "clean=false", "outlived"} {
		if strings.Contains(logs, bad) {
			t.Errorf("a rollback's log says %q:\n%s", bad, logs)
		}
	}
	for _, want := range []string{`msg="terminating every worker: nothing to drain before commit"`, `msg="generation rolled back"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("a rollback's log lacks %s:\n%s", want, logs)
		}
	}
}

// traceOrder checks that the logs trace, for pid, each of want in order:
// a direction ("sent" or "read") and the message type it carried.
func traceOrder(t *testing.T, logs string, pid int, want ...string) {
	t.Helper()
	at := 0
	for i := 0; i < len(want); i += 2 {
		re := regexp.MustCompile(fmt.Sprintf(`msg="protocol %s" generation=\d+ worker=\d+ pid=%d line="\{\\"type\\":\\"%s\\"`, want[i], pid, want[i+1]))
		loc := re.FindStringIndex(logs[at:])
		if loc == nil {
			t.Errorf("no trace of %s %s for pid %d after the %s before it:\n%s", want[i], want[i+1], pid, strings.Join(want[:i], " "), logs)
			return
		}
		at += loc[1]
	}
}

func TestDebugLevelTracesTheProtocolMessageByMessage(t *testing.T) {
	skipWithoutWorkers(t)
	t.Run("a startup failure", func(t *testing.T) {
		cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-dir", t.TempDir(), "-workers", "2", "-log-level", "debug")
		cmd.Env = append(os.Environ(), mainEnv+"=1", faultEnv+"="+faultFail)
		s := spawnServery(t, cmd)
		if code := s.wait(30 * time.Second); code != 1 {
			t.Fatalf("exit status %d with every worker failing; want 1:\n%s", code, s.logs())
		}
		pids := s.workerPIDs()
		if len(pids) != 2 {
			t.Fatalf("%d workers started; want 2:\n%s", len(pids), s.logs())
		}
		// The first to fail ends the start: the other may be rolled back
		// before it says so.
		failed := 0
		for _, pid := range pids {
			traceOrder(t, s.logs(), pid, "sent", "config")
			if regexp.MustCompile(fmt.Sprintf(`msg="protocol read" generation=1 worker=\d pid=%d line="\{\\"type\\":\\"failed`, pid)).MatchString(s.logs()) {
				traceOrder(t, s.logs(), pid, "sent", "config", "read", "failed")
				failed++
			}
		}
		if failed == 0 {
			t.Errorf("no worker's failed message traced:\n%s", s.logs())
		}
		t.Logf("the trace (TOUR.md's overview runs this test with -v to show it):\n%s", s.logs())
	})
	t.Run("a respawn, over TLS", func(t *testing.T) {
		s := startServery(t, "-dir", t.TempDir(), "-workers", "2", "-log-level", "debug", "-tls-self-signed")
		old := s.workerPIDs()[0]
		kill(old)
		re := regexp.MustCompile(fmt.Sprintf(`msg="worker respawned" generation=1 worker=\d+ old_pid=%d new_pid=(\d+)`, old))
		var m []string
		for deadline := time.Now().Add(30 * time.Second); m == nil; time.Sleep(10 * time.Millisecond) {
			if m = re.FindStringSubmatch(s.logs()); m == nil && time.Now().After(deadline) {
				t.Fatalf("worker %d not respawned within 30s:\n%s", old, s.logs())
			}
		}
		pid, _ := strconv.Atoi(m[1])
		logs := s.logs()
		traceOrder(t, logs, pid, "sent", "config", "read", "starting", "read", "prepared", "sent", "commit", "read", "ready")
		if !regexp.MustCompile(fmt.Sprintf(`msg="protocol sent" generation=1 worker=\d+ pid=%d line=.*"type\\":\\"config.* left_out="tls identity, \d ticket keys"`, pid)).MatchString(logs) {
			t.Errorf("the config's trace does not say what it left out:\n%s", logs)
		}
		for _, secret := range []string{"PRIVATE KEY", "key_pem", `ticket_keys\":[`, `keys\":[`} {
			if strings.Contains(logs, secret) {
				t.Errorf("the trace holds %q: a secret logged", secret)
			}
		}
		s.signal(syscall.SIGTERM)
		if code := s.wait(20 * time.Second); code != 0 {
			t.Errorf("exit status %d after SIGTERM; want 0", code)
		}
		t.Logf("the trace (TOUR.md's overview runs this test with -v to show it):\n%s", s.logs())
	})
}
