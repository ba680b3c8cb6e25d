package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestBadConfigurationExitsTwoNamingTheFlag(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file.txt")
	writeFile(t, dir, "file.txt", "x")
	id, err := selfSignedIdentity("localhost", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other, err := selfSignedIdentity("localhost", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert := filepath.Join(dir, "cert.pem")
	key := filepath.Join(dir, "key.pem")
	otherKey := filepath.Join(dir, "other.pem")
	writeFile(t, dir, "cert.pem", string(id.CertPEM))
	writeFile(t, dir, "key.pem", string(id.KeyPEM))
	writeFile(t, dir, "other.pem", string(other.KeyPEM))
	// Rows whose run, should the check they test be missing, would go on
	// to serve: the address is in use, so it ends there with exit 1.
	busy := busyAddress(t)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"missing dir":                 {[]string{"-dir", filepath.Join(dir, "nope")}, "-dir:"},
		"dir is a file":               {[]string{"-dir", file}, "-dir: " + file + " is not a directory"},
		"no workers":                  {[]string{"-dir", dir, "-workers", "0"}, "-workers: must be at least 1"},
		"too many workers":            {[]string{"-dir", dir, "-workers", "100000"}, "-workers: at most 1024, got 100000"},
		"hang watch in direct mode":   {[]string{"-dir", dir, "-worker-timeout", "5s"}, "-worker-timeout: direct mode (-workers 1)"},
		"memory bound in direct mode": {[]string{"-dir", dir, "-max-worker-memory", "1GiB"}, "-max-worker-memory: direct mode (-workers 1)"},
		"log format":                  {[]string{"-dir", dir, "-log-format", "xml"}, `-log-format: "xml": want text or json`},
		"log level":                   {[]string{"-dir", dir, "-log-level", "trace"}, `-log-level: "trace": want info or debug`},
		"negative worker timeout":     {[]string{"-dir", dir, "-workers", "2", "-worker-timeout", "-1s"}, "-worker-timeout: must not be negative"},
		"memory bound nonsense":       {[]string{"-dir", dir, "-workers", "2", "-max-worker-memory", "lots"}, "-max-worker-memory"},
		"worker timeout of 3ns":       {[]string{"-dir", dir, "-addr", busy, "-workers", "2", "-worker-timeout", "3ns"}, "-worker-timeout: at least 1s, or 0 for never, got 3ns"},
		"worker timeout of 2ms":       {[]string{"-dir", dir, "-addr", busy, "-workers", "2", "-worker-timeout", "2ms"}, "-worker-timeout: at least 1s, or 0 for never, got 2ms"},
		"worker timeout just below":   {[]string{"-dir", dir, "-addr", busy, "-workers", "2", "-worker-timeout", "999ms"}, "-worker-timeout: at least 1s"},
		"memory bound of 100 bytes":   {[]string{"-dir", dir, "-addr", busy, "-workers", "2", "-max-worker-memory", "100"}, "-max-worker-memory: at least 32MiB, or 0 for never, got 100 bytes"},
		"memory bound of 4MiB":        {[]string{"-dir", dir, "-addr", busy, "-workers", "2", "-max-worker-memory", "4MiB"}, "-max-worker-memory: at least 32MiB, or 0 for never, got 4MiB"},
		"memory bound just below":     {[]string{"-dir", dir, "-addr", busy, "-workers", "2", "-max-worker-memory", "33554431"}, "-max-worker-memory: at least 32MiB"},
		"addr without port":           {[]string{"-dir", dir, "-addr", "localhost"}, "-addr:"},
		"addr port out of range":      {[]string{"-dir", dir, "-addr", "127.0.0.1:99999"}, "-addr:"},
		"negative drain":              {[]string{"-dir", dir, "-drain-timeout", "-1s"}, "-drain-timeout: must not be negative"},
		"force not after drain":       {[]string{"-dir", dir, "-drain-timeout", "5s", "-force-timeout", "5s"}, "-force-timeout: 5s must exceed -drain-timeout"},
		"zero startup timeout":        {[]string{"-dir", dir, "-startup-timeout", "0"}, "-startup-timeout: must be positive"},
		"negative revalidate":         {[]string{"-dir", dir, "-cache-revalidate", "-1s"}, "-cache-revalidate: must not be negative"},
		"negative max conns":          {[]string{"-dir", dir, "-max-conns", "-1"}, "-max-conns: must not be negative"},
		"negative cache":              {[]string{"-dir", dir, "-cache-bytes", "-5"}, "-cache-bytes"},
		"unparsable cache":            {[]string{"-dir", dir, "-cache-bytes", "lots"}, "-cache-bytes"},
		"unparsable duration":         {[]string{"-dir", dir, "-drain-timeout", "soon"}, "-drain-timeout"},
		"cert without key":            {[]string{"-dir", dir, "-tls-cert", cert}, "-tls-key: missing"},
		"key without cert":            {[]string{"-dir", dir, "-tls-key", key}, "-tls-cert: missing"},
		"self-signed and files":       {[]string{"-dir", dir, "-tls-self-signed", "-tls-cert", cert, "-tls-key", key}, "-tls-self-signed: cannot be combined"},
		"mismatched pair":             {[]string{"-dir", dir, "-tls-cert", cert, "-tls-key", otherKey}, "-tls-cert: load key pair"},
		"unreadable cert":             {[]string{"-dir", dir, "-tls-cert", filepath.Join(dir, "none.pem"), "-tls-key", key}, "-tls-cert: read certificate"},
		"missing fallback":            {[]string{"-dir", dir, "-fallback", "/app.html"}, "-fallback: /app.html in -dir"},
		"fallback outside root":       {[]string{"-dir", dir, "-fallback", "../file.txt"}, "-fallback: ../file.txt is outside -dir"},
		"fallback dotfile":            {[]string{"-dir", dir, "-fallback", ".env"}, "-fallback: .env is a dotfile"},
		"fallback directory":          {[]string{"-dir", filepath.Dir(dir), "-fallback", filepath.Base(dir)}, "is not a regular file"},
		"negative max restarts":       {[]string{"-dir", dir, "-workers", "2", "-max-restarts", "-1"}, "-max-restarts: must not be negative"},
		"zero restart window":         {[]string{"-dir", dir, "-workers", "2", "-restart-window", "0s"}, "-restart-window: must be positive"},
		"negative max requests":       {[]string{"-dir", dir, "-workers", "2", "-max-requests", "-1"}, "-max-requests: must not be negative"},
		"negative max worker age":     {[]string{"-dir", dir, "-workers", "2", "-max-worker-age", "-1s"}, "-max-worker-age: must not be negative"},
		"recycling in direct mode":    {[]string{"-dir", dir, "-max-requests", "1000"}, "-max-requests: direct mode (-workers 1) has no worker to replace or recycle"},
		"restarts in direct mode":     {[]string{"-dir", dir, "-workers", "1", "-max-restarts", "0"}, "-max-restarts: direct mode (-workers 1)"},
		"status addr is addr":         {[]string{"-dir", dir, "-addr", "127.0.0.1:8123", "-status-addr", "127.0.0.1:8123"}, "-status-addr: \"127.0.0.1:8123\" is -addr too"},
		"status addr on wildcard":     {[]string{"-dir", dir, "-addr", ":8123", "-status-addr", "127.0.0.1:8123"}, "-status-addr:"},
		"status addr unparsable":      {[]string{"-dir", dir, "-status-addr", "status"}, "-status-addr:"},
		"status addr bad port":        {[]string{"-dir", dir, "-status-addr", "127.0.0.1:70000"}, "-status-addr:"},
		"negative shutdown delay":     {[]string{"-dir", dir, "-shutdown-delay", "-1s"}, "-shutdown-delay: must not be negative"},
		"unknown flag":                {[]string{"-dir", dir, "-bogus"}, "-bogus"},
		"stray argument":              {[]string{"-dir", dir, "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runStatic(tc.args, &stdout, &stderr)
			msg := stderr.String()
			prefix := programName() + ": "
			if code != exitUsage || !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, tc.want) || strings.Count(msg, "\n") != 1 {
				t.Errorf("run(%q) = %d, stderr %q; want %d and one line starting %q, containing %q", tc.args, code, msg, exitUsage, prefix, tc.want)
			}
		})
	}
}

