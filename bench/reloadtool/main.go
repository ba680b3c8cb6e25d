//go:build linux

// reloadtool is the timing half of go run ./bench's reload and heal
// sections, which build it from here (go build ./bench/reloadtool).
// Every mode execs the servery command given after --, in its own
// session, reads its stderr from a pipe (stamping each line with this
// process's clock and copying it to -log), waits for msg=serving, and
// ends by SIGTERM to servery and waiting for it to exit (crashloop: for
// servery's own exit).
// Linux only: it reads /proc.
//
// Mode idle (-n, -gap, -out, -other): N reloads of an idle server, one at
// a time: SIGHUP, then wait for "reloaded" of the new generation and
// "generation retired" of the one it replaced, then -gap of quiet. One TSV
// row per reload, both by this process's clock (from the kill) and by
// servery's log timestamps (from "reload requested").
//
// Mode load (-url, -expect, -c, -warmup, -dur, -bucket, -hups, -csv,
// -reloads, -summary): -c goroutines GET -url in a loop over a shared
// keep-alive net/http Transport; after -warmup, -dur of measurement in
// -bucket buckets by response completion time, SIGHUP at the -hups
// offsets. Every response is checked against -expect and every error
// classified: refused (ECONNREFUSED), truncated (body cut short),
// keep-alive race (a reused connection closed before any response byte:
// the Transport retries these for a GET on its own, which httptrace shows
// as a second GotConn within one request; counted, and also counted when
// not retried and failed), other. With -noretry each GET carries an empty
// body that is not http.NoBody and no GetBody: nothing more goes on the
// wire, but the Transport no longer treats it as replayable, so it retries
// nothing and a keep-alive race becomes an error, as for a POST.
//
// Mode load also heals (heal.go; -settle, -kills, -kill-slots, -kill-out,
// -heal): at the -kills offsets it SIGKILLs the worker serving in a slot
// (its pid tracked from servery's log) and attributes every failed or
// retried request to the killed worker's connections or to others, and
// it records the healing lines (lost, respawning, respawned, recycling,
// recycled, ...) with their times. Mode coldstart times N starts of
// servery; mode crashloop makes every later worker start fail and kills
// a worker, then follows servery until it gives up (heal.go).
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "reloadtool: "+format+"\n", args...)
	os.Exit(1)
}

// line is one servery log line as read from the pipe.
type line struct {
	seen time.Time // this process's clock (monotonic) when read
	ts   time.Time // servery's time= field (ms resolution)
	msg  string
	kv   map[string]string
	raw  string
}

// parse reads slog's text format: key=value or key="quoted value".
func parse(s string) map[string]string {
	kv := map[string]string{}
	for len(s) > 0 {
		s = strings.TrimLeft(s, " ")
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			break
		}
		k := s[:eq]
		s = s[eq+1:]
		var v string
		if strings.HasPrefix(s, `"`) {
			if q, err := strconv.QuotedPrefix(s); err == nil {
				v, _ = strconv.Unquote(q)
				s = s[len(q):]
			} else {
				v, s = s, ""
			}
		} else if sp := strings.IndexByte(s, ' '); sp >= 0 {
			v, s = s[:sp], s[sp:]
		} else {
			v, s = s, ""
		}
		kv[k] = v
	}
	return kv
}

type server struct {
	cmd     *exec.Cmd
	lines   chan line
	done    chan struct{} // stderr closed
	pid     int
	started time.Time // just before the exec
}

// current is the servery this process runs now, for the signal handler.
var (
	current     atomic.Pointer[server]
	stopOnce    sync.Once
	openLogFlag = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
)

