package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDecodeMessageRejectsBadLines(t *testing.T) {
	for name, tc := range map[string]struct {
		line string
		want string // in the error; "": any error
	}{
		"not json":           {`hello`, "malformed"},
		"unknown type":       {`{"type":"reboot"}`, "unknown message type"},
		"unknown field":      {`{"type":"ready","extra":1}`, "malformed"},
		"trailing data":      {`{"type":"ready"} {"type":"ready"}`, "trailing data"},
		"trailing bracket":   {`{"type":"ready"}]`, "trailing data"},
		"trailing brace":     {`{"type":"ready"}}`, "trailing data"},
		"config old version": {`{"type":"config","version":99,"config":{"index":0}}`, "protocol version 99"},
		// The current version, so it is the missing config that is refused.
		"config without":   {fmt.Sprintf(`{"type":"config","version":%d}`, protocolVersion), "without config"},
		"prepared no pid":  {`{"type":"prepared"}`, "without pid"},
		"failed no reason": {`{"type":"failed"}`, "without reason"},
		"done no stats":    {`{"type":"done"}`, "without stats"},
		"empty":            {``, "malformed"},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := decodeMessage([]byte(tc.line))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decodeMessage(%q) = %+v, %v; want an error saying %q", tc.line, m, err, tc.want)
			}
		})
	}
}

