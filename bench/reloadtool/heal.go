//go:build linux

// heal.go is the heal section's part of reloadtool: killing workers under
// load (mode load's -kills) and attributing the requests that fail to the
// killed worker's connections, recording the healing lines (respawns and
// recycles), timing cold starts (mode coldstart) and following a crash
// loop to servery's exit (mode crashloop).

package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// healMsgs are the lines of servery's healing that mode load records
// with -heal.
var healMsgs = map[string]bool{
	"worker lost": true, "worker respawning": true, "worker started": true,
	"worker respawned": true, "worker respawn failed": true,
	"worker recycle queued": true, "worker recycling": true, "worker recycled": true,
	"worker recycle failed": true, "worker recycle retried later": true,
	"giving up": true, "worker outlived deadline": true,
}

// killRec is one SIGKILL of a slot's worker.
type killRec struct {
	at    time.Duration // from t0, just before kill()
	when  time.Time     // the same, as a time
	slot  int
	pid   int
	conns int // established client connections the worker held then
	busy  int // of those, how many carried a request of ours then
	err   error
}

// portKill says that a kill's snapshot held a client port.
type portKill struct {
	kill int
	snap time.Time
}

// connRef is one connection a request used: its client port and when it
// was dialled.
type connRef struct {
	port int
	born time.Time
}

// healer is mode load's healing part: nil-safe, off unless -kills or
// -heal is given.
type healer struct {
	record bool // -heal: keep the healing lines
	kills  bool // -kills: kill workers and attribute failures
	port   int  // servery's port
	mu     sync.Mutex
	slot   map[int]int // slot -> pid of the worker serving in it
	lines  []line
	done   []killRec
	ports  map[int][]portKill
	born   sync.Map // net.Conn -> time.Time of its dial
	busy   sync.Map // client port -> true while a request is on it

	lostKilled, lostElsewhere       map[string]int
	retriedKilled, retriedElsewhere int
	perKillLost, perKillRetried     map[int]int
}

func newHealer(serving line, record, kills bool, url string) *healer {
	if !record && !kills {
		return nil
	}
	h := &healer{record: record, kills: kills, slot: map[int]int{}, ports: map[int][]portKill{},
		lostKilled: map[string]int{}, lostElsewhere: map[string]int{},
		perKillLost: map[int]int{}, perKillRetried: map[int]int{}}
	for i, p := range pidsOf(serving) {
		h.slot[i] = p
	}
	if i := strings.LastIndexByte(url, ':'); i >= 0 {
		h.port, _ = strconv.Atoi(strings.SplitN(url[i+1:], "/", 2)[0])
	}
	return h
}

// onLine follows the slots' pids and keeps the healing lines.
func (h *healer) onLine(l line) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch l.msg {
	case "worker respawned", "worker recycled":
		w, err1 := strconv.Atoi(l.kv["worker"])
		p, err2 := strconv.Atoi(l.kv["new_pid"])
		if err1 == nil && err2 == nil {
			h.slot[w] = p
		}
	case "reloaded":
		h.slot = map[int]int{}
		for i, p := range pidsOf(l) {
			h.slot[i] = p
		}
		return
	}
	if healMsgs[l.msg] {
		h.lines = append(h.lines, l)
	}
}

// gotConn is what a request's GotConn hook adds: the connection's port
// and dial time.
func (h *healer) gotConn(i httptraceConn) connRef {
	c := connRef{}
	if a, ok := i.conn.LocalAddr().(*net.TCPAddr); ok {
		c.port = a.Port
	}
	h.busy.Store(c.port, true)
	if !i.reused {
		c.born = time.Now()
		h.born.Store(i.conn, c.born)
	} else if b, ok := h.born.Load(i.conn); ok {
		c.born = b.(time.Time)
	}
	return c
}

// httptraceConn is the part of httptrace.GotConnInfo gotConn needs.
type httptraceConn struct {
	conn   net.Conn
	reused bool
}

// idle marks the connections a request used as carrying none now.
func (h *healer) idle(used []connRef) {
	for _, c := range used {
		h.busy.Delete(c.port)
	}
}

