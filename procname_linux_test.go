package main

// procname_linux_test.go: what ps, top and pgrep show of the parent and
// its workers, read from /proc.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestWorkersAreNamedAfterTheProgram(t *testing.T) {
	skipWithoutWorkers(t)
	skipWithoutProc(t)
	// Started through a link of another name, as an installed program
	// often is: the program's name is the link's, not its executable's.
	exe, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	const name = "myservery"
	link := filepath.Join(t.TempDir(), name)
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, dir, "index.html", "hello")
	cmd := exec.Command(link, "-addr", "127.0.0.1:0", "-dir", dir, "-workers", "2")
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	s := launchServery(t, cmd)
	parent := s.cmd.Process.Pid
	if comm := procComm(t, parent); comm != name {
		t.Fatalf("the parent's comm is %q; want %q", comm, name)
	}
	want := procCmdline(t, parent)
	workers := s.workerPIDs()
	if len(workers) != 2 {
		t.Fatalf("logged worker pids %v; want 2", workers)
	}
	for _, pid := range workers {
		if comm := procComm(t, pid); comm != name {
			t.Errorf("worker pid %d: comm %q; want %q, the parent's (pgrep -x, ps -e and top show it)", pid, comm, name)
		}
		if args := procCmdline(t, pid); !slices.Equal(args, want) {
			t.Errorf("worker pid %d: command line %q; want the parent's %q", pid, args, want)
		}
	}
	if _, err := exec.LookPath("pgrep"); err == nil {
		out, _ := exec.Command("pgrep", "-x", name).Output()
		found := strings.Fields(string(out))
		for _, pid := range append(workers, parent) {
			if !slices.Contains(found, strconv.Itoa(pid)) {
				t.Errorf("pgrep -x %s found %q; want pid %d among them", name, found, pid)
			}
		}
	}
	s.signal(syscall.SIGTERM)
	s.wait(10 * time.Second)
}

// procComm is the kernel's name of process pid: what pgrep matches.
func procComm(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(string(b), "\n")
}

// procCmdline is the command line of process pid: what ps shows.
func procCmdline(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(bytes.TrimSuffix(b, []byte{0})), "\x00")
}
