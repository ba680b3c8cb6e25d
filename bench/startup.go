//go:build linux

// startup.go is section 3: exec to the first answer, and SIGTERM to exit,
// of an idle server; both timed in this process.

package main

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// startStop is one startup trial: ready and stop as this process timed
// them, and what servery's own log says (ready_in on its serving line,
// took on "generation stopped"), NaN where it says nothing.
type startStop struct {
	readyMS, stopMS         float64
	selfReadyMS, selfStopMS float64
}

// firstAnswer execs a server, polls GET /1k.html every millisecond with a
// new connection until a 200 with the file's length, idles, sends SIGTERM
// and times the exit.
func (b *bench) firstAnswer(name, kind string, w, port int) (startStop, error) {
	argv, env := b.serverCommand(kind, w, port)
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond); err == nil {
		c.Close()
		die("port %d is already answering before the startup trial %s", port, name)
	}
	logf, err := os.OpenFile(b.logPath(name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	must(err)
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}, Timeout: 2 * time.Second}
	url := fmt.Sprintf("http://127.0.0.1:%d/1k.html", port)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return startStop{}, err
	}
	pid := cmd.Process.Pid
	b.procs.add(pid)
	defer b.procs.remove(pid)
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	var ready time.Duration
	for deadline := t0.Add(15 * time.Second); ; time.Sleep(time.Millisecond) {
		if code, _, body, err := get(client, url); err == nil && code == 200 && len(body) == 1024 {
			ready = time.Since(t0)
			break
		}
		select {
		case <-exited:
			return startStop{}, fmt.Errorf("exited before answering: %v", cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			signalTree(syscall.SIGKILL, pid)
			return startStop{}, fmt.Errorf("no answer within 15 s")
		}
	}
	time.Sleep(b.cfg.idleBeforeStop)
	t1 := time.Now()
	syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		signalTree(syscall.SIGKILL, pid)
		return startStop{}, fmt.Errorf("still running 15 s after SIGTERM")
	}
	stop := time.Since(t1)
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		b.rep.problem("%s: exit status %d after SIGTERM", name, code)
	}
	log := mustRead(b.logPath(name + ".log"))
	return startStop{
		readyMS: float64(ready) / 1e6, stopMS: float64(stop) / 1e6,
		selfReadyMS: logDuration(log, "msg=serving", "ready_in="),
		selfStopMS:  logDuration(log, `msg="generation stopped"`, "took="),
	}, nil
}

// logDuration is the last value of key on a log line holding msg, in
// milliseconds; NaN if there is none.
func logDuration(log []byte, msg, key string) float64 {
	v := math.NaN()
	for line := range bytes.SplitSeq(log, []byte("\n")) {
		if !bytes.Contains(line, []byte(msg)) {
			continue
		}
		for _, f := range strings.Fields(string(line)) {
			if s, ok := strings.CutPrefix(f, key); ok {
				if d, err := time.ParseDuration(s); err == nil {
					v = float64(d) / 1e6
				}
			}
		}
	}
	return v
}

// startup times, over -startup-trials rounds, each server's exec to first
// answer and SIGTERM to exit.
func (b *bench) startup() {
	c := b.cfg
	type cfg struct {
		kind string
		w    int
	}
	configs := []cfg{{"servery", 1}, {"servery", 2}, {"servery", 4}, {"servery", 8}, {"nethttp-default", 1}}
	results := make([][]startStop, len(configs))
	for t := 1; t <= c.startupTrials; t++ {
		b.box.waitQuiet()
		for k, sc := range configs {
			name := fmt.Sprintf("startup-%s-w%d-t%d", sc.kind, sc.w, t)
			say("startup trial %d/%d: %s w=%d", t, c.startupTrials, sc.kind, sc.w)
			r, err := b.firstAnswer(name, sc.kind, sc.w, c.basePort+30+k)
			if err != nil {
				b.rep.problem("%s: %v; log: %s", name, err, tail(b.logPath(name+".log"), 5))
				continue
			}
			if sc.kind == "servery" {
				b.logIssues(name, b.logPath(name+".log"), nil)
			}
			if !(r.stopMS < 250) {
				b.rep.problem("%s: stop took %.1f ms (>= 250 ms) on an idle server", name, r.stopMS)
			}
			results[k] = append(results[k], r)
		}
	}
	b.rep.mdf("## 3. Startup and stop (%d trials each, medians, unpinned, idle server)", c.startupTrials)
	b.rep.md("")
	b.rep.mdf("ready = exec to the first 200 answer for /1k.html with the right body, both timestamps in this process, which polls every 1 ms with a new connection each time (resolution about 1 ms). stop = SIGTERM to process exit after %v idle. servery's self-reported ready_in (its serving log line) and generation-stop time are shown for reference.", c.idleBeforeStop)
	b.rep.md("", "| server | processes | ready median (ms) | ready min-max (ms) | self-reported ready_in median (ms) | stop median (ms) | stop min-max (ms) | self-reported stop median (ms) |",
		"|---|---:|---:|---:|---:|---:|---:|---:|")
	readyOf, stopOf := map[string]float64{}, map[string]float64{}
	for k, sc := range configs {
		rs := results[k]
		ready := field(rs, func(s startStop) float64 { return s.readyMS })
		stop := field(rs, func(s startStop) float64 { return s.stopMS })
		key := sc.kind + strconv.Itoa(sc.w)
		readyOf[key], stopOf[key] = median(ready), median(stop)
		name, procs := fmt.Sprintf("servery -workers %d", sc.w), sc.w+1
		if sc.w == 1 {
			procs = 1
		}
		if sc.kind != "servery" {
			name, procs = "net/http FileServer (GOMAXPROCS default)", 1
		}
		b.rep.mdf("| %s | %d | %s | %s-%s | %s | %s | %s-%s | %s |", name, procs, num("%.1f", median(ready)),
			num("%.1f", minOf(ready)), num("%.1f", maxOf(ready)), num("%.1f", median(field(rs, func(s startStop) float64 { return s.selfReadyMS }))),
			num("%.1f", median(stop)), num("%.1f", minOf(stop)), num("%.1f", maxOf(stop)),
			num("%.1f", median(field(rs, func(s startStop) float64 { return s.selfStopMS }))))
	}
	rs := ratio(readyOf["servery4"], readyOf["nethttp-default1"])
	b.rep.md("")
	b.rep.mdf("- ready, servery 4 workers / net/http: %s (%s / %s ms), target <= 2.5x: %s", num("%.2fx", rs),
		num("%.1f", readyOf["servery4"]), num("%.1f", readyOf["nethttp-default1"]), verdict(rs, "<=", 2.5, 2.0))
	b.rep.mdf("- stop, servery 4 workers: %s ms, target < 250 ms: %s", num("%.1f", stopOf["servery4"]), verdict(stopOf["servery4"], "<", 250, 50))
	b.rep.md("")
}

// minOf is the least of xs, NaN for none.
func minOf(xs []float64) float64 {
	m := math.NaN()
	for _, x := range xs {
		if math.IsNaN(m) || x < m {
			m = x
		}
	}
	return m
}
