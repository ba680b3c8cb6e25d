package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEveryLifecycleLineNamesItsGeneration runs servery through a start,
// a reload, a reload that fails in its workers and a stop, in both modes, and
// requires every log line from the moment it listens, the workers' own
// included, to say which generation it is about.
func TestEveryLifecycleLineNamesItsGeneration(t *testing.T) {
	for _, workers := range []string{"1", "2"} {
		t.Run("workers="+workers, func(t *testing.T) {
			if workers != "1" {
				skipWithoutWorkers(t)
			}
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
			s := startServery(t, "-dir", site, "-workers", workers, "-tls-cert", cert, "-tls-key", key)
			s.signal(syscall.SIGHUP)
			waitLog(t, s, `msg=reloaded generation=2`)
			// A directory that is gone fails the next reload in its
			// workers' App start.
			if err := os.Rename(site, site+".gone"); err != nil {
				t.Fatal(err)
			}
			s.signal(syscall.SIGHUP)
			waitLog(t, s, `msg="reload failed, still serving"`)
			s.signal(syscall.SIGTERM)
			if code := s.wait(10 * time.Second); code != exitOK {
				t.Fatalf("exit status %d; want 0", code)
			}
			for _, line := range strings.Split(strings.TrimSpace(s.logs()), "\n") {
				// The identity is the service's, made before any generation
				// and kept across them.
				if strings.Contains(line, `msg="tls identity"`) {
					continue
				}
				if !strings.Contains(line, " generation=") {
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