// whose returns the kill (1-based) whose snapshot held c before it
// failed at t, or 0.
func (h *healer) whose(c connRef, t time.Time) int {
	best := 0
	var bestSnap time.Time
	for _, pk := range h.ports[c.port] {
		if !pk.snap.Before(c.born) && !pk.snap.After(t) && pk.snap.After(bestSnap) {
			best, bestSnap = pk.kill, pk.snap
		}
	}
	return best
}

// failed attributes a failed request (kind as the load loop classifies
// it) on connection c at t.
func (h *healer) failed(c connRef, kind string, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if k := h.whose(c, t); k > 0 {
		h.lostKilled[kind]++
		h.perKillLost[k]++
	} else {
		h.lostElsewhere[kind]++
	}
}

// retried attributes a request the Transport sent again after its
// connection c failed.
func (h *healer) retried(c connRef, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if k := h.whose(c, t); k > 0 {
		h.retriedKilled++
		h.perKillRetried[k]++
	} else {
		h.retriedElsewhere++
	}
}

// workerPorts lists the client ports of the established connections to
// port that process pid holds, from its file descriptors and
// /proc/PID/net/tcp.
func workerPorts(pid, port int) []int {
	dir := "/proc/" + strconv.Itoa(pid)
	fds, err := os.ReadDir(dir + "/fd")
	if err != nil {
		return nil
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		t, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
		if err == nil && strings.HasPrefix(t, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(t, "socket:["), "]")] = true
		}
	}
	var out []int
	for _, f := range []string{"/net/tcp", "/net/tcp6"} {
		b, err := os.ReadFile(dir + f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			x := strings.Fields(l)
			if len(x) < 10 || x[3] != "01" || !inodes[x[9]] {
				continue
			}
			lp := hexPort(x[1])
			rp := hexPort(x[2])
			if lp == port && rp > 0 {
				out = append(out, rp)
			}
		}
	}
	return out
}

func hexPort(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return 0
	}
	n, _ := strconv.ParseUint(addr[i+1:], 16, 32)
	return int(n)
}

// killer SIGKILLs, at each offset from t0, the worker serving in the
// slot the list gives (cycled), snapshotting its client connections just
// before.
func (h *healer) killer(t0 time.Time, offs []time.Duration, slots []int) {
	for k, off := range offs {
		time.Sleep(time.Until(t0.Add(off)))
		slot := slots[k%len(slots)]
		h.mu.Lock()
		pid := h.slot[slot]
		h.mu.Unlock()
		r := killRec{slot: slot, pid: pid}
		if pid <= 0 {
			r.err = fmt.Errorf("no worker known in slot %d", slot)
		} else {
			ports := workerPorts(pid, h.port)
			r.conns = len(ports)
			for _, p := range ports {
				if _, ok := h.busy.Load(p); ok {
					r.busy++
				}
			}
			r.when = time.Now()
			r.at = r.when.Sub(t0)
			h.mu.Lock()
			for _, p := range ports {
				h.ports[p] = append(h.ports[p], portKill{kill: k + 1, snap: r.when})
			}
			h.mu.Unlock()
			r.err = syscall.Kill(pid, syscall.SIGKILL)
		}
		if r.when.IsZero() {
			r.when = time.Now()
			r.at = r.when.Sub(t0)
		}
		h.mu.Lock()
		h.done = append(h.done, r)
		h.mu.Unlock()
	}
}

// awaitRespawns waits up to timeout until every killed worker's
// respawned line has come.
func (h *healer) awaitRespawns(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		missing := 0
		for _, r := range h.done {
			if r.err == nil && h.find(0, "worker respawned", "old_pid", strconv.Itoa(r.pid)) < 0 {
				missing++
			}
		}
		h.mu.Unlock()
		if missing == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// find returns the index of the first line from index from on whose msg
// is msg and whose key is val, or -1. Call with mu held.
func (h *healer) find(from int, msg, key, val string) int {
	for i := max(from, 0); i < len(h.lines); i++ {
		if h.lines[i].msg == msg && (key == "" || h.lines[i].kv[key] == val) {
			return i
		}
	}
	return -1
}

func msStr(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) }

