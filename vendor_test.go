package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeBlock returns the first fenced block of the given language in the
// README section whose heading is section.
func readmeBlock(t *testing.T, section, lang string) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, text, ok := strings.Cut(string(b), "\n## "+section+"\n")
	if !ok {
		t.Fatalf("README has no section %q", section)
	}
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	_, block, ok := strings.Cut(text, "\n```"+lang+"\n")
	if !ok {
		t.Fatalf("README section %q has no %s block", section, lang)
	}
	block, _, _ = strings.Cut(block, "\n```\n")
	return block + "\n"
}

func TestVendoredCopyServesItsOwnApp(t *testing.T) {
	// The only skips: Windows, where servery serves in direct mode only
	// and this test needs three workers, and a machine without the go
	// command. On Linux and every other Unix the test always runs.
	if runtime.GOOS == "windows" {
		t.Skip("worker processes need Unix; Windows serves in direct mode only")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	const section = "Embedding your own handler"
	steps, mainGo := readmeBlock(t, section, "sh"), readmeBlock(t, section, "go")
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "SERVERY="+here, "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %q: %v\n%s", name, args, err, out)
		}
	}
	run(goCmd, "mod", "init", "example.com/hello")
	run("bash", "-euc", steps) // the README's commands, literally
	if err := os.WriteFile(filepath.Join(mod, "main.go"), []byte(mainGo), 0o644); err != nil {
		t.Fatal(err)
	}
	run(goCmd, "build", "-o", "hello", ".")
	help, _ := exec.Command(filepath.Join(mod, "hello"), "-help").Output()
	if !strings.Contains(string(help), "-greeting") || !strings.Contains(string(help), "-workers") {
		t.Errorf("-help does not list the program's flags with servery's:\n%s", help)
	}

	usage, _ := exec.Command(filepath.Join(mod, "hello"), "-workers", "0").CombinedOutput()
	if !strings.HasPrefix(string(usage), "hello: -workers: ") {
		t.Errorf("a usage error says %q; want it to start with the program's own name, hello:", usage)
	}
	version, _ := exec.Command(filepath.Join(mod, "hello"), "-version").Output()
	if !strings.HasPrefix(string(version), "hello example.com/hello ") {
		t.Errorf("-version says %q; want the program's name and module path first", version)
	}

	cmd := exec.Command(filepath.Join(mod, "hello"), "-addr", "127.0.0.1:0", "-workers", "3", "-greeting", "hi-there")
	s := launchServery(t, cmd)
	if n := len(s.workerPIDs()); n != 3 {
		t.Fatalf("%d workers started; want 3", n)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	// Which worker takes each connection is the kernel's choice, which
	// guarantees no spread: every answer must be the App's, from one of
	// the three, and that is all.
	for range 10 {
		resp, err := client.Get("http://" + s.addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 200)
		n, _ := resp.Body.Read(body)
		resp.Body.Close()
		answer := string(body[:n])
		if !strings.HasPrefix(answer, "hi-there from worker ") || !strings.HasSuffix(answer, " of 3\n") {
			t.Fatalf("answer %q; want the app's own flag value and its worker identity", answer)
		}
	}
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Errorf("exit status %d after SIGTERM; want 0", code)
	}
	s.assertNoWorkersLeft()
}
