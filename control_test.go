package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestProgramReloadsAndStopsThroughControl(t *testing.T) {
	inBothModes(t, func(t *testing.T, workers string) {
		ns := newNotifySocket(t)
		s, marks := startProbeServery(t, ns, "-workers", workers, "-parent-reloads", "2")
		if code := s.wait(20 * time.Second); code != exitOK {
			t.Fatalf("exit status %d; want %d after the program's own stop", code, exitOK)
		}
		for i := 1; i <= 2; i++ {
			if got := readMark(t, marks, fmt.Sprintf("parent-reload-%d", i)); got != "ok" {
				t.Errorf("Control.Reload #%d = %q; want ok", i, got)
			}
		}
		logs := s.logs()
		for _, want := range []string{`msg=reloaded generation=3`, `msg="stop requested" by=program`} {
			if !strings.Contains(logs, want) {
				t.Errorf("log lacks %q:\n%s", want, logs)
			}
		}
		s.assertNoWorkersLeft()
	})
}

func TestControlReloadReportsWhyItFailed(t *testing.T) {
	inBothModes(t, func(t *testing.T, workers string) {
		ns := newNotifySocket(t)
		s, marks := startProbeServery(t, ns, "-workers", workers, "-parent-reloads", "1",
			"-start-fault", "fail", "-fault-generation", "2")
		if code := s.wait(20 * time.Second); code != exitOK {
			t.Fatalf("exit status %d; want %d: a failed reload leaves the service serving", code, exitOK)
		}
		if got := readMark(t, marks, "parent-reload-1"); !strings.Contains(got, "no database") {
			t.Errorf("Control.Reload = %q; want the App's start error", got)
		}
		s.assertNoWorkersLeft()
	})
}

func TestProgramScalesThroughControlAndTheCountHoldsAcrossItsReload(t *testing.T) {
	skipWithoutWorkers(t)
	ns := newNotifySocket(t)
	s, marks := startProbeServery(t, ns, "-workers", "2", "-parent-scale", "3", "-parent-reloads", "1")
	if code := s.wait(20 * time.Second); code != exitOK {
		t.Fatalf("exit status %d; want %d after the program's own stop", code, exitOK)
	}
	if got := readMark(t, marks, "parent-scale"); got != "ok" {
		t.Errorf("Control.Scale(3) = %q; want ok", got)
	}
	if got := readMark(t, marks, "parent-reload-1"); got != "ok" {
		t.Errorf("Control.Reload = %q; want ok", got)
	}
	// The added worker, and every worker of the reload, is told the count.
	for _, want := range []string{"identity-2-of-3-gen-1", "identity-0-of-3-gen-2", "identity-2-of-3-gen-2"} {
		if _, err := os.Stat(filepath.Join(marks, want)); err != nil {
			t.Errorf("no mark %s: %v", want, err)
		}
	}
	s.assertNoWorkersLeft()
}

func TestControlScaleInDirectModeSaysItCannot(t *testing.T) {
	ns := newNotifySocket(t)
	s, marks := startProbeServery(t, ns, "-workers", "1", "-parent-scale", "2", "-parent-reloads", "1")
	if code := s.wait(20 * time.Second); code != exitOK {
		t.Fatalf("exit status %d; want %d after the program's own stop", code, exitOK)
	}
	if got := readMark(t, marks, "parent-scale"); !strings.Contains(got, "direct mode (-workers 1)") {
		t.Errorf("Control.Scale(2) in direct mode = %q; want it to say direct mode cannot", got)
	}
}

// readMark returns the text of the probe's marker file name, or "".
func readMark(t *testing.T, marks, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(marks, name))
	if err != nil {
		t.Errorf("no mark %s: %v", name, err)
	}
	return string(b)
}

func TestVersionNamesTheModuleAndRevision(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("not a git checkout: nothing to stamp")
	}
	exe := filepath.Join(t.TempDir(), "servery")
	build := exec.Command(goCmd, "build", "-buildvcs=true", "-o", exe, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(exe, "-version")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("servery -version: %v\n%s", err, stderr.String())
	}
	want := "servery servery "
	line := stdout.String()
	if !strings.HasPrefix(line, want) || !strings.Contains(line, "revision "+strings.TrimSpace(string(head))) ||
		!strings.Contains(line, "go1.") || strings.Count(line, "\n") != 1 {
		t.Errorf("-version printed %q; want one line starting %q with revision %s and the Go release", line, want, head)
	}
}

// TestVersionSaysWhenTheBuildHasNoRevision: a build without a revision
// says why: go run for go run's binary, -buildvcs=false and GOFLAGS for
// any other, a real one built under GOFLAGS=-buildvcs=false included.
func TestVersionSaysWhenTheBuildHasNoRevision(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "servery", Version: "(devel)"}}
	for exe, why := range map[string]string{
		"/tmp/go-build3141/b001/exe/servery": "(no VCS stamp: go run)",
		"/usr/local/bin/servery":             "(no VCS stamp: built with -buildvcs=false, perhaps from GOFLAGS (go env GOFLAGS), or outside a repository)",
	} {
		got := versionLine("servery", bi, exe)
		if !strings.Contains(got, "revision unknown "+why) || !strings.Contains(got, "go1.26.8") {
			t.Errorf("versionLine(%s) = %q; want the missing revision said, %s, and the Go release", exe, got, why)
		}
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	exe := filepath.Join(t.TempDir(), "servery")
	build := exec.Command(goCmd, "build", "-o", exe, ".")
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(exe, "-version").Output()
	if line := string(out); err != nil || !strings.Contains(line, "-buildvcs=false") || strings.Contains(line, "go run") {
		t.Errorf("-version of a build under GOFLAGS=-buildvcs=false: %q, %v; want -buildvcs=false named, not go run", line, err)
	}
}

func TestProgramFlagNamedLikeServerysOwnIsAUsageError(t *testing.T) {
	fs := flag.NewFlagSet("hello", flag.ContinueOnError)
	fs.String("addr", "", "the program's own -addr")
	app := App{Start: func(context.Context, Worker) (http.Handler, error) { return http.NotFoundHandler(), nil }}
	var stdout, stderr bytes.Buffer
	code := run(nil, &stdout, &stderr, fs, app)
	msg := stderr.String()
	if code != exitUsage || !strings.Contains(msg, "the program defines flag -addr, which is servery's own") || strings.Count(msg, "\n") != 1 {
		t.Errorf("run with a program flag -addr = %d, stderr %q; want %d and one line naming the flag", code, msg, exitUsage)
	}
}