func start(args []string, logPath, pidPath string) *server {
	if len(args) == 0 {
		die("no servery command after --")
	}
	logf, err := os.OpenFile(logPath, openLogFlag, 0o644)
	if err != nil {
		die("%v", err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Stdout = logf
	pr, err := cmd.StderrPipe()
	if err != nil {
		die("%v", err)
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		die("start %v: %v", args, err)
	}
	if pidPath != "" {
		os.WriteFile(pidPath, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	}
	s := &server{cmd: cmd, lines: make(chan line, 4096), done: make(chan struct{}), pid: cmd.Process.Pid, started: started}
	go func() {
		defer close(s.done)
		defer logf.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			now := time.Now()
			raw := sc.Text()
			fmt.Fprintln(logf, raw)
			kv := parse(raw)
			ts, _ := time.Parse(time.RFC3339Nano, kv["time"])
			select {
			case s.lines <- line{seen: now, ts: ts, msg: kv["msg"], kv: kv, raw: raw}:
			default: // nobody is reading this closely; the log file has it
			}
		}
	}()
	// Stop servery if we are told to stop: the one running now (coldstart
	// starts several, one after another).
	current.Store(s)
	stopOnce.Do(func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		go func() {
			<-sigs
			if s := current.Load(); s != nil {
				s.stop(5 * time.Second)
			}
			os.Exit(1)
		}()
	})
	return s
}

// next returns the next line whose msg is msg (and, if gen != "", whose
// generation is gen), or fails after timeout.
func (s *server) next(msg, gen string, timeout time.Duration) (line, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case l := <-s.lines:
			if l.msg == msg && (gen == "" || l.kv["generation"] == gen) {
				return l, nil
			}
			if l.kv["level"] == "ERROR" || l.msg == "stopped" {
				return l, fmt.Errorf("servery logged %q while waiting for %q", l.raw, msg)
			}
		case <-s.done:
			return line{}, fmt.Errorf("servery's stderr closed while waiting for msg=%q generation=%q", msg, gen)
		case <-t.C:
			return line{}, fmt.Errorf("no msg=%q generation=%q within %v", msg, gen, timeout)
		}
	}
}

// drainLines keeps reading lines so that the pipe never blocks servery,
// and hands the ones in keep to f.
func (s *server) drainLines(keep map[string]bool, f func(line)) {
	go func() {
		for {
			select {
			case l := <-s.lines:
				if keep[l.msg] {
					f(l)
				}
			case <-s.done:
				return
			}
		}
	}()
}

// stop sends SIGTERM and waits up to timeout for servery to exit, then
// SIGKILLs its group. Returns the exit error.
func (s *server) stop(timeout time.Duration) error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	select {
	case err := <-exited:
		return err
	case <-time.After(timeout):
		syscall.Kill(-s.pid, syscall.SIGKILL)
		return fmt.Errorf("servery did not exit within %v of SIGTERM; killed", timeout)
	}
}

func pidsOf(l line) []int {
	var out []int
	for _, f := range strings.Fields(strings.Trim(l.kv["pids"], "[]")) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func aliveCount(pids []int) int {
	n := 0
	for _, p := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 && s[i+2] != 'Z' && s[i+2] != 'X' {
			n++
		}
	}
	return n
}

// boxBusy is the CPU time, in seconds, that the whole box has spent busy
// (user, nice, system, steal) since boot.
func boxBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	t := 0.0
	for _, i := range []int{1, 2, 3, 8} {
		if i < len(f) {
			v, _ := strconv.ParseFloat(f[i], 64)
			t += v
		}
	}
	return t / 100 // USER_HZ
}

// ownCPU is this process's CPU time plus that of its reaped children
// (servery, and the workers servery reaped), in seconds.
func ownCPU() float64 {
	t := 0.0
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			t += float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
		}
	}
	return t
}

// acct measures the CPU that other work on the box took while we ran.
type acct struct {
	t0         time.Time
	box0, own0 float64
}

func newAcct() acct { return acct{time.Now(), boxBusy(), ownCPU()} }

// otherPct is other work's share of all CPUs since newAcct, in percent;
// call it after servery has been reaped.
func (a acct) otherPct() float64 {
	el := time.Since(a.t0).Seconds()
	o := (boxBusy() - a.box0) - (ownCPU() - a.own0)
	if o < 0 || el <= 0 {
		return 0
	}
	return 100 * o / (el * float64(boxCPUs()))
}