// report writes the per-kill TSV, the healing lines' TSV and the summary
// keys of healing, once servery has been stopped.
func (h *healer) report(t0 time.Time, bw time.Duration, rates []float64, med float64, killsPath, healPath string, sum *bytes.Buffer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if healPath != "" {
		var b bytes.Buffer
		fmt.Fprintln(&b, "t_ms\tlog_time\tmsg\tworker\tpid\told_pid\tnew_pid\tafter\tdelay\tfailures\tdetail")
		for _, l := range h.lines {
			detail := l.kv["reason"] + l.kv["err"] + l.kv["last"]
			fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", msStr(l.seen.Sub(t0)), l.kv["time"], l.msg,
				l.kv["worker"], l.kv["pid"], l.kv["old_pid"], l.kv["new_pid"], l.kv["after"], l.kv["delay"], l.kv["failures"],
				strings.ReplaceAll(detail, "\t", " "))
		}
		os.WriteFile(healPath, b.Bytes(), 0o644)
	}
	count := map[string]int{}
	for _, l := range h.lines {
		count[l.msg]++
	}
	for _, m := range []string{"worker lost", "worker respawning", "worker respawned", "worker respawn failed",
		"worker recycle queued", "worker recycling", "worker recycled", "worker recycle failed", "giving up", "worker outlived deadline"} {
		fmt.Fprintf(sum, "lines_%s=%d\n", strings.ReplaceAll(m, " ", "_"), count[m])
	}
	minR := -1.0
	for _, r := range rates {
		if minR < 0 || r < minR {
			minR = r
		}
	}
	if med > 0 {
		fmt.Fprintf(sum, "min_rps=%.0f (%.0f %%)\n", minR, 100*minR/med)
	} else {
		fmt.Fprintf(sum, "min_rps=n/a\n")
	}
	if !h.kills {
		return
	}
	var kb bytes.Buffer
	// kill_to_lost_ms and kill_to_respawned_ms compare this process's wall
	// clock just before kill() with servery's time= stamps (1 ms
	// resolution): the helper, busy being the load, may read a line late.
	// busy: the killed worker's connections that carried a request then.
	fmt.Fprintln(&kb, "kill\tat_s\tslot\tpid\tconns\tlost\tretried\tlost_line\trespawning_delay\tfailures\tstarted_line\tafter_ms\tkill_to_respawned_ms\tnew_pid\tmin_rps_1s\tmin_pct_of_median\terror\tkill_to_lost_ms\tbusy")
	failedKills, missing := 0, 0
	var afters []float64
	for k, r := range h.done {
		errS := ""
		if r.err != nil {
			errS = r.err.Error()
			failedKills++
		}
		pid := strconv.Itoa(r.pid)
		lost := h.find(0, "worker lost", "pid", pid)
		delay, failures, startedOK := "NaN", "NaN", "no"
		afterMs, scriptMs, newPID, lostMs := "NaN", "NaN", "NaN", "NaN"
		if lost >= 0 {
			lostMs = msStr(h.lines[lost].ts.Sub(r.when.Round(0)))
			if i := h.find(lost, "worker respawning", "worker", strconv.Itoa(r.slot)); i >= 0 {
				delay, failures = h.lines[i].kv["delay"], h.lines[i].kv["failures"]
			}
			if i := h.find(lost, "worker started", "worker", strconv.Itoa(r.slot)); i >= 0 {
				startedOK = "yes"
			}
		}
		if i := h.find(0, "worker respawned", "old_pid", pid); i >= 0 {
			l := h.lines[i]
			if d, err := time.ParseDuration(l.kv["after"]); err == nil {
				afterMs = msStr(d)
				afters = append(afters, float64(d)/1e6)
			}
			scriptMs = msStr(l.ts.Sub(r.when.Round(0)))
			newPID = l.kv["new_pid"]
		}
		if r.err == nil && (lost < 0 || delay == "NaN" || startedOK == "no" || newPID == "NaN") {
			missing++
		}
		lo := int(r.at / bw)
		hi := lo + int(time.Second/bw)
		mr := -1.0
		for i := lo; i < hi && i < len(rates); i++ {
			if i >= 0 && (mr < 0 || rates[i] < mr) {
				mr = rates[i]
			}
		}
		pct := 0.0
		if med > 0 {
			pct = 100 * mr / med
		}
		lostLine := "yes"
		if lost < 0 {
			lostLine = "no"
		}
		fmt.Fprintf(&kb, "%d\t%.3f\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f\t%s\t%s\t%d\n", k+1, r.at.Seconds(), r.slot, r.pid,
			r.conns, h.perKillLost[k+1], h.perKillRetried[k+1], lostLine, delay, failures, startedOK, afterMs, scriptMs, newPID, mr, pct, errS, lostMs, r.busy)
	}
	os.WriteFile(killsPath, kb.Bytes(), 0o644)
	fmt.Fprintf(sum, "kills=%d\nkills_failed=%d\nkills_missing_lines=%d\n", len(h.done), failedKills, missing)
	lk, le := 0, 0
	for _, c := range h.lostKilled {
		lk += c
	}
	for _, c := range h.lostElsewhere {
		le += c
	}
	fmt.Fprintf(sum, "lost_killed=%d\nlost_elsewhere=%d\nretried_killed=%d\nretried_elsewhere=%d\n", lk, le, h.retriedKilled, h.retriedElsewhere)
	for _, kc := range sortedCounts(h.lostKilled) {
		fmt.Fprintf(sum, "lost_killed_kind=%s\n", kc)
	}
	for _, kc := range sortedCounts(h.lostElsewhere) {
		fmt.Fprintf(sum, "lost_elsewhere_kind=%s\n", kc)
	}
	sort.Float64s(afters)
	if n := len(afters); n > 0 {
		m := afters[n/2]
		if n%2 == 0 {
			m = (afters[n/2-1] + afters[n/2]) / 2
		}
		fmt.Fprintf(sum, "after_ms_median=%.1f\nafter_ms_min=%.1f\nafter_ms_max=%.1f\n", m, afters[0], afters[n-1])
	} else {
		fmt.Fprintf(sum, "after_ms_median=NaN\nafter_ms_min=NaN\nafter_ms_max=NaN\n")
	}
}