func TestDecodeMessageRoundTrips(t *testing.T) {
	id, err := selfSignedIdentity("", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg := &workerConfig{Index: 3, Count: 4, Generation: 2, StartupTimeout: time.Second, runtimeConfig: runtimeConfig{MaxConns: 7, TLS: id}}
	for _, m := range []message{
		{Type: msgConfig, Version: protocolVersion, Config: cfg},
		{Type: msgPrepared, PID: 42},
		{Type: msgCommit},
		{Type: msgReady},
		{Type: msgFailed, Reason: "directory vanished"},
		{Type: msgDone, Stats: &workerStats{Accepted: 5, Served: 9}},
		{Type: msgStats},
		{Type: msgStats, Stats: &workerStats{Accepted: 6, Served: 11}},
	} {
		var buf bytes.Buffer
		if err := (&lineWriter{w: &buf}).send(m); err != nil {
			t.Fatal(err)
		}
		got, err := newLineReader(&buf).next()
		if err != nil || got.Type != m.Type {
			t.Errorf("round trip of %s = %+v, %v", m.Type, got, err)
		}
		if m.Config != nil && (got.Config.Index != 3 || !bytes.Equal(got.Config.TLS.KeyPEM, id.KeyPEM)) {
			t.Errorf("config did not survive the round trip: %+v", got.Config)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, seed := range []string{
		`{"type":"prepared","pid":1}`, `{"type":"config","version":1,"config":{"index":0,"dir":"/"}}`,
		`{"type":"done","stats":{"accepted":1,"served":2}}`, `{"type":"failed","reason":"x"}`,
		`{"type":"ready"}`, `{"type":"commit"}`, `{"type":"commit"}}`, `{"type":`, `null`, `[]`, `{"type":"done","stats":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := decodeMessage(line)
		if err != nil {
			return
		}
		// Whatever is accepted must be one JSON value and nothing more...
		if !json.Valid(line) {
			t.Fatalf("decodeMessage(%q) accepted a line that is not one JSON value", line)
		}
		// ...and must mean what it says: encoding the message and decoding
		// that again gives the same message.
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("encode %+v: %v", m, err)
		}
		m2, err := decodeMessage(again)
		if err != nil {
			t.Fatalf("decodeMessage(%q) accepted, but its re-encoding %q is refused: %v", line, again, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("decodeMessage(%q) = %+v, but its re-encoding decodes to %+v", line, m, m2)
		}
	})
}

// workerProcess is one worker of the test binary, driven by hand through
// its real pipes, with a listener the test also holds.
type workerProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *lineReader
	ln    *net.TCPListener
}

func startWorkerProcess(t *testing.T, version string, args ...string) *workerProcess {
	t.Helper()
	skipWithoutWorkers(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &workerProcess{cmd: exec.Command(os.Args[0], args...), ln: ln.(*net.TCPListener)}
	w.cmd.Env = append(os.Environ(), workerEnv+"="+version)
	w.cmd.Stderr = os.Stderr
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w.cmd.ExtraFiles = []*os.File{f, inR, outW} // fds 3, 4 and 5, as spawn passes them
	w.stdin, w.out = inW, newLineReader(outR)
	err = w.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.cmd.Process.Kill(); w.cmd.Wait(); inW.Close(); outR.Close() })
	return w
}

func TestWorkerEOFBeforeCommitExitsWithoutAccepting(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "index.html", "hello")
	w := startWorkerProcess(t, strconv.Itoa(protocolVersion), "-dir", dir)
	cfg := &workerConfig{StartupTimeout: 5 * time.Second, runtimeConfig: runtimeConfig{HeaderTimeout: time.Second, IdleTimeout: time.Second, DrainTimeout: time.Second}}
	if err := (&lineWriter{w: w.stdin}).send(message{Type: msgConfig, Version: protocolVersion, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if m, err := w.out.next(); err != nil || m.Type != msgStarting {
		t.Fatalf("first message %+v, %v; want starting", m, err)
	}
	if m, err := w.out.next(); err != nil || m.Type != msgPrepared || m.PID != w.cmd.Process.Pid {
		t.Fatalf("second message %+v, %v; want prepared with the worker's pid", m, err)
	}
	client, err := net.Dial("tcp", w.ln.Addr().String()) // queued, for whoever accepts
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	w.stdin.Close()
	if m, err := w.out.next(); err != io.EOF {
		t.Errorf("after stdin EOF the worker sent %+v, %v; want nothing", m, err)
	}
	if err := w.cmd.Wait(); err != nil {
		t.Errorf("worker exit: %v; want status 0", err)
	}
	// The connection is still queued: the worker never accepted it.
	w.ln.SetDeadline(time.Now().Add(time.Second))
	c, err := w.ln.Accept()
	if err != nil {
		t.Fatalf("the queued connection is gone (%v); want it never accepted by the worker", err)
	}
	c.Close()
}

func TestWorkerRefusesAnotherProtocolVersion(t *testing.T) {
	w := startWorkerProcess(t, "99")
	m, err := w.out.next()
	if err != nil || m.Type != msgFailed || !strings.Contains(m.Reason, "protocol version") {
		t.Fatalf("worker with version 99 sent %+v, %v; want failed naming the protocol version", m, err)
	}
	var exit *exec.ExitError
	if err := w.cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("exit: %v; want status 1", err)
	}
}

func TestWorkerReportsFailedWhenItsDirectoryVanished(t *testing.T) {
	w := startWorkerProcess(t, strconv.Itoa(protocolVersion), "-dir", filepath.Join(t.TempDir(), "gone"))
	cfg := &workerConfig{StartupTimeout: 5 * time.Second}
	(&lineWriter{w: w.stdin}).send(message{Type: msgConfig, Version: protocolVersion, Config: cfg})
	if m, err := w.out.next(); err != nil || m.Type != msgStarting {
		t.Fatalf("first message %+v, %v; want starting", m, err)
	}
	m, err := w.out.next()
	if err != nil || m.Type != msgFailed || !strings.Contains(m.Reason, "gone") {
		t.Fatalf("worker sent %+v, %v; want failed naming the directory", m, err)
	}
}

func TestStartupTimeoutSaysWhatEachWorkerWasDoing(t *testing.T) {
	h, _ := newProbeHarness(t, 3, []string{"-start-fault", "hang", "-fault-worker", "1"}, func(c *supervisorConfig) {
		c.StartupTimeout = 700 * time.Millisecond
	})
	// Worker 2 never reads its config: a fault of the process, not of
	// its App.
	command := h.sup.seam.command
	h.sup.seam.command = func(i int, args []string) (*exec.Cmd, error) {
		cmd, err := command(i, args)
		if i == 2 && err == nil {
			cmd.Env = append(cmd.Env, faultEnv+"="+faultHang)
		}
		return cmd, err
	}
	err := h.sup.Start(context.Background())
	if !errors.Is(err, errStartupTimeout) {
		t.Fatalf("Start() = %v; want the startup timeout", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"worker 1 (pid ", "App.Start still running after",
		"worker 2 (pid ", "had not read its config",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Start() = %v; want it to contain %q", err, want)
		}
	}
	if strings.Contains(msg, "worker 0 ") || strings.Contains(msg, "\n") {
		t.Errorf("Start() = %q; want one line naming only the workers that were not prepared", msg)
	}
	h.assertAllGone()
}

func TestWorkerLinesBeforeItsConfigNameTheWorker(t *testing.T) {
	skipWithoutWorkers(t)
	// A refusal comes before any config: only the environment names it.
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), workerEnv+"=99", workerNameEnv+"=7 2")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("a worker of another protocol version exited 0; want a refusal")
	}
	if !strings.Contains(stderr.String(), "worker=2") || !strings.Contains(stderr.String(), "generation=7") {
		t.Errorf("the refusal's line does not name worker 2 of generation 7:\n%s", stderr.String())
	}
}
