package main

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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