// boxCPUs counts the box's CPUs (runtime.NumCPU would count only those
// this process may run on).
func boxCPUs() int {
	b, _ := os.ReadFile("/proc/stat")
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if len(l) > 3 && strings.HasPrefix(l, "cpu") && l[3] >= '0' && l[3] <= '9' {
			n++
		}
	}
	if n == 0 {
		n = runtime.NumCPU()
	}
	return n
}

// portRE matches the client's ephemeral port in an error, so that errors
// of one kind count together.
var portRE = regexp.MustCompile(`127\.0\.0\.1:[0-9]+->`)

// signalOf is the signal -signal names and the line servery logs as it
// takes it: SIGHUP's reload, or SIGUSR2's upgrade, which ends in a
// reload too (its reloaded and generation retired lines).
func signalOf(name string) (syscall.Signal, string) {
	switch name {
	case "HUP":
		return syscall.SIGHUP, "reload requested"
	case "USR2":
		return syscall.SIGUSR2, "upgrade requested"
	}
	die("-signal %q: want HUP or USR2", name)
	return 0, ""
}

func us(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e3, 'f', 0, 64) }
func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }

func idle(args []string) {
	fs := flag.NewFlagSet("idle", flag.ExitOnError)
	n := fs.Int("n", 11, "reloads")
	gap := fs.Duration("gap", 300*time.Millisecond, "quiet time before each reload")
	logPath := fs.String("log", "", "servery log")
	pidPath := fs.String("pidfile", "", "servery pid file")
	outPath := fs.String("out", "", "TSV output")
	timeout := fs.Duration("timeout", 20*time.Second, "per step")
	otherPath := fs.String("other", "", "file for other work's share of the CPUs (%)")
	sigName := fs.String("signal", "HUP", "HUP (a reload) or USR2 (an upgrade of the parent, then its reload)")
	fs.Parse(args)
	sig, requestedMsg := signalOf(*sigName)
	ac := newAcct()
	s := start(fs.Args(), *logPath, *pidPath)
	serving, err := s.next("serving", "", *timeout)
	if err != nil {
		s.stop(5 * time.Second)
		die("%v", err)
	}
	old := pidsOf(serving)
	gen, _ := strconv.Atoi(serving.kv["generation"])
	var out bytes.Buffer
	fmt.Fprintln(&out, "reload\thup_to_requested_us\thup_to_ready_us\thup_to_gone_us\tlog_ready_ms\tlog_gone_ms\told_alive_after_gone")
	fail := func(err error) {
		os.WriteFile(*outPath, out.Bytes(), 0o644)
		s.stop(5 * time.Second)
		die("%v", err)
	}
	for i := 1; i <= *n; i++ {
		time.Sleep(*gap)
		t0 := time.Now()
		if err := s.cmd.Process.Signal(sig); err != nil {
			fail(err)
		}
		req, err := s.next(requestedMsg, "", *timeout)
		if err != nil {
			fail(err)
		}
		ready, err := s.next("reloaded", strconv.Itoa(gen+1), *timeout)
		if err != nil {
			fail(err)
		}
		gone, err := s.next("generation retired", strconv.Itoa(gen), *timeout)
		if err != nil {
			fail(err)
		}
		left := aliveCount(old)
		fmt.Fprintf(&out, "%d\t%s\t%s\t%s\t%d\t%d\t%d\n", i,
			us(req.seen.Sub(t0)), us(ready.seen.Sub(t0)), us(gone.seen.Sub(t0)),
			ready.ts.Sub(req.ts).Milliseconds(), gone.ts.Sub(req.ts).Milliseconds(), left)
		old = pidsOf(ready)
		gen++
	}
	err = s.stop(20 * time.Second)
	os.WriteFile(*outPath, out.Bytes(), 0o644)
	os.WriteFile(*otherPath, []byte(fmt.Sprintf("%.1f\n", ac.otherPct())), 0o644)
	if err != nil {
		die("servery exit: %v", err)
	}
}

// counters, per bucket.
type bucket struct{ ok, errs, race atomic.Int64 }