// sortedCounts renders a count map as "N kind" lines, most frequent
// first, at most 6.
func sortedCounts(m map[string]int) []string {
	type kc struct {
		k string
		c int
	}
	var v []kc
	for k, c := range m {
		v = append(v, kc{k, c})
	}
	sort.Slice(v, func(i, j int) bool { return v[i].c > v[j].c || v[i].c == v[j].c && v[i].k < v[j].k })
	var out []string
	for i, x := range v {
		if i == 6 {
			break
		}
		out = append(out, strconv.Itoa(x.c)+" "+strings.ReplaceAll(x.k, "\n", " "))
	}
	return out
}

// parseOffsets reads a comma-separated list of durations.
func parseOffsets(flagName, list string) []time.Duration {
	var out []time.Duration
	for _, h := range strings.Split(list, ",") {
		if h = strings.TrimSpace(h); h != "" {
			d, err := time.ParseDuration(h)
			if err != nil {
				die("%s: %v", flagName, err)
			}
			out = append(out, d)
		}
	}
	return out
}

// parseInts reads a comma-separated list of integers.
func parseInts(flagName, list string) []int {
	var out []int
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f != "" {
			n, err := strconv.Atoi(f)
			if err != nil {
				die("%s: %v", flagName, err)
			}
			out = append(out, n)
		}
	}
	return out
}

