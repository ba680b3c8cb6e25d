//go:build linux

// procs.go starts, pins, waits for and stops the servers, and makes sure
// that no process the run started outlives it: servery's workers lead
// their own sessions, so a process-group signal alone would miss them.

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// tracker holds the pids of the process trees the run has started and not
// yet seen end. Once endAll has begun, a process started later (the run's
// goroutine may still be starting one when a signal ends the run) is
// killed as soon as it is added.
type tracker struct {
	mu     sync.Mutex
	pids   map[int]bool
	ending bool
}

func newTracker() *tracker { return &tracker{pids: map[int]bool{}} }

// add tracks pid, or kills its tree at once if the run is ending.
func (t *tracker) add(pid int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ending {
		signalTree(syscall.SIGKILL, pid)
		return
	}
	t.pids[pid] = true
}

// remove forgets pid, which has ended.
func (t *tracker) remove(pid int) { t.mu.Lock(); delete(t.pids, pid); t.mu.Unlock() }

// endAll terminates every tracked tree, kills what is left half a second
// later, then kills any process still running a binary from tmp or naming
// tmp on its command line (nginx -c tmp/...): only this run's can.
func (t *tracker) endAll(tmp string) {
	t.mu.Lock()
	t.ending = true
	var pids []int
	for pid := range t.pids {
		pids = append(pids, pid)
	}
	t.mu.Unlock()
	for _, pid := range pids {
		signalTree(syscall.SIGTERM, pid)
	}
	if len(pids) > 0 {
		time.Sleep(500 * time.Millisecond)
	}
	for _, pid := range pids {
		signalTree(syscall.SIGKILL, pid)
		t.remove(pid)
	}
	if tmp != "" {
		sweep(tmp)
	}
}

// sweep kills every process under dir.
func sweep(dir string) {
	for _, pid := range under(dir) {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		say("cleanup: killing leftover pid %d (%s)", pid, exe)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// under lists the running processes whose executable is under dir or
// whose command line names a path under it: in the run's own directory,
// only the run's can be.
func under(dir string) []int {
	prefix := dir + "/"
	var out []int
	for _, pid := range allPIDs() {
		if pid == os.Getpid() {
			continue
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.HasPrefix(exe, prefix) || bytes.Contains(cmdline, []byte(prefix)) {
			out = append(out, pid)
		}
	}
	return out
}

func allPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procStat is what the run reads of /proc/PID/stat.
type procStat struct {
	state byte
	ppid  int
	ticks uint64 // utime + stime, in clock ticks
	start uint64 // start time in ticks since boot, which tells a reused pid
	ok    bool
}

// readStat reads /proc/PID/stat; ok is false once the process is gone.
func readStat(pid int) procStat {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}
	}
	// The command name is in parentheses and may hold spaces: the fields
	// start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}
	}
	num := func(s string) uint64 { n, _ := strconv.ParseUint(s, 10, 64); return n }
	return procStat{state: f[0][0], ppid: int(num(f[1])), ticks: num(f[11]) + num(f[12]), start: num(f[19]), ok: true}
}

// alive reports whether pid runs (not a zombie) and, given start, is
// still the same process.
func alive(pid int, start uint64) bool {
	st := readStat(pid)
	return st.ok && st.state != 'Z' && st.state != 'X' && (start == 0 || st.start == start)
}