func TestWorkerBoundsAcceptTheirFloorsAndZero(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-worker-timeout", "1s", "-max-worker-memory", "32MiB"},
		{"-worker-timeout", "0", "-max-worker-memory", "0"},
		{"-worker-timeout", "5m", "-max-worker-memory", "4GiB"},
	} {
		args = append([]string{"-dir", dir, "-workers", "2"}, args...)
		fs := flag.NewFlagSet("static", flag.ContinueOnError)
		app := newStaticApp(fs)
		if _, err := parseConfig(args, io.Discard, fs, app.Check); err != nil {
			t.Errorf("parseConfig(%q) = %v; want nil", args, err)
		}
	}
}

// TestHelpAndReadmeNameTheWorkerFloors holds -help and README's flag
// table to the floors config.go checks.
func TestHelpAndReadmeNameTheWorkerFloors(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runStatic([]string{"-help"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("run(-help) = %d; want 0", code)
	}
	help, readme := stdout.String(), string(readDoc(t, "README.md"))
	for flag, floor := range map[string]string{
		"-worker-timeout":    "at least " + minWorkerTimeout.String(),
		"-max-worker-memory": "at least " + (*byteSize)(ptr(int64(minWorkerMemory))).String(),
	} {
		i := strings.Index(help, "  "+flag)
		if i < 0 || !strings.Contains(help[i:min(len(help), i+500)], floor) {
			t.Errorf("-help does not say %s is %s:\n%s", flag, floor, help)
		}
		row := regexp.MustCompile("(?m)^\\| `" + flag + "` \\|.*$").FindString(readme)
		if !strings.Contains(row, floor) {
			t.Errorf("README's row for %s does not say %s: %q", flag, floor, row)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestCacheAtOrAboveTheMemoryBoundIsWarnedAtStart(t *testing.T) {
	for _, tc := range []struct {
		cache, memory string
		warn          bool
	}{
		{"32MiB", "32MiB", true},
		{"64MiB", "48MiB", true},
		{"16MiB", "32MiB", false},
		{"64MiB", "0", false},
	} {
		t.Run(tc.cache+"/"+tc.memory, func(t *testing.T) {
			// A busy address ends the run once the flags are taken.
			var stdout, stderr bytes.Buffer
			args := []string{"-dir", t.TempDir(), "-workers", "2", "-addr", busyAddress(t),
				"-cache-bytes", tc.cache, "-max-worker-memory", tc.memory}
			if code := runStatic(args, &stdout, &stderr); code != exitFailure {
				t.Fatalf("run(%q) = %d; want %d (the address in use):\n%s", args, code, exitFailure, stderr.String())
			}
			warned := regexp.MustCompile(`level=WARN msg="cache budget at or above -max-worker-memory" cache_bytes=` + tc.cache + ` max_worker_memory=` + tc.memory).MatchString(stderr.String())
			if warned != tc.warn {
				t.Errorf("-cache-bytes %s -max-worker-memory %s: warned %v; want %v:\n%s", tc.cache, tc.memory, warned, tc.warn, stderr.String())
			}
		})
	}
}

func TestHelpSaysLimitsArePerWorker(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runStatic([]string{"-help"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("run(-help) = %d; want 0", code)
	}
	help := stdout.String()
	for _, flag := range []string{"-max-conns", "-cache-bytes"} {
		i := strings.Index(help, "  "+flag)
		if i < 0 || !strings.Contains(help[i:min(len(help), i+300)], "PER WORKER") {
			t.Errorf("-help does not say %s is per worker:\n%s", flag, help)
		}
	}
}

// busyAddress returns a loopback address that a listener holds until the
// test ends.
func busyAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

func TestAddressInUseExitsOneNamingIt(t *testing.T) {
	addr := busyAddress(t)
	var stdout, stderr bytes.Buffer
	code := runStatic([]string{"-dir", t.TempDir(), "-addr", addr}, &stdout, &stderr)
	if code != exitFailure || !strings.Contains(stderr.String(), addr) || !strings.Contains(stderr.String(), "in use") {
		t.Errorf("run on a busy address = %d, %q; want %d naming %s", code, stderr.String(), exitFailure, addr)
	}
}

// servery is the real program (the test binary running main's run) in a
// child process.
type servery struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr string // path of its log file
	addr   string
	exited chan struct{}
	status error
}

var (
	servingRe = regexp.MustCompile(`msg=serving .*url=https?://([^/ ]+)/`)
	startedRe = regexp.MustCompile(`msg="worker started" generation=\d+ worker=\d+ pid=(\d+)`)
)

// startServery starts servery with args and waits until it serves. Cleanup
// kills it and every worker it logged, whatever the test did.
func startServery(t *testing.T, args ...string) *servery {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	return launchServery(t, cmd)
}

// launchServery starts cmd, which runs servery's main, and waits until it
// serves.
func launchServery(t *testing.T, cmd *exec.Cmd) *servery {
	t.Helper()
	s := spawnServery(t, cmd)
	deadline := time.Now().Add(10 * time.Second)
	for s.addr == "" {
		if m := servingRe.FindStringSubmatch(s.logs()); m != nil {
			s.addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("servery did not start serving:\n%s", s.logs())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return s
}

// spawnServery starts cmd, which runs servery's main, and returns at once.
func spawnServery(t *testing.T, cmd *exec.Cmd) *servery {
	t.Helper()
	s := &servery{t: t, cmd: cmd, stderr: filepath.Join(t.TempDir(), "stderr.log"), exited: make(chan struct{})}
	logf, err := os.Create(s.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.status = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(s.kill)
	return s
}

func (s *servery) logs() string {
	b, _ := os.ReadFile(s.stderr)
	return string(b)
}

// workerPIDs returns the pids of the workers it started.
func (s *servery) workerPIDs() []int {
	var pids []int
	for _, m := range startedRe.FindAllStringSubmatch(s.logs(), -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	return pids
}

func (s *servery) signal(sig syscall.Signal) {
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}

// wait waits up to within for servery to exit and returns its exit code.
func (s *servery) wait(within time.Duration) int {
	s.t.Helper()
	select {
	case <-s.exited:
		return s.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		s.t.Fatalf("servery still running after %v:\n%s", within, s.logs())
		return -1
	}
}

func (s *servery) kill() {
	s.cmd.Process.Kill()
	<-s.exited
	for _, pid := range s.workerPIDs() {
		killGroup(pid)
	}
	assertNoRaceReports(s.t, s.stderr)
	switch {
	case s.t.Failed():
		s.t.Logf("servery logs:\n%s", s.logs())
	case testing.Verbose(): // to read what happened
		s.t.Logf("servery logs:\n%s", verboseTail([]byte(s.logs())))
	}
}

// assertNoWorkersLeft fails unless every worker it started is gone.
func (s *servery) assertNoWorkersLeft() {
	s.t.Helper()
	for _, pid := range s.workerPIDs() {
		if !waitGone(pid, 2*time.Second) {
			s.t.Errorf("worker pid %d outlived servery", pid)
		}
	}
}

// siteWithBigFile returns a directory with index.html and a 32 MiB file,
// large enough that a client that reads slowly keeps a response in flight.
func siteWithBigFile(t *testing.T) (dir string, size int) {
	dir = t.TempDir()
	size = 32 << 20
	writeFile(t, dir, "index.html", "hello")
	writeFile(t, dir, "big.bin", strings.Repeat("y", size))
	return dir, size
}

// startBigDownload requests big.bin and reads its first 64 KiB, leaving
// the rest of the response in flight.
func startBigDownload(t *testing.T, addr string) io.ReadCloser {
	t.Helper()
	return startDownload(t, addr, "/big.bin")
}

// startDownload requests path and reads the first 64 KiB of its body.
func startDownload(t *testing.T, addr, path string) io.ReadCloser {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	return resp.Body
}

func TestStopSignalLetsInFlightResponseFinish(t *testing.T) {
	for _, tc := range []struct {
		workers string
		sig     syscall.Signal
	}{
		{"1", syscall.SIGTERM}, {"1", syscall.SIGINT}, {"2", syscall.SIGTERM}, {"2", syscall.SIGINT},
	} {
		t.Run(fmt.Sprintf("workers=%s/%v", tc.workers, tc.sig), func(t *testing.T) {
			if tc.workers != "1" {
				skipWithoutWorkers(t)
			}
			dir, size := siteWithBigFile(t)
			s := startServery(t, "-dir", dir, "-workers", tc.workers)
			body := startBigDownload(t, s.addr)
			defer body.Close()
			s.signal(tc.sig)
			time.Sleep(200 * time.Millisecond) // the stop is under way
			n, err := io.Copy(io.Discard, body)
			if err != nil || int(n)+64<<10 != size {
				t.Errorf("in-flight response: %d bytes, %v; want all %d", int(n)+64<<10, err, size)
			}
			if code := s.wait(10 * time.Second); code != exitOK {
				t.Errorf("exit status %d; want 0", code)
			}
			s.assertNoWorkersLeft()
		})
	}
}

func TestSecondSignalSkipsTheDrain(t *testing.T) {
	for _, workers := range []string{"1", "2"} {
		t.Run("workers="+workers, func(t *testing.T) {
			if workers != "1" {
				skipWithoutWorkers(t)
			}
			dir, _ := siteWithBigFile(t)
			s := startServery(t, "-dir", dir, "-workers", workers, "-drain-timeout", "60s", "-force-timeout", "90s")
			body := startBigDownload(t, s.addr) // and never read the rest
			defer body.Close()
			s.signal(syscall.SIGINT)
			time.Sleep(300 * time.Millisecond)
			s.signal(syscall.SIGINT)
			if code := s.wait(10 * time.Second); code != exitOK {
				t.Errorf("exit status %d; want 0", code)
			}
			s.assertNoWorkersLeft()
		})
	}
}

func TestRealBinaryExitsOneWhenAWorkerIsLost(t *testing.T) {
	skipWithoutWorkers(t)
	s := startServery(t, "-dir", t.TempDir(), "-workers", "2", "-max-restarts", "0")
	pids := s.workerPIDs()
	if len(pids) != 2 {
		t.Fatalf("logged worker pids %v; want 2", pids)
	}
	kill(pids[0])
	if code := s.wait(10 * time.Second); code != exitFailure {
		t.Errorf("exit status %d; want 1", code)
	}
	s.assertNoWorkersLeft()
}

func TestSelfSignedIdentityServesHTTPS(t *testing.T) {
	s := startServery(t, "-dir", t.TempDir(), "-tls-self-signed")
	conn, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st := conn.ConnectionState()
	if st.Version < tls.VersionTLS12 {
		t.Errorf("TLS version %x; want at least 1.2", st.Version)
	}
	if !strings.Contains(s.logs(), "sha256=") {
		t.Errorf("the fingerprint was not logged:\n%s", s.logs())
	}
}

func TestOneTLSIdentityAcrossWorkers(t *testing.T) {
	skipWithoutWorkers(t)
	// Through the real binary, so the identity is the one makeIdentity
	// generates in the parent.
	s := startServery(t, "-dir", t.TempDir(), "-tls-self-signed", "-workers", "4")
	pids := s.workerPIDs()
	if len(pids) != 4 {
		t.Fatalf("%d workers ready (%v); want 4:\n%s", len(pids), pids, s.logs())
	}
	// Each worker is asked alone, its siblings paused, so every one is
	// checked whatever the kernel's spread.
	seen := map[string]int{}
	for i := range pids {
		onlyWorker(pids, i, func() {
			conn, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true})
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(conn.ConnectionState().PeerCertificates[0].Raw)
			seen[strings.ToUpper(hex.EncodeToString(sum[:]))]++
			conn.Close()
		})
	}
	if len(seen) != 1 {
		t.Errorf("saw %d certificates across %d workers; want 1", len(seen), len(pids))
	}
	for fp := range seen {
		if logged := colonHex(fp); !strings.Contains(s.logs(), "sha256="+logged) {
			t.Errorf("the served certificate %s is not the one the parent logged:\n%s", logged, s.logs())
		}
	}
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Fatalf("exit status %d; want 0", code)
	}
	answering := 0
	for _, m := range countersRe.FindAllStringSubmatch(s.logs(), -1) {
		if m[1] != "0" {
			answering++
		}
	}
	if answering != len(pids) {
		t.Errorf("%d workers accepted connections; want all %d, each asked alone:\n%s", answering, len(pids), s.logs())
	}
}

// countersRe matches a worker's final counters in the parent's log.
var countersRe = regexp.MustCompile(`msg="worker counters" generation=\d+ worker=\d+ pid=\d+ accepted=(\d+)`)

// colonHex writes upper-case hex as colon-separated byte pairs, the way
// servery logs a fingerprint.
func colonHex(h string) string {
	var pairs []string
	for i := 0; i+1 < len(h); i += 2 {
		pairs = append(pairs, h[i:i+2])
	}
	return strings.Join(pairs, ":")
}

func TestCacheBytesAcceptsUnitsAndRefusesNonsense(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1048576": 1 << 20, "512KiB": 512 << 10, "64MiB": 64 << 20, "1GiB": 1 << 30,
		"64MB": 64e6, "1GB": 1e9, "512K": 512 << 10, "2M": 2 << 20, "100B": 100,
	} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"-1", "1.5MiB", "lots", "", "MiB", "99999999999GiB"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) = nil, %d; want an error", in, b)
		}
	}
	for n, want := range map[int64]string{0: "0", 64 << 20: "64MiB", 1 << 30: "1GiB", 1000: "1000", 3 << 10: "3KiB"} {
		if got := (*byteSize)(&n).String(); got != want {
			t.Errorf("String(%d) = %q; want %q", n, got, want)
		}
	}
}

// TestSizeErrorAndREADMEListEveryAcceptedUnit: each unit byteSize takes
// (64M as 64MiB too) is named by its error and by README's row for
// -cache-bytes, to which -max-worker-memory's points, so none is accepted
// undocumented.
func TestSizeErrorAndREADMEListEveryAcceptedUnit(t *testing.T) {
	var b byteSize
	err := b.Set("lots")
	if err == nil {
		t.Fatal(`Set("lots") = nil; want an error`)
	}
	readme := string(readDoc(t, "README.md"))
	word := func(text, unit string) bool {
		return regexp.MustCompile(`(^|[^A-Za-z])` + unit + `($|[^A-Za-z])`).MatchString(text)
	}
	for _, u := range sizeUnits {
		if err := b.Set("3" + u.suffix); err != nil || int64(b) != 3*u.mult {
			t.Errorf("Set(%q) = %d, %v; want %d", "3"+u.suffix, b, err, 3*u.mult)
		}
		if !word(err.Error(), u.suffix) {
			t.Errorf("the size error does not name %s, which is accepted: %v", u.suffix, err)
		}
		if row := regexp.MustCompile("(?m)^\\| `-cache-bytes` \\|.*$").FindString(readme); !word(row, u.suffix) {
			t.Errorf("README's row for -cache-bytes does not name %s, which is accepted: %q", u.suffix, row)
		}
	}
	if row := regexp.MustCompile("(?m)^\\| `-max-worker-memory` \\|.*$").FindString(readme); !strings.Contains(row, "as `-cache-bytes` takes") {
		t.Errorf("README's row for -max-worker-memory does not point to -cache-bytes's units: %q", row)
	}
}

func TestSignalDuringStartupIsACleanStop(t *testing.T) {
	skipWithoutWorkers(t)
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-dir", t.TempDir(), "-workers", "3")
	// Every worker reports prepared late, so the signal lands in the barrier.
	cmd.Env = append(os.Environ(), mainEnv+"=1", faultEnv+"="+faultSlowPrepared, delayEnv+"=5s")
	s := spawnServery(t, cmd)
	deadline := time.Now().Add(10 * time.Second)
	for len(s.workerPIDs()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("workers did not start:\n%s", s.logs())
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.signal(syscall.SIGTERM)
	if code := s.wait(5 * time.Second); code != exitOK {
		t.Errorf("exit status %d after SIGTERM during startup; want 0 (a clean rollback)", code)
	}
	if strings.Contains(s.logs(), "msg=ready") {
		t.Errorf("a worker became ready after the stop:\n%s", s.logs())
	}
	s.assertNoWorkersLeft()
}

func TestAccessLogWritesOneCombinedLinePerRequest(t *testing.T) {
	for _, workers := range []string{"1", "2"} {
		t.Run("workers="+workers, func(t *testing.T) {
			if workers != "1" {
				skipWithoutWorkers(t)
			}
			dir := t.TempDir()
			writeFile(t, dir, "index.html", "hello")
			s := startServery(t, "-dir", dir, "-workers", workers, "-access-log", "-")
			req, _ := http.NewRequest("GET", "http://"+s.addr+"/index.html", nil)
			req.Header.Set("Referer", "http://example.com/from")
			req.Header.Set("User-Agent", "probe/1.0")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			line := regexp.MustCompile(`(?m)^127\.0\.0\.1:\d+ - - \[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] "GET /index\.html HTTP/1\.1" 200 5 "http://example\.com/from" "probe/1\.0" \d+us$`)
			for deadline := time.Now().Add(5 * time.Second); !line.MatchString(s.logs()); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no access log line of the combined format for the request:\n%s", s.logs())
				}
			}
			// HEAD and 304 write no body: 0 bytes, whatever Content-Length says.
			head, _ := http.NewRequest("HEAD", "http://"+s.addr+"/index.html", nil)
			cond, _ := http.NewRequest("GET", "http://"+s.addr+"/index.html?again", nil)
			cond.Header.Set("If-None-Match", resp.Header.Get("ETag"))
			for _, r := range []*http.Request{head, cond} {
				resp, err := http.DefaultClient.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			for _, want := range []string{`"HEAD /index\.html HTTP/1\.1" 200 0 `, `"GET /index\.html\?again HTTP/1\.1" 304 0 `} {
				waitLog(t, s, want)
			}
			s.signal(syscall.SIGTERM)
			s.wait(10 * time.Second)
		})
	}
}

// TestEveryFlagsDefaultIsTheREADMEs holds each flag's default, as -help
// prints it, to the default column of README's flag tables, and both to
// the same set of flags: a default changed in one place alone fails.
func TestEveryFlagsDefaultIsTheREADMEs(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runStatic([]string{"-help"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("run(-help) = %d; want 0", code)
	}
	help := map[string]string{} // flag: its default, "" for the zero value
	entry := regexp.MustCompile(`(?m)^  -(\S+)(?: \S+)?\n((?:    .*\n?)*)`)
	for _, m := range entry.FindAllStringSubmatch(stdout.String(), -1) {
		def := ""
		if d := regexp.MustCompile(`\(default (.*)\)\s*$`).FindStringSubmatch(m[2]); d != nil {
			def = strings.Trim(d[1], `"`)
		}
		help[m[1]] = def
	}
	readme := map[string]string{}
	row := regexp.MustCompile("(?m)^\\| (`-[^|]*) \\|([^|]*)\\|")
	for _, m := range row.FindAllStringSubmatch(string(readDoc(t, "README.md")), -1) {
		def := strings.TrimSpace(regexp.MustCompile(`\(.*\)`).ReplaceAllString(m[2], ""))
		def = strings.Trim(def, "`")
		for _, name := range regexp.MustCompile("`-([a-z-]+)`").FindAllStringSubmatch(m[1], -1) {
			readme[name[1]] = def
		}
	}
	if len(help) < 20 {
		t.Fatalf("read %d flags from -help; the parse is broken:\n%s", len(help), stdout.String())
	}
	for name, def := range help {
		doc, ok := readme[name]
		if !ok {
			t.Errorf("-%s (default %q) has no row in README's flag tables", name, def)
			continue
		}
		if !sameDefault(def, doc) {
			t.Errorf("-%s: -help's default is %q, README's %q", name, def, doc)
		}
	}
	for name := range readme {
		if _, ok := help[name]; !ok {
			t.Errorf("README's flag table has -%s, which -help does not list", name)
		}
	}
}

// sameDefault reports whether -help's default and README's mean the same:
// a zero value README writes as none, false, 0 or nothing; durations and
// sizes compared by value (1m0s is 1m).
func sameDefault(help, doc string) bool {
	zero := func(s string) bool { return s == "" || s == "none" || s == "false" || s == "0" }
	if zero(help) || zero(doc) {
		return zero(help) && zero(doc)
	}
	if a, err := time.ParseDuration(help); err == nil {
		b, err := time.ParseDuration(doc)
		return err == nil && a == b
	}
	var a, b byteSize
	if a.Set(help) == nil && b.Set(doc) == nil {
		return a == b
	}
	return help == doc
}