// coldstart times -n starts of servery, one after another: exec until
// its msg=serving line by this process's clock, and the line's own
// ready_in (servery's clock from its process start); each then stopped
// by SIGTERM. One TSV row per start.
func coldstart(args []string) {
	fs := flag.NewFlagSet("coldstart", flag.ExitOnError)
	n := fs.Int("n", 11, "starts")
	logPath := fs.String("log", "", "servery log (every start appended)")
	pidPath := fs.String("pidfile", "", "servery pid file")
	outPath := fs.String("out", "", "TSV output")
	gap := fs.Duration("gap", 100*time.Millisecond, "pause between a stop and the next start")
	fs.Parse(args)
	os.Remove(*logPath)
	openLogFlag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	var out bytes.Buffer
	fmt.Fprintln(&out, "run\tready_in_ms\texec_to_line_ms\tworkers\tstop_ms\texit")
	write := func() { os.WriteFile(*outPath, out.Bytes(), 0o644) }
	for i := 1; i <= *n; i++ {
		time.Sleep(*gap)
		s := start(fs.Args(), *logPath, *pidPath)
		serving, err := s.next("serving", "", 20*time.Second)
		if err != nil {
			s.stop(5 * time.Second)
			write()
			die("start %d: %v", i, err)
		}
		readyIn := "NaN"
		if d, err := time.ParseDuration(serving.kv["ready_in"]); err == nil {
			readyIn = msStr(d)
		}
		t := time.Now()
		stopErr := s.stop(20 * time.Second)
		<-s.done
		exit := "ok"
		if stopErr != nil {
			exit = strings.ReplaceAll(stopErr.Error(), "\t", " ")
		}
		fmt.Fprintf(&out, "%d\t%s\t%s\t%s\t%s\t%s\n", i, readyIn, msStr(serving.seen.Sub(s.started)),
			serving.kv["workers"], msStr(time.Since(t)), exit)
		current.Store(nil)
	}
	write()
}