// descendants returns pid's children, their children, and so on.
func descendants(pid int) []int {
	children := map[int][]int{}
	for _, p := range allPIDs() {
		if st := readStat(p); st.ok {
			children[st.ppid] = append(children[st.ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// signalTree signals every descendant of pid and the groups they lead,
// then pid and its own group.
func signalTree(sig syscall.Signal, pid int) {
	for _, d := range descendants(pid) {
		syscall.Kill(-d, sig)
		syscall.Kill(d, sig)
	}
	syscall.Kill(-pid, sig)
	syscall.Kill(pid, sig)
}

// treeTicks is the CPU time, in clock ticks, of pid and its descendants.
func treeTicks(pid int) uint64 {
	t := readStat(pid).ticks
	for _, d := range descendants(pid) {
		t += readStat(d).ticks
	}
	return t
}

// runBounded runs argv in a session of its own, tracked, with its output
// to the file out, and kills its whole tree after limit; it returns how
// the process ended.
func (b *bench) runBounded(out string, limit time.Duration, argv ...string) (*os.ProcessState, error) {
	f, err := os.Create(out)
	must(err)
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { signalTree(syscall.SIGKILL, cmd.Process.Pid); return nil }
	if err := cmd.Start(); err != nil {
		die("%s: %v", argv[0], err)
	}
	b.procs.add(cmd.Process.Pid)
	err = cmd.Wait()
	b.procs.remove(cmd.Process.Pid)
	return cmd.ProcessState, err
}

// server is one started server: its process, its log, its port.
type server struct {
	name  string
	kind  string
	port  int
	log   string
	pid   int
	start uint64
	cmd   *exec.Cmd
	done  chan struct{}
}

// serverCommand is the argv and extra environment of a server of kind
// with w workers (or GOMAXPROCS=w) on port.
func (b *bench) serverCommand(kind string, w, port int) (argv, env []string) {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	n := strconv.Itoa(w)
	gomaxprocs := []string{"GOMAXPROCS=" + n}
	switch kind {
	case "servery":
		return []string{b.bin["servery"], "-workers", n, "-dir", b.site, "-addr", addr,
			"-status-addr", "127.0.0.1:" + strconv.Itoa(port+1000)}, nil
	case "servery-accesslog":
		return []string{b.bin["servery"], "-workers", n, "-dir", b.site, "-addr", addr,
			"-status-addr", "127.0.0.1:" + strconv.Itoa(port+1000),
			"-access-log", filepath.Join(b.tmp, "logs", "access-"+strconv.Itoa(port)+".log")}, nil
	case "servery-before":
		return []string{b.cfg.before, "-workers", n, "-dir", b.site, "-addr", addr,
			"-status-addr", "127.0.0.1:" + strconv.Itoa(port+1000)}, nil
	case "servery-lifetime":
		return []string{b.bin["servery"], "-workers", n, "-dir", b.site, "-addr", addr,
			"-max-requests", strconv.Itoa(lifetimeRequests)}, nil
	case "nethttp":
		return []string{b.bin["baseline"], "fileserver", addr, b.site}, gomaxprocs
	case "nethttp-default":
		return []string{b.bin["baseline"], "fileserver", addr, b.site}, nil
	case "barehttp":
		return []string{b.bin["baseline"], "bare", addr, filepath.Join(b.site, "1k.html")}, gomaxprocs
	case "app":
		return []string{b.bin["app"], "-workers", n, "-body", filepath.Join(b.site, "1k.html"), "-addr", addr}, nil
	case "nginx":
		return []string{b.nginx, "-p", filepath.Join(b.tmp, "nginx") + "/", "-e", filepath.Join(b.tmp, "nginx", "error.log"),
			"-c", b.nginxConf(w, port, false)}, nil
	case "servery-tls":
		return []string{b.bin["servery"], "-workers", n, "-dir", b.site, "-addr", addr,
			"-tls-cert", b.tls.cert, "-tls-key", b.tls.key}, nil
	case "baretls":
		return []string{b.bin["baseline"], "baretls", addr, b.tls.cert, b.tls.key,
			filepath.Join(b.site, "1k.html"), filepath.Join(b.site, "64k.html")}, gomaxprocs
	case "nginx-tls":
		return []string{b.nginx, "-p", filepath.Join(b.tmp, "nginx") + "/", "-e", filepath.Join(b.tmp, "nginx", "error.log"),
			"-c", b.nginxConf(w, port, true)}, nil
	case "caddy":
		return []string{b.caddy, "run", "--config", b.caddyConf(port), "--adapter", "caddyfile"},
			append(gomaxprocs, b.caddyEnv()...)
	}
	die("unknown server kind %q", kind)
	return nil, nil
}

// startServer starts a server in a session of its own, pinned to cpus
// (every process it starts inherits the pinning) unless cpus is empty,
// and returns once it answers GET /1k.html with the site's bytes.
func (b *bench) startServer(name, kind string, w int, cpus string, port int) *server {
	argv, env := b.serverCommand(kind, w, port)
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond); err == nil {
		c.Close()
		die("port %d is already answering before starting %s", port, name)
	}
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	s := &server{name: name, kind: kind, port: port, log: b.logPath(name + ".log"), done: make(chan struct{})}
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	must(err)
	defer logf.Close()
	fmt.Fprintf(logf, "### %s start: %s\n", time.Now().Format("15:04:05.000"), strings.Join(argv, " "))
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := s.cmd.Start(); err != nil {
		die("%s: start: %v", name, err)
	}
	s.pid = s.cmd.Process.Pid
	s.start = readStat(s.pid).start
	b.procs.add(s.pid)
	go func() { s.cmd.Wait(); close(s.done) }()
	b.waitReady(s)
	return s
}

// logPath names a file in the run's log directory.
func (b *bench) logPath(name string) string { return filepath.Join(b.tmp, "logs", name) }

// client returns an HTTP client for probes: no keep-alive, and for HTTPS
// the run's certificate as the only root.
func (b *bench) client(h2 bool) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true, Proxy: nil}
	if b.tls != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(b.tls.certPEM)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
		if h2 {
			tr.ForceAttemptHTTP2 = true
		} else {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Second}
}

// get fetches url and returns its status, protocol major version and body.
func get(c *http.Client, url string) (int, int, []byte, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.ProtoMajor, body, err
}

// waitReady waits up to 15 s for s to answer /1k.html with the site's
// exact bytes (over HTTPS for the TLS kinds); a server that exits first,
// or answers wrong bytes, ends the run.
func (b *bench) waitReady(s *server) {
	scheme := "http"
	if strings.HasSuffix(s.kind, "-tls") || s.kind == "baretls" || s.kind == "caddy" {
		scheme = "https"
	}
	want := mustRead(filepath.Join(b.site, "1k.html"))
	url := fmt.Sprintf("%s://127.0.0.1:%d/1k.html", scheme, s.port)
	c := b.client(false)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		code, _, body, err := get(c, url)
		if err == nil && code == 200 {
			if !bytes.Equal(body, want) {
				die("%s: /1k.html answered 200 with wrong bytes", s.name)
			}
			return
		}
		select {
		case <-s.done:
			die("%s exited before answering; log: %s", s.name, tail(s.log, 20))
		default:
		}
	}
	die("%s not answering on port %d after 15 s; log: %s", s.name, s.port, tail(s.log, 20))
}

// mustRead reads a file the run wrote, or ends the run.
func mustRead(path string) []byte {
	b, err := os.ReadFile(path)
	must(err)
	return b
}

// stop sends SIGTERM to s, waits -stop-wait for it to exit, and reports
// as problems a server that had to be killed, a non-zero exit status, and
// a child still alive a second after it.
func (b *bench) stop(s *server) {
	type proc struct {
		pid   int
		start uint64
	}
	var children []proc
	for _, d := range descendants(s.pid) {
		children = append(children, proc{d, readStat(d).start})
	}
	syscall.Kill(s.pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(b.cfg.stopWait):
		b.rep.problem("%s: pid %d still running %v after SIGTERM; killed", s.name, s.pid, b.cfg.stopWait)
		signalTree(syscall.SIGKILL, s.pid)
		<-s.done
	}
	for _, c := range children {
		if alive(c.pid, c.start) {
			time.Sleep(time.Second)
			if alive(c.pid, c.start) {
				b.rep.problem("%s: child pid %d still alive 1 s after the parent exited; killed", s.name, c.pid)
				signalTree(syscall.SIGKILL, c.pid)
			}
		}
	}
	b.procs.remove(s.pid)
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		b.rep.problem("%s: exit status %d after SIGTERM (expected 0)", s.name, code)
	}
}
