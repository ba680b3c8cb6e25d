package main

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// More reload claims, each through the real program: what a reload picks
// up (a renewed certificate, a replaced executable), what a reload that
// cannot pick it up leaves alone, and how a stop or a parent's death in
// the middle of a reload ends.

// startHeldServery starts servery whose workers are held-prepared faults
// on gate: the first generation starts normally, and any generation
// started while gate exists stops short of prepared until it is removed.
func startHeldServery(t *testing.T, gate string, args ...string) *servery {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", faultEnv+"="+faultHeldPrepared, gateEnv+"="+gate)
	return launchServery(t, cmd)
}

// generationPIDs returns the pids of the workers servery logged as
// started for generation gen.
func generationPIDs(s *servery, gen int) []int {
	re := regexp.MustCompile(`msg="worker started" generation=` + strconv.Itoa(gen) + ` worker=\d+ pid=(\d+)`)
	return logPIDs(s, re)
}

var heldRe = regexp.MustCompile(`msg="holding prepared" fault=` + faultHeldPrepared + ` pid=(\d+)`)

// logPIDs returns the pids that re's first group captures in servery's log.
func logPIDs(s *servery, re *regexp.Regexp) []int {
	var pids []int
	for _, m := range re.FindAllStringSubmatch(s.logs(), -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	return pids
}

// holdNextGeneration closes gate, asks for a reload and waits until every
// one of the workers workers of generation gen holds its prepared message:
// from then on, until gate is removed, the reload is certainly in the
// middle of its barrier. It returns their pids. Cleanup removes the gate,
// so held workers a failed test leaves go on to exit.
func holdNextGeneration(t *testing.T, s *servery, gate string, gen, workers int) []int {
	t.Helper()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(gate) })
	s.signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		started := generationPIDs(s, gen)
		held := 0
		for _, pid := range logPIDs(s, heldRe) {
			if slices.Contains(started, pid) {
				held++
			}
		}
		if len(started) == workers && held == workers {
			return started
		}
		if time.Now().After(deadline) {
			t.Fatalf("generation %d: %d workers started, %d holding prepared; want %d each:\n%s", gen, len(started), held, workers, s.logs())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSecondSIGTERMDuringAReloadSkipsTheDrain(t *testing.T) {
	skipWithoutWorkers(t)
	dir, _ := siteWithBigFile(t)
	gate := filepath.Join(t.TempDir(), "gate")
	// A drain that could not finish before the test's bound: only the
	// second signal can end it in time.
	s := startHeldServery(t, gate, "-dir", dir, "-workers", "2", "-drain-timeout", "60s", "-force-timeout", "90s")
	body := startBigDownload(t, s.addr) // in flight on generation 1, never read further
	defer body.Close()
	holdNextGeneration(t, s, gate, 2, 2)

	s.signal(syscall.SIGTERM)
	waitLog(t, s, `msg="stop requested"`)
	s.signal(syscall.SIGTERM)
	waitLog(t, s, `msg="second signal: skipping the rest of the drain"`)
	// The new generation is held and ignores the rollback's SIGTERM: the
	// reload cannot have ended yet, so the second signal came during it.
	if strings.Contains(s.logs(), `msg="reload failed, still serving"`) {
		t.Fatalf("the reload ended before the second signal; the test needs it in progress:\n%s", s.logs())
	}
	os.Remove(gate) // the new generation may now be rolled back

	if code := s.wait(30 * time.Second); code != exitOK {
		t.Errorf("exit status %d after two SIGTERMs during a reload; want 0", code)
	}
	logs := s.logs()
	for _, want := range []string{
		`msg="reload cut short by the stop, rolled back" generation=2`,
		// The in-flight download kept a worker draining; the skipped
		// drain terminated it at once instead of after -drain-timeout.
		`msg="worker outlived deadline" generation=1 worker=\d+ pid=\d+ action=terminate`,
	} {
		if !regexp.MustCompile(want).MatchString(logs) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
	s.assertNoWorkersLeft()
	if !portRefusesWithin(s.addr, 2*time.Second) {
		t.Errorf("port %s still accepts after servery exited", s.addr)
	}
}

// tlsFiles writes id's certificate and key to cert and key as a renewal
// does: each written beside its place, then renamed into it.
func tlsFiles(t *testing.T, cert, key string, certPEM, keyPEM []byte) {
	t.Helper()
	for path, b := range map[string][]byte{cert: certPEM, key: keyPEM} {
		if err := os.WriteFile(path+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{cert, key} {
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
}

// newIdentity returns a fresh self-signed identity and its leaf in DER.
func newIdentity(t *testing.T) (*tlsIdentity, []byte) {
	t.Helper()
	id, err := selfSignedIdentity("localhost", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(id.CertPEM)
	if block == nil {
		t.Fatal("no PEM block in a generated certificate")
	}
	return id, block.Bytes
}

// assertServesCertificate dials addr n times, each a new connection with a
// full handshake, and wants leaf every time.
func assertServesCertificate(t *testing.T, addr string, leaf []byte, what string) {
	t.Helper()
	for i := range 8 {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("%s: dial %d: %v", what, i, err)
		}
		got := conn.ConnectionState().PeerCertificates[0].Raw
		conn.Close()
		if !bytes.Equal(got, leaf) {
			t.Fatalf("%s: connection %d got another certificate than the one expected", what, i)
		}
	}
}

func TestReloadServesTheRenewedCertificateAndKeepsItOnABadPair(t *testing.T) {
	for _, workers := range []string{"1", "2"} {
		t.Run("workers="+workers, func(t *testing.T) {
			if workers != "1" {
				skipWithoutWorkers(t)
			}
			dir := t.TempDir()
			cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
			first, firstLeaf := newIdentity(t)
			tlsFiles(t, cert, key, first.CertPEM, first.KeyPEM)
			s := startServery(t, "-dir", t.TempDir(), "-workers", workers, "-tls-cert", cert, "-tls-key", key)
			assertServesCertificate(t, s.addr, firstLeaf, "before the renewal")

			renewed, renewedLeaf := newIdentity(t)
			tlsFiles(t, cert, key, renewed.CertPEM, renewed.KeyPEM)
			s.signal(syscall.SIGHUP)
			waitLog(t, s, `msg="generation retired" generation=1`)
			assertServesCertificate(t, s.addr, renewedLeaf, "after the renewal and a reload")

			// A pair that does not load: the renewed certificate with
			// another key. The reload fails and changes nothing.
			serving := generationPIDs(s, 2)
			other, _ := newIdentity(t)
			tlsFiles(t, cert, key, renewed.CertPEM, other.KeyPEM)
			s.signal(syscall.SIGHUP)
			waitLog(t, s, `msg="reload failed, still serving" generation=3 serving=2 err=.*-tls-cert`)
			assertServesCertificate(t, s.addr, renewedLeaf, "after a reload with a bad pair")
			if started := generationPIDs(s, 3); len(started) != 0 {
				t.Errorf("a reload with a bad pair started workers %v", started)
			}
			for _, pid := range serving {
				if gone(pid) {
					t.Errorf("serving worker pid %d is gone after a failed reload", pid)
				}
			}
			s.signal(syscall.SIGTERM)
			if code := s.wait(10 * time.Second); code != exitOK {
				t.Errorf("exit status %d; want 0", code)
			}
			s.assertNoWorkersLeft()
		})
	}
}

// copyExecutable copies the test binary to path, as an install does: a new
// file beside it, renamed over it, so path gets a new inode and a process
// running the old one keeps it.
func copyExecutable(t *testing.T, path string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	replaceFile(t, path, src)
}

// replaceFile writes what r reads to a new executable file beside path
// and renames it over path.
func replaceFile(t *testing.T, path string, r io.Reader) {
	t.Helper()
	dst, err := os.OpenFile(path+".new", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, r); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// startInstalled starts the program installed at exe (a copy of the test
// binary) as servery.
func startInstalled(t *testing.T, exe string, args ...string) *servery {
	t.Helper()
	cmd := exec.Command(exe, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	return launchServery(t, cmd)
}

// runsFile reports whether process pid runs the file now at path: its
// /proc/<pid>/exe names path, not a deleted file, and is path's inode.
func runsFile(t *testing.T, pid int, path string) (bool, string) {
	t.Helper()
	exe := fmt.Sprintf("/proc/%d/exe", pid)
	link, err := os.Readlink(exe)
	if err != nil {
		return false, err.Error()
	}
	a, err := os.Stat(exe)
	if err != nil {
		return false, err.Error()
	}
	b, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return link == path && os.SameFile(a, b), link
}

func TestDirectReloadWarnsThatTheReplacedExecutableDoesNotRun(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "servery")
	copyExecutable(t, exe)
	s := startInstalled(t, exe, "-dir", t.TempDir())
	s.signal(syscall.SIGHUP)
	waitLog(t, s, `msg=reloaded generation=2`)
	if strings.Contains(s.logs(), "executable changed") {
		t.Errorf("a reload with the executable unchanged warned of a change")
	}
	copyExecutable(t, exe) // the new release, a new inode at the same path
	s.signal(syscall.SIGHUP)
	waitLog(t, s, `msg=reloaded generation=3`)
	if !regexp.MustCompile(`level=WARN msg="executable changed since start: a reload in direct mode does not run it; restart servery, or serve with -workers 2 or more.*" generation=3 path=`).MatchString(s.logs()) {
		t.Errorf("no warning that the new executable does not run:\n%s", s.logs())
	}
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Errorf("exit status %d; want 0", code)
	}
}

func TestReloadRunsTheReplacedExecutableInTheNewWorkers(t *testing.T) {
	skipWithoutWorkers(t)
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/<pid>/exe, which only Linux has")
	}
	exe := filepath.Join(t.TempDir(), "servery")
	copyExecutable(t, exe)
	s := startInstalled(t, exe, "-dir", t.TempDir(), "-workers", "2")
	old := generationPIDs(s, 1)
	for _, pid := range old {
		if ok, link := runsFile(t, pid, exe); !ok {
			t.Fatalf("generation 1 worker pid %d runs %q; want %s", pid, link, exe)
		}
	}

	copyExecutable(t, exe) // the new release, a new inode at the same path
	s.signal(syscall.SIGHUP)
	waitLog(t, s, `msg="generation retired" generation=1`)
	fresh := generationPIDs(s, 2)
	if len(fresh) != 2 {
		t.Fatalf("generation 2 workers %v; want 2", fresh)
	}
	for _, pid := range fresh {
		if ok, link := runsFile(t, pid, exe); !ok {
			t.Errorf("generation 2 worker pid %d runs %q; want the replaced file %s", pid, link, exe)
		}
	}
	// The parent keeps its own code until a restart.
	if link, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", s.cmd.Process.Pid)); link != exe+" (deleted)" {
		t.Errorf("servery itself runs %q; want the replaced file, %s (deleted)", link, exe)
	}
	if code, _, err := get(s.addr, "/"); err != nil || code != 404 {
		t.Errorf("GET / = %d %v; want the new generation serving (404 for an empty site)", code, err)
	}
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Errorf("exit status %d; want 0", code)
	}
	s.assertNoWorkersLeft()
}

func TestRespawnRunsItsGenerationsExecutableAfterTheFileWasReplaced(t *testing.T) {
	skipWithoutWorkers(t)
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/<pid>/exe, which only Linux has")
	}
	exe := filepath.Join(t.TempDir(), "servery")
	copyExecutable(t, exe)
	s := startInstalled(t, exe, "-dir", t.TempDir(), "-workers", "2")
	old := generationPIDs(s, 1)
	copyExecutable(t, exe) // a new release, not yet reloaded
	kill(old[0])
	waitLog(t, s, fmt.Sprintf(`msg="worker respawned" generation=1 worker=0 old_pid=%d`, old[0]))
	pids := generationPIDs(s, 1)
	fresh := pids[len(pids)-1]
	if link, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", fresh)); link != exe+" (deleted)" {
		t.Errorf("the replacement, pid %d, runs %q; want its generation's build, %s (deleted)", fresh, link, exe)
	}
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Errorf("exit status %d; want 0", code)
	}
	s.assertNoWorkersLeft()
}