// crashloop starts servery, renames -vanish (its -dir) once it serves so
// that every later worker start fails, SIGKILLs the worker in -slot, and
// follows servery's log until it exits on its own (or -timeout, when it
// is stopped). One TSV row per healing line, times from the kill; a
// key=value summary.
func crashloop(args []string) {
	fs := flag.NewFlagSet("crashloop", flag.ExitOnError)
	vanish := fs.String("vanish", "", "directory to rename once servery serves")
	slot := fs.Int("slot", 0, "slot whose worker to kill")
	settle := fs.Duration("settle", 0, "wait after serving before the kill")
	logPath := fs.String("log", "", "servery log")
	pidPath := fs.String("pidfile", "", "servery pid file")
	outPath := fs.String("out", "", "TSV output")
	sumPath := fs.String("summary", "", "key=value summary output")
	timeout := fs.Duration("timeout", 60*time.Second, "from the kill until servery must have exited")
	fs.Parse(args)
	s := start(fs.Args(), *logPath, *pidPath)
	serving, err := s.next("serving", "", 20*time.Second)
	if err != nil {
		s.stop(5 * time.Second)
		die("%v", err)
	}
	pids := pidsOf(serving)
	if *slot < 0 || *slot >= len(pids) {
		s.stop(5 * time.Second)
		die("no slot %d in %v", *slot, pids)
	}
	time.Sleep(*settle)
	gone := *vanish + ".vanished"
	if err := os.Rename(*vanish, gone); err != nil {
		s.stop(5 * time.Second)
		die("%v", err)
	}
	defer os.Rename(gone, *vanish)

	// servery's exit, seen without reaping it: its /proc stat turns Z.
	exitSeen := make(chan time.Time, 1)
	go func() {
		p := "/proc/" + strconv.Itoa(s.pid) + "/stat"
		for {
			b, err := os.ReadFile(p)
			if err != nil {
				exitSeen <- time.Now()
				return
			}
			if i := bytes.LastIndexByte(b, ')'); i >= 0 && len(b) > i+2 && (b[i+2] == 'Z' || b[i+2] == 'X') {
				exitSeen <- time.Now()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()

	tKill := time.Now()
	killErr := syscall.Kill(pids[*slot], syscall.SIGKILL)
	var lines []line
	deadline := time.NewTimer(*timeout)
	timedOut := false
follow:
	for {
		select {
		case l := <-s.lines:
			lines = append(lines, l)
		case <-s.done:
			break follow
		case <-deadline.C:
			timedOut = true
			break follow
		}
	}
	// Lines still buffered after stderr closed.
	for more := true; more; {
		select {
		case l := <-s.lines:
			lines = append(lines, l)
		default:
			more = false
		}
	}
	var exitAt time.Time
	exitCode := "none"
	if timedOut {
		s.stop(5 * time.Second)
		exitCode = "timeout"
	} else {
		select {
		case exitAt = <-exitSeen:
		case <-time.After(5 * time.Second):
		}
		err := s.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			exitCode = "0"
		case errors.As(err, &ee):
			exitCode = strconv.Itoa(ee.ExitCode())
		default:
			exitCode = err.Error()
		}
	}
	current.Store(nil)

	var out bytes.Buffer
	fmt.Fprintln(&out, "t_ms\tlog_ms\tmsg\tworker\tpid\tdelay\tfailures\tdetail")
	var logZero time.Time
	for _, l := range lines {
		if l.msg == "worker lost" {
			logZero = l.ts
			break
		}
	}
	count := map[string]int{}
	var delays, gaps, gapsLog []string
	var failAt line // the last failure: the loss, then each failed respawn
	var givingUp line
	want := strconv.Itoa(*slot)
	for _, l := range lines {
		if !healMsgs[l.msg] && l.msg != "stopped with error" && l.msg != "stopped" {
			continue
		}
		count[l.msg]++
		logMs := "NaN"
		if !logZero.IsZero() && !l.ts.IsZero() {
			logMs = strconv.FormatInt(l.ts.Sub(logZero).Milliseconds(), 10)
		}
		detail := l.kv["reason"] + l.kv["err"] + l.kv["last"]
		fmt.Fprintf(&out, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", msStr(l.seen.Sub(tKill)), logMs, l.msg, l.kv["worker"], l.kv["pid"],
			l.kv["delay"], l.kv["failures"], strings.ReplaceAll(detail, "\t", " "))
		if l.kv["worker"] != want && l.msg != "giving up" {
			continue
		}
		switch l.msg {
		case "worker lost", "worker respawn failed":
			failAt = l
		case "worker respawning":
			delays = append(delays, l.kv["delay"])
		case "worker started":
			if !failAt.seen.IsZero() {
				gaps = append(gaps, msStr(l.seen.Sub(failAt.seen)))
				gapsLog = append(gapsLog, strconv.FormatInt(l.ts.Sub(failAt.ts).Milliseconds(), 10))
				failAt = line{}
			}
		case "giving up":
			givingUp = l
		}
	}
	os.WriteFile(*outPath, out.Bytes(), 0o644)

	var sum bytes.Buffer
	kerr := "ok"
	if killErr != nil {
		kerr = killErr.Error()
	}
	fmt.Fprintf(&sum, "kill=%s\nkilled_pid=%d\nexit=%s\n", kerr, pids[*slot], exitCode)
	if !exitAt.IsZero() {
		fmt.Fprintf(&sum, "kill_to_exit_ms=%s\n", msStr(exitAt.Sub(tKill)))
	} else {
		fmt.Fprintf(&sum, "kill_to_exit_ms=NaN\n")
	}
	if !givingUp.seen.IsZero() {
		fmt.Fprintf(&sum, "kill_to_giving_up_ms=%s\ngiving_up_lost=%s\n", msStr(givingUp.seen.Sub(tKill)), givingUp.kv["lost"])
	} else {
		fmt.Fprintf(&sum, "kill_to_giving_up_ms=NaN\ngiving_up_lost=NaN\n")
	}
	for _, m := range []string{"worker lost", "worker respawning", "worker started", "worker respawn failed", "worker respawned", "giving up", "stopped with error"} {
		fmt.Fprintf(&sum, "lines_%s=%d\n", strings.ReplaceAll(m, " ", "_"), count[m])
	}
	fmt.Fprintf(&sum, "delays=%s\ngaps_ms=%s\ngaps_log_ms=%s\n", strings.Join(delays, ","), strings.Join(gaps, ","), strings.Join(gapsLog, ","))
	os.WriteFile(*sumPath, sum.Bytes(), 0o644)
}