func load(args []string) {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	url := fs.String("url", "", "URL to GET")
	expectPath := fs.String("expect", "", "file with the expected body")
	conns := fs.Int("c", 64, "keep-alive clients")
	warmup := fs.Duration("warmup", time.Second, "load before measuring")
	dur := fs.Duration("dur", 10*time.Second, "measured load")
	bw := fs.Duration("bucket", 100*time.Millisecond, "bucket width")
	hupList := fs.String("hups", "", "SIGHUP offsets from the start of measurement, comma-separated durations")
	logPath := fs.String("log", "", "servery log")
	pidPath := fs.String("pidfile", "", "servery pid file")
	csvPath := fs.String("csv", "", "CSV output")
	reloadsPath := fs.String("reloads", "", "per-reload TSV output")
	sumPath := fs.String("summary", "", "key=value summary output")
	noRetry := fs.Bool("noretry", false, "make each GET non-replayable (a body with no GetBody), so that the Transport retries nothing and every keep-alive race is an error")
	settle := fs.Duration("settle", 0, "idle wait after serving before the load starts (heal: let the first workers become steady)")
	killList := fs.String("kills", "", "SIGKILL offsets from the start of measurement, comma-separated durations (heal)")
	killSlots := fs.String("kill-slots", "0", "slots whose workers the kills hit, in turn, comma-separated (cycled)")
	killsPath := fs.String("kill-out", "", "per-kill TSV output")
	healPath := fs.String("heal", "", "TSV output of servery's healing lines (respawns, recycles); also adds healing keys to the summary")
	sigName := fs.String("signal", "HUP", "what -hups sends: HUP (a reload) or USR2 (an upgrade of the parent, then its reload)")
	fs.Parse(args)
	sig, requestedMsg := signalOf(*sigName)
	kills := parseOffsets("-kills", *killList)
	slots := parseInts("-kill-slots", *killSlots)
	if len(kills) > 0 && len(slots) == 0 {
		die("-kills needs -kill-slots")
	}
	expect, err := os.ReadFile(*expectPath)
	if err != nil {
		die("%v", err)
	}
	var hups []time.Duration
	for _, h := range strings.Split(*hupList, ",") {
		if h = strings.TrimSpace(h); h != "" {
			d, err := time.ParseDuration(h)
			if err != nil {
				die("-hups: %v", err)
			}
			hups = append(hups, d)
		}
	}

	ac := newAcct()
	s := start(fs.Args(), *logPath, *pidPath)
	serving, err := s.next("serving", "", 20*time.Second)
	if err != nil {
		s.stop(5 * time.Second)
		die("%v", err)
	}
	gen0, _ := strconv.Atoi(serving.kv["generation"])
	var evMu sync.Mutex
	var events []line
	keep := map[string]bool{requestedMsg: true, "reloaded": true, "generation retired": true, "upgrade failed, still serving": true,
		"reload failed, still serving": true, "reload waits for the retiring generation": true,
		"old handler stopped with requests on it": true}
	hl := newHealer(serving, *healPath != "", len(kills) > 0, *url)
	if hl != nil {
		for m := range healMsgs {
			keep[m] = true
		}
	}
	s.drainLines(keep, func(l line) {
		if hl != nil {
			hl.onLine(l)
			if healMsgs[l.msg] {
				return
			}
		}
		evMu.Lock()
		events = append(events, l)
		evMu.Unlock()
	})
	time.Sleep(*settle)

	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConns:        *conns * 2,
		MaxIdleConnsPerHost: *conns * 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}

	nb := int((*dur + *bw - 1) / *bw)
	buckets := make([]bucket, nb)
	var (
		tStart    = time.Now()
		t0        = tStart.Add(*warmup)
		tEnd      = t0.Add(*dur)
		total     struct{ ok, refused, truncated, race, raceFailed, other, newConns atomic.Int64 }
		otherMu   sync.Mutex
		others    = map[string]int{}
		raceKinds = map[string]int{}
	)
	addOther := func(k string) {
		total.other.Add(1)
		otherMu.Lock()
		others[k]++
		otherMu.Unlock()
	}
	measuring := func(t time.Time) (int, bool) {
		if t.Before(t0) || !t.Before(tEnd) {
			return 0, false
		}
		return int(t.Sub(t0) / *bw), true
	}

	var wg sync.WaitGroup
	for c := 0; c < *conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var gotConns, reused int
			var lastReused, firstByte bool
			var used []connRef // with kills: the connections this request used
			trace := &httptrace.ClientTrace{
				GotConn: func(i httptrace.GotConnInfo) {
					gotConns++
					lastReused = i.Reused
					if i.Reused {
						reused++
					}
					if hl != nil && hl.kills {
						used = append(used, hl.gotConn(httptraceConn{i.Conn, i.Reused}))
					}
				},
				GotFirstResponseByte: func() { firstByte = true },
			}
			ctx := httptrace.WithClientTrace(context.Background(), trace)
			req, err := http.NewRequestWithContext(ctx, "GET", *url, nil)
			if err != nil {
				die("%v", err)
			}
			buf := make([]byte, 0, len(expect)+1)
			for time.Now().Before(tEnd) {
				gotConns, reused, lastReused, firstByte = 0, 0, false, false
				used = used[:0]
				if *noRetry {
					// An empty body that is not NoBody, with no GetBody: the
					// Transport sends no body (it probes and finds EOF) but
					// no longer treats the request as replayable.
					req.Body = io.NopCloser(strings.NewReader(""))
					req.GetBody = nil
				}
				resp, err := client.Do(req)
				var kind, raceErr string // kind "": ok
				if err != nil {
					switch {
					case errors.Is(err, syscall.ECONNREFUSED):
						kind = "refused"
					case lastReused && !firstByte:
						kind = "race" // closed before any response byte, not retried
						raceErr = portRE.ReplaceAllString(err.Error(), "127.0.0.1:*->")
					default:
						kind = "other: " + portRE.ReplaceAllString(err.Error(), "127.0.0.1:*->")
					}
				} else {
					buf = buf[:0]
					b := bytes.NewBuffer(buf)
					_, rerr := io.Copy(b, resp.Body)
					resp.Body.Close()
					buf = b.Bytes()
					switch {
					case resp.StatusCode != 200:
						kind = "other: status " + strconv.Itoa(resp.StatusCode)
					case rerr != nil || (resp.ContentLength >= 0 && int64(len(buf)) < resp.ContentLength):
						kind = "truncated"
					case !bytes.Equal(buf, expect):
						kind = "other: wrong body (" + strconv.Itoa(len(buf)) + " bytes)"
					}
				}
				now := time.Now()
				if hl != nil && hl.kills {
					hl.idle(used) // its connection carries no request of ours now
				}
				i, in := measuring(now)
				if !in {
					if kind != "" && !strings.HasPrefix(kind, "other") {
						time.Sleep(time.Millisecond)
					}
					continue
				}
				// Retries the Transport made on its own: every GotConn after the
				// first in one Do is a reused connection that closed before it
				// answered (the keep-alive race), retried invisibly.
				if gotConns > 1 {
					total.race.Add(int64(gotConns - 1))
					buckets[i].race.Add(int64(gotConns - 1))
				}
				if gotConns > reused {
					total.newConns.Add(int64(gotConns - reused))
				}
				if hl != nil && hl.kills {
					// With kills, every failed or retried request is the killed
					// worker's or not, by the connection it was on.
					for j := 0; j+1 < len(used); j++ {
						hl.retried(used[j], now)
					}
					if kind != "" {
						c := connRef{}
						if len(used) > 0 && kind != "refused" {
							c = used[len(used)-1]
						}
						hl.failed(c, strings.TrimPrefix(kind, "other: "), now)
					}
				}
				switch {
				case kind == "":
					total.ok.Add(1)
					buckets[i].ok.Add(1)
				case kind == "refused":
					total.refused.Add(1)
					buckets[i].errs.Add(1)
				case kind == "truncated":
					total.truncated.Add(1)
					buckets[i].errs.Add(1)
				case kind == "race":
					otherMu.Lock()
					raceKinds[raceErr]++
					otherMu.Unlock()
					total.race.Add(1)
					total.raceFailed.Add(1)
					buckets[i].race.Add(1)
					buckets[i].errs.Add(1)
				default:
					addOther(strings.TrimPrefix(kind, "other: "))
					buckets[i].errs.Add(1)
				}
				if kind != "" {
					time.Sleep(time.Millisecond) // no hot loop against a refusing port
				}
			}
		}()
	}

	// SIGHUPs at fixed offsets from t0.
	hupAt := make([]time.Duration, len(hups))
	var hwg sync.WaitGroup
	hwg.Add(1)
	go func() {
		defer hwg.Done()
		for k, h := range hups {
			time.Sleep(time.Until(t0.Add(h)))
			hupAt[k] = time.Since(t0)
			s.cmd.Process.Signal(sig)
		}
	}()
	if hl != nil && hl.kills {
		hwg.Add(1)
		go func() {
			defer hwg.Done()
			hl.killer(t0, kills, slots)
		}()
	}
	wg.Wait()
	hwg.Wait()
	tr.CloseIdleConnections()
	if hl != nil && hl.kills {
		hl.awaitRespawns(15 * time.Second)
	}
	// Let the last reload finish before stopping (up to 15 s).
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		evMu.Lock()
		n := 0
		for _, e := range events {
			if e.msg == "generation retired" {
				n++
			}
		}
		evMu.Unlock()
		if n >= len(hups) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopErr := s.stop(20 * time.Second)
	<-s.done

	// CSV.
	var csv bytes.Buffer
	fmt.Fprintln(&csv, "t_ms,rps,errors,ka_race")
	scale := float64(time.Second) / float64(*bw)
	rates := make([]float64, nb)
	for i := range buckets {
		rates[i] = float64(buckets[i].ok.Load()) * scale
		fmt.Fprintf(&csv, "%d,%.0f,%d,%d\n", (time.Duration(i) * *bw).Milliseconds(), rates[i],
			buckets[i].errs.Load(), buckets[i].race.Load())
	}
	os.WriteFile(*csvPath, csv.Bytes(), 0o644)
	sorted := append([]float64(nil), rates...)
	sort.Float64s(sorted)
	med := sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		med = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
	}
	zero, low := 0, 0
	for _, r := range rates {
		if r == 0 {
			zero++
		}
		if r < med/2 {
			low++
		}
	}

	// Per reload: log-timestamp latencies, and the worst bucket in the
	// second after the SIGHUP.
	evMu.Lock()
	byGen := map[string]map[string]line{}
	var requested []line
	for _, e := range events {
		if e.msg == requestedMsg {
			requested = append(requested, e)
			continue
		}
		g := e.kv["generation"]
		if byGen[g] == nil {
			byGen[g] = map[string]line{}
		}
		if _, dup := byGen[g][e.msg]; !dup {
			byGen[g][e.msg] = e
		}
	}
	var rl bytes.Buffer
	fmt.Fprintln(&rl, "reload\thup_s\tlog_ready_ms\tlog_gone_ms\tmin_rps_1s\tmin_pct_of_median")
	failed := 0
	for k := range hups {
		newG, oldG := strconv.Itoa(gen0+k+1), strconv.Itoa(gen0+k)
		readyMs, goneMs := "NaN", "NaN"
		if k < len(requested) {
			if r, ok := byGen[newG]["reloaded"]; ok {
				readyMs = strconv.FormatInt(r.ts.Sub(requested[k].ts).Milliseconds(), 10)
			}
			if r, ok := byGen[oldG]["generation retired"]; ok {
				goneMs = strconv.FormatInt(r.ts.Sub(requested[k].ts).Milliseconds(), 10)
			}
		}
		if _, ok := byGen[newG]["reload failed, still serving"]; ok {
			failed++
		}
		lo := int(hupAt[k] / *bw)
		hi := lo + int(time.Second / *bw)
		minR := -1.0
		for i := lo; i < hi && i < nb; i++ {
			if minR < 0 || rates[i] < minR {
				minR = rates[i]
			}
		}
		pct := 0.0
		if med > 0 {
			pct = 100 * minR / med
		}
		fmt.Fprintf(&rl, "%d\t%.3f\t%s\t%s\t%.0f\t%.0f\n", k+1, hupAt[k].Seconds(), readyMs, goneMs, minR, pct)
	}
	var waits, busy int
	for _, e := range events {
		switch e.msg {
		case "reload waits for the retiring generation":
			waits++
		case "old handler stopped with requests on it":
			busy++
		}
	}
	evMu.Unlock()
	if *reloadsPath != "" {
		os.WriteFile(*reloadsPath, rl.Bytes(), 0o644)
	}

	var sum bytes.Buffer
	fmt.Fprintf(&sum, "requests=%d\n", total.ok.Load()+total.refused.Load()+total.truncated.Load()+total.raceFailed.Load()+total.other.Load())
	fmt.Fprintf(&sum, "ok=%d\nrefused=%d\ntruncated=%d\nka_race=%d\nka_race_failed=%d\nother=%d\nnew_conns=%d\n",
		total.ok.Load(), total.refused.Load(), total.truncated.Load(), total.race.Load(), total.raceFailed.Load(), total.other.Load(), total.newConns.Load())
	fmt.Fprintf(&sum, "rps_mean=%.0f\nrps_median_bucket=%.0f\nzero_buckets=%d\nlow_buckets=%d\nbuckets=%d\n",
		float64(total.ok.Load())/dur.Seconds(), med, zero, low, nb)
	// The lowest bucket away from every SIGHUP (not within 1 s after
	// one): how deep the dips are that reloads do not explain.
	near := make([]bool, nb)
	for _, h := range hupAt {
		for i := int(h / *bw); i < int((h+time.Second) / *bw) && i < nb; i++ {
			near[i] = true
		}
	}
	away := -1.0
	for i, r := range rates {
		if !near[i] && (away < 0 || r < away) {
			away = r
		}
	}
	if med > 0 && away >= 0 {
		fmt.Fprintf(&sum, "min_rps_away=%.0f (%.0f %%)\n", away, 100*away/med)
	} else {
		fmt.Fprintf(&sum, "min_rps_away=n/a\n")
	}
	fmt.Fprintf(&sum, "reloads_requested=%d\nreloads_failed=%d\nreload_waits=%d\nold_handler_busy=%d\n", len(requested), failed, waits, busy)
	hs := make([]string, len(hupAt))
	for k, h := range hupAt {
		hs[k] = strconv.FormatFloat(h.Seconds(), 'f', 3, 64)
	}
	fmt.Fprintf(&sum, "hup_s=%s\n", strings.Join(hs, ","))
	type kc struct {
		k string
		c int
	}
	var oc []kc
	for k, c := range others {
		oc = append(oc, kc{k, c})
	}
	sort.Slice(oc, func(i, j int) bool { return oc[i].c > oc[j].c })
	for i, o := range oc {
		if i == 5 {
			break
		}
		fmt.Fprintf(&sum, "other_kind=%d %s\n", o.c, strings.ReplaceAll(o.k, "\n", " "))
	}
	oc = oc[:0]
	for k, c := range raceKinds {
		oc = append(oc, kc{k, c})
	}
	sort.Slice(oc, func(i, j int) bool { return oc[i].c > oc[j].c })
	for i, o := range oc {
		if i == 5 {
			break
		}
		fmt.Fprintf(&sum, "race_kind=%d %s\n", o.c, strings.ReplaceAll(o.k, "\n", " "))
	}
	stopMsg := "ok"
	if stopErr != nil {
		stopMsg = stopErr.Error()
	}
	fmt.Fprintf(&sum, "servery_exit=%s\n", stopMsg)
	fmt.Fprintf(&sum, "other_pct=%.1f\n", ac.otherPct())
	if hl != nil {
		hl.report(t0, *bw, rates, med, *killsPath, *healPath, &sum)
	}
	os.WriteFile(*sumPath, sum.Bytes(), 0o644)
}

func main() {
	if len(os.Args) < 2 {
		die("usage: reloadtool idle|load|coldstart|crashloop [flags] -- CMD...")
	}
	switch os.Args[1] {
	case "idle":
		idle(os.Args[2:])
	case "load":
		load(os.Args[2:])
	case "coldstart":
		coldstart(os.Args[2:])
	case "crashloop":
		crashloop(os.Args[2:])
	default:
		die("unknown mode %q", os.Args[1])
	}
}