// buildWithProtocolVersion builds servery from this package's sources
// with protocolVersion set to version, and returns the executable's path.
// It skips the test on a machine without the go command.
func buildWithProtocolVersion(t *testing.T, version int) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	src := t.TempDir()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "go.mod")
	const decl = "const protocolVersion = "
	changed := false
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if i := strings.Index(text, "\n"+decl); i >= 0 {
			end := i + 1 + len(decl) + strings.IndexByte(text[i+1+len(decl):], '\n')
			text = text[:i+1] + decl + strconv.Itoa(version) + text[end:]
			changed = true
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !changed {
		t.Fatalf("no %q line in the sources", decl)
	}
	cmd := exec.Command(goCmd, "build", "-o", "servery", ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(src, "servery")
}

func TestIncompatibleReplacementExecutableFailsTheReload(t *testing.T) {
	skipWithoutWorkers(t)
	exe := filepath.Join(t.TempDir(), "servery")
	copyExecutable(t, exe)
	dir := t.TempDir()
	writeFile(t, dir, "index.html", "old release")
	s := startInstalled(t, exe, "-dir", dir, "-workers", "2")
	serving := generationPIDs(s, 1)

	// The next release, built from these sources with the protocol
	// version one higher: its workers refuse this parent's.
	next := buildWithProtocolVersion(t, protocolVersion+1)
	f, err := os.Open(next)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	replaceFile(t, exe, f)
	// As the log quotes it: protocol version \"5\", want 6.
	reason := fmt.Sprintf(`protocol version \"%d\", want %d`, protocolVersion, protocolVersion+1)
	s.signal(syscall.SIGHUP)
	waitLog(t, s, `msg="reload failed, still serving" generation=2 serving=1 err=".*`+regexp.QuoteMeta(reason))
	if n := len(generationPIDs(s, 2)); n == 0 {
		t.Errorf("no worker of the replacement was started; the reload failed for another reason:\n%s", s.logs())
	}
	if strings.Contains(s.logs(), `msg="worker draining" worker=`) || strings.Contains(s.logs(), `msg=reloaded generation=2`) {
		t.Errorf("the serving generation was retired by a failed reload:\n%s", s.logs())
	}
	for _, pid := range serving {
		if gone(pid) {
			t.Errorf("serving worker pid %d is gone after a failed reload", pid)
		}
	}
	for i := range 10 {
		if code, body, err := get(s.addr, "/"); err != nil || code != 200 || body != "old release" {
			t.Fatalf("GET / %d after a failed reload = %d %q %v; want the serving generation's answer", i, code, body, err)
		}
	}
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Errorf("exit status %d; want 0", code)
	}
	s.assertNoWorkersLeft()
}
