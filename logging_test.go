package main

import (
	"bufio"
	"encoding/json"
	stdlog "log"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestJSONLogsAreOneObjectALineFromParentAndWorkers(t *testing.T) {
	skipWithoutWorkers(t)
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-dir", site, "-workers", "2", "-log-format", "json")
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	s := spawnServery(t, cmd)
	waitLog(t, s, `"msg":"serving"`)
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Fatalf("exit status %d; want 0", code)
	}
	f, err := os.Open(s.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines, fromWorkers, withGeneration int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Errorf("a log line that is no JSON object: %q: %v", sc.Text(), err)
			continue
		}
		lines++
		for _, key := range []string{"time", "level", "msg"} {
			if _, ok := rec[key]; !ok {
				t.Errorf("line %q has no %q", sc.Text(), key)
			}
		}
		if _, ok := rec["generation"]; ok {
			withGeneration++
		}
		if _, ok := rec["worker"]; ok && strings.HasPrefix(rec["msg"].(string), "worker drain") {
			fromWorkers++
		}
	}
	if lines < 10 || withGeneration < lines/2 || fromWorkers < 2 {
		t.Errorf("%d JSON lines, %d with generation, %d drain lines from workers; want the whole log in JSON, the workers' too", lines, withGeneration, fromWorkers)
	}
}

func TestFailedTLSHandshakesAreLoggedAtMostOnceASecondWithACount(t *testing.T) {
	var b strings.Builder
	h := &httpErrors{log: slog.New(slog.NewTextHandler(&b, nil))}
	errLog := stdlog.New(h, "", 0)
	for i := range 50 { // clients that closed before their handshake: DEBUG, not counted
		errLog.Printf("http: TLS handshake error from 198.51.100.%d:4000: EOF", i)
		errLog.Printf("http: TLS handshake error from 198.51.100.%d:4001: read tcp 127.0.0.1:443->198.51.100.%d:4001: read: connection reset by peer", i, i)
	}
	for i := range 100 {
		errLog.Printf("http: TLS handshake error from 192.0.2.%d:4000: tls: client offered only unsupported versions: [301]", i)
	}
	errLog.Print("http: Accept error: too many open files; retrying in 5ms")
	// A second later, as far as the limit can tell.
	h.mu.Lock()
	h.last = h.last.Add(-handshakeLogEvery)
	h.mu.Unlock()
	errLog.Print("http: TLS handshake error from 192.0.2.200:4000: remote error: tls: bad certificate")
	logs := b.String()
	for _, want := range []string{
		`level=WARN msg="tls handshake failed" remote=192.0.2.0:4000 err="tls: client offered only unsupported versions: [301]" left_out=0`,
		`level=WARN msg="http server error" err="http: Accept error: too many open files; retrying in 5ms"`,
		`level=WARN msg="tls handshake failed" remote=192.0.2.200:4000 err="remote error: tls: bad certificate" left_out=99`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %s:\n%s", want, logs)
		}
	}
	if n := strings.Count(logs, "\n"); n != 3 {
		t.Errorf("%d lines for 101 failed handshakes, 100 closed early and one other error; want 3:\n%s", n, logs)
	}
}
