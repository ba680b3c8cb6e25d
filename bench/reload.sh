#!/usr/bin/env bash
# bench/reload.sh: what a reload (SIGHUP) costs, idle and under load.
#
#   bash bench/reload.sh           full run (about 1.5 min on 2 cores, plus any wait for a quiet box)
#   QUICK=1 bash bench/reload.sh   smoke test (5 idle reloads, 4 workers only under load, 5 s, 3 reloads)
#   LOAD_WORKERS=4 DUR=20 RELOADS_UNDER_LOAD=9 bash bench/reload.sh
#
# 1. Idle: for -workers 1, 2 and 4, IDLE_RELOADS (11) reloads one after
#    another; SIGHUP -> new generation ready ("reloaded") and SIGHUP -> old
#    generation gone ("generation retired"), timed by the helper that sends
#    the SIGHUP and reads servery's stderr from a pipe (microseconds), and
#    from servery's log timestamps (milliseconds).
# 2. Under load: -workers 2 and 4 (LOAD_WORKERS), CONNS (64) keep-alive
#    clients GET /1k.html in a loop for DUR s; req/s per 100 ms bucket,
#    RELOADS_UNDER_LOAD (5) SIGHUPs evenly spread; every error classified.
# 3. The req/s series drawn with gnuplot as an SVG.
#
# Prints Markdown and saves it to bench/out/reload.md, with the CSV in
# bench/out/reload-rps.csv (one file per worker count next to it) and the
# plot in bench/out/reload-rps.svg; logs go to bench/out/reload-raw/.
# Progress goes to stderr. Every server listens on 127.0.0.1, every run is
# bounded in time, and the EXIT trap kills every process (group) the script
# started and removes its temp dir. Nothing in the repository is modified
# except bench/out/. Exits non-zero on a truncated response, a refused or
# unclassified error, a failed reload, or a leftover process.
set -Eeuo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
OUT_DIR="$SCRIPT_DIR/out"
export PATH="$PATH:/usr/local/go/bin"

# ---------------------------------------------------------------- settings
QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
	IDLE_RELOADS=${IDLE_RELOADS:-5}
	LOAD_WORKERS=${LOAD_WORKERS:-4}
	DUR=${DUR:-5}
	RELOADS_UNDER_LOAD=${RELOADS_UNDER_LOAD:-3}
	QUIET_WAIT=${QUIET_WAIT:-5}
else
	IDLE_RELOADS=${IDLE_RELOADS:-11}
	LOAD_WORKERS=${LOAD_WORKERS:-2 4}
	DUR=${DUR:-10}
	RELOADS_UNDER_LOAD=${RELOADS_UNDER_LOAD:-5}
	QUIET_WAIT=${QUIET_WAIT:-20}
fi
IDLE_WORKERS=${IDLE_WORKERS:-1 2 4}
IDLE_GAP=${IDLE_GAP:-300ms}  # quiet time before each idle reload
CONNS=${CONNS:-64}           # keep-alive clients under load
WARMUP=${WARMUP:-1s}         # load before the measured DUR
BUCKET_MS=${BUCKET_MS:-100}
SERVER_CPU=${SERVER_CPU:-0}  # under load: servery (and its workers) here,
LOAD_CPU=${LOAD_CPU:-1}      # the load client here; idle runs are unpinned
BASE_PORT=${BASE_PORT:-18380} # ports BASE_PORT to BASE_PORT+9
QUIET_PCT=${QUIET_PCT:-10}    # before each run wait up to QUIET_WAIT s (QUIET_BUDGET in all)
QUIET_BUDGET=${QUIET_BUDGET:-60} # until other work uses at most QUIET_PCT % of the CPUs

# ---------------------------------------------------------------- plumbing
T=""
START_EPOCH=$(date +%s)
say() { printf '[reload %s] %s\n' "$(date +%T)" "$*" >&2; }
die() {
	say "FATAL: $*"
	exit 1
}

# Process bookkeeping as in bench/run.sh: every process we start leads its
# own session (setsid) and goes into $T/pids, and so does each servery the
# helper starts (its pid file); servery's workers lead their own sessions,
# so descendants are signalled one by one too.
descendants() {
	local c
	for c in $(pgrep -P "$1" 2>/dev/null || true); do
		echo "$c"
		descendants "$c"
	done
}
signal_tree() { # SIG PID
	local sig=$1 pid=$2 d
	for d in $(descendants "$pid"); do
		kill -s "$sig" -- "-$d" 2>/dev/null || true
		kill -s "$sig" "$d" 2>/dev/null || true
	done
	kill -s "$sig" -- "-$pid" 2>/dev/null || true
	kill -s "$sig" "$pid" 2>/dev/null || true
}
track() { echo "$1" >>"$T/pids"; }
# ours lists running processes whose executable is in our temp dir or
# whose command line names it: only ours can.
ours() {
	local p pid exe
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		if [[ $exe == "$T/"* ]] || tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "$T/"; then
			echo "$pid"
		fi
	done
}
cleanup() {
	local rc=$? pid
	set +e
	trap - EXIT INT TERM
	if [[ -n $T && -d $T ]]; then
		for f in "$T"/pids "$T"/run/*.pid; do
			[[ -s $f ]] || continue
			while read -r pid; do [[ $pid =~ ^[0-9]+$ ]] && signal_tree TERM "$pid"; done <"$f"
		done
		sleep 0.3
		for f in "$T"/pids "$T"/run/*.pid; do
			[[ -s $f ]] || continue
			while read -r pid; do [[ $pid =~ ^[0-9]+$ ]] && signal_tree KILL "$pid"; done <"$f"
		done
		for pid in $(ours); do
			say "cleanup: killing leftover pid $pid"
			kill -KILL "$pid" 2>/dev/null
		done
		wait 2>/dev/null
		if [[ $rc != 0 && -s ${R:-/nonexistent} ]]; then
			mkdir -p "$OUT_DIR" && cp "$R" "$OUT_DIR/reload.partial.md" &&
				say "partial report saved to $OUT_DIR/reload.partial.md"
		fi
		rm -rf "$T"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

median() { sort -g | awk '{a[NR]=$1} END{if(NR==0){print "NaN"; exit} if(NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
minmax() { sort -g | awk 'NR==1{lo=$1} {hi=$1} END{if(NR==0) print "NaN NaN"; else print lo, hi}'; }
col() { awk -F'\t' -v c="$1" 'NR>1 && $c!="NaN" {print $c}' "$2"; } # column C of TSV file, no header
fmt() { awk -v x="$1" -v f="$2" 'BEGIN{if (x=="NaN"||x=="") print "n/a"; else printf f, x}'; }
R=""
md() { printf '%s\n' "$@" >>"$R"; }
problem() {
	printf -- '- %s\n' "$*" >>"$T/problems"
	say "PROBLEM: $*"
}
cpu_busy() { awk '/^cpu / {print $2+$3+$4+$9}' /proc/stat; }
QUIET_WAITED=0
wait_quiet() { # until other work uses at most QUIET_PCT % of the CPUs (none of ours runs now)
	((QUIET_WAIT > 0)) || return 0
	local t0 now b0 b1 pct said=0
	t0=$(date +%s)
	while :; do
		b0=$(cpu_busy)
		sleep 0.5
		b1=$(cpu_busy)
		pct=$(awk -v d="$((b1 - b0))" -v hz="$CLK_TCK" -v n="$NPROC" 'BEGIN{printf "%.0f", 100*d/(hz*0.5*n)}')
		((pct <= QUIET_PCT)) && break
		now=$(date +%s)
		if ((now - t0 >= QUIET_WAIT || QUIET_WAITED + now - t0 >= QUIET_BUDGET)); then
			say "  box still busy (${pct}% of the CPUs used by other work); going on"
			break
		fi
		((said)) || say "  box busy (${pct}% of the CPUs used by other work); waiting up to ${QUIET_WAIT}s"
		said=1
	done
	QUIET_WAITED=$((QUIET_WAITED + $(date +%s) - t0))
}
# run_tool NAME LIMIT_S CMD...: CMD (the helper, maybe under taskset) in
# its own session, bounded by timeout; returns its exit status.
run_tool() {
	local name=$1 limit=$2 pid rc=0
	shift 2
	setsid timeout -k 5 "$limit" "$@" >"$T/logs/$name.tool.out" 2>&1 </dev/null &
	pid=$!
	track "$pid"
	wait "$pid" || rc=$?
	return "$rc"
}
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---------------------------------------------------------------- setup
T=$(mktemp -d /tmp/servery-reload.XXXXXX)
mkdir -p "$T/bin" "$T/logs" "$T/run" "$T/site" "$T/src/reloadtool"
: >"$T/pids"
: >"$T/problems"
R=$T/report.md
: >"$R"

for tool in go setsid timeout taskset pgrep awk; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
if ! command -v gnuplot >/dev/null; then
	say "installing gnuplot-nox (apt-get)"
	{ apt-get update && apt-get install -y gnuplot-nox; } >"$T/logs/apt.log" 2>&1 ||
		die "apt-get install gnuplot-nox failed: $(tail -5 "$T/logs/apt.log")"
fi
command -v gnuplot >/dev/null || die "gnuplot missing after install"
NPROC=$(nproc)
CLK_TCK=$(getconf CLK_TCK)
PIN=1
if ((NPROC < 2)); then
	say "warning: only $NPROC CPU; server and load client cannot be separated, running unpinned"
	PIN=0
fi

COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=""
git -C "$REPO" diff --quiet HEAD -- '*.go' go.mod 2>/dev/null || DIRTY="+dirty"
DATE=$(date -u +%Y-%m-%d)
CMDLINE="bash bench/reload.sh"
[[ $QUICK == 1 ]] && CMDLINE="QUICK=1 $CMDLINE"

say "building servery from $REPO (commit $COMMIT$DIRTY)"
SRC_HASH=$(cd "$REPO" && cat ./*.go go.mod 2>/dev/null | sha256sum | cut -c1-12)
(cd "$REPO" && go build -o "$T/bin/servery" .) >"$T/logs/build.log" 2>&1 ||
	die "go build of servery failed: $(cat "$T/logs/build.log")"
# Someone may be editing the tree (or a mutation run may be rewriting it):
# the sources must be the same before and after the build.
[[ $(cd "$REPO" && cat ./*.go go.mod 2>/dev/null | sha256sum | cut -c1-12) == "$SRC_HASH" ]] ||
	die "the Go sources changed while servery was being built; run again"
git -C "$REPO" diff --quiet HEAD -- '*.go' go.mod 2>/dev/null || DIRTY="+dirty"
BIN_HASH=$(sha256sum "$T/bin/servery" | cut -c1-12)

cat >"$T/src/reloadtool/main.go" <<'EOF'
// reloadtool is the timing half of bench/reload.sh (written out and built
// by it). Both modes exec the servery command given after --, in its own
// session, read its stderr from a pipe (stamping each line with this
// process's clock and copying it to -log), wait for msg=serving, and end
// by SIGTERM to servery and waiting for it to exit.
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
	cmd   *exec.Cmd
	lines chan line
	done  chan struct{} // stderr closed
	pid   int
}

func start(args []string, logPath, pidPath string) *server {
	if len(args) == 0 {
		die("no servery command after --")
	}
	logf, err := os.Create(logPath)
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
	if err := cmd.Start(); err != nil {
		die("start %v: %v", args, err)
	}
	if pidPath != "" {
		os.WriteFile(pidPath, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	}
	s := &server{cmd: cmd, lines: make(chan line, 4096), done: make(chan struct{}), pid: cmd.Process.Pid}
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
	// Stop servery if we are told to stop.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		s.stop(5 * time.Second)
		os.Exit(1)
	}()
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
	fs.Parse(args)
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
		if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			fail(err)
		}
		req, err := s.next("reload requested", "", *timeout)
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
	fs.Parse(args)
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
	s.drainLines(map[string]bool{"reload requested": true, "reloaded": true, "generation retired": true,
		"reload failed, still serving": true, "reload waits for the retiring generation": true,
		"old handler stopped with requests on it": true},
		func(l line) { evMu.Lock(); events = append(events, l); evMu.Unlock() })

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
			trace := &httptrace.ClientTrace{
				GotConn: func(i httptrace.GotConnInfo) {
					gotConns++
					lastReused = i.Reused
					if i.Reused {
						reused++
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
			s.cmd.Process.Signal(syscall.SIGHUP)
		}
	}()
	wg.Wait()
	hwg.Wait()
	tr.CloseIdleConnections()
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
		if e.msg == "reload requested" {
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
	os.WriteFile(*reloadsPath, rl.Bytes(), 0o644)

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
	os.WriteFile(*sumPath, sum.Bytes(), 0o644)
}

func main() {
	if len(os.Args) < 2 {
		die("usage: reloadtool idle|load [flags] -- CMD...")
	}
	switch os.Args[1] {
	case "idle":
		idle(os.Args[2:])
	case "load":
		load(os.Args[2:])
	default:
		die("unknown mode %q", os.Args[1])
	}
}
EOF
printf 'module reloadtool\n\ngo 1.22\n' >"$T/src/reloadtool/go.mod"
(cd "$T/src/reloadtool" && go build -o "$T/bin/reloadtool" .) >"$T/logs/build-tool.log" 2>&1 ||
	die "go build of the helper failed: $(cat "$T/logs/build-tool.log")"

# The site: one fixed 1 KiB file.
awk 'BEGIN{for (i = 0; i < 1024; i++) printf "%c", (i % 64 == 63) ? 10 : 97 + (i * 7) % 26}' >"$T/site/1k.html"
[[ $(stat -c %s "$T/site/1k.html") == 1024 ]] || die "1k.html is not 1024 bytes"

# after_run NAME: every process of the run has gone (ours() is empty), or
# it is a problem and they are killed.
after_run() {
	local i left
	for i in $(seq 40); do
		left=$(ours | wc -l)
		((left == 0)) && return 0
		sleep 0.05
	done
	problem "$1: $left processes left after the run: $(ours | paste -sd' ' -)"
	for i in $(ours); do kill -KILL "$i" 2>/dev/null || true; done
}

# ---------------------------------------------------------------- 1. idle
say "idle reloads: workers $IDLE_WORKERS, $IDLE_RELOADS each"
k=0
for w in $IDLE_WORKERS; do
	port=$((BASE_PORT + k))
	k=$((k + 1))
	port_free "$port" || die "port $port is already in use"
	wait_quiet
	say "  -workers $w"
	if ! run_tool "idle-w$w" 120 "$T/bin/reloadtool" idle -n "$IDLE_RELOADS" -gap "$IDLE_GAP" \
		-log "$T/logs/idle-w$w.log" -pidfile "$T/run/idle-w$w.pid" -out "$T/idle-w$w.tsv" -other "$T/idle-w$w.other" \
		-- "$T/bin/servery" -workers "$w" -dir "$T/site" -addr "127.0.0.1:$port"; then
		problem "idle -workers $w: the run failed: $(tail -3 "$T/logs/idle-w$w.tool.out" | tr '\n' ' ')"
	fi
	after_run "idle -workers $w"
done

# ---------------------------------------------------------------- 2. load
# SIGHUPs evenly spread: at k*DUR/(N+1) s.
HUPS=$(awk -v d="$DUR" -v n="$RELOADS_UNDER_LOAD" 'BEGIN{for (k = 1; k <= n; k++) printf "%s%dms", (k>1?",":""), int(1000*k*d/(n+1)+0.5)}')
NORETRY_WORKERS=${NORETRY_WORKERS:-4} # also run these worker counts with non-replayable requests
LOAD_RUNS=()
for w in $LOAD_WORKERS; do LOAD_RUNS+=("w$w|$w|false"); done
for w in $NORETRY_WORKERS; do LOAD_RUNS+=("w$w-noretry|$w|true"); done
srv_pin=()
cli_pin=()
if ((PIN)); then
	srv_pin=(taskset -c "$SERVER_CPU")
	cli_pin=(taskset -c "$LOAD_CPU")
fi
for run in "${LOAD_RUNS[@]}"; do
	IFS='|' read -r id w noretry <<<"$run"
	port=$((BASE_PORT + k))
	k=$((k + 1))
	port_free "$port" || die "port $port is already in use"
	wait_quiet
	say "load: $id: $CONNS keep-alive clients, ${DUR}s, SIGHUP at $HUPS"
	if ! run_tool "load-$id" $((DUR + 60)) "${cli_pin[@]}" "$T/bin/reloadtool" load -noretry="$noretry" \
		-url "http://127.0.0.1:$port/1k.html" -expect "$T/site/1k.html" -c "$CONNS" -warmup "$WARMUP" \
		-dur "${DUR}s" -bucket "${BUCKET_MS}ms" -hups "$HUPS" \
		-log "$T/logs/load-$id.log" -pidfile "$T/run/load-$id.pid" -csv "$T/load-$id.csv" \
		-reloads "$T/load-$id.tsv" -summary "$T/load-$id.sum" \
		-- "${srv_pin[@]}" "$T/bin/servery" -workers "$w" -dir "$T/site" -addr "127.0.0.1:$port"; then
		problem "load $id: the run failed: $(tail -3 "$T/logs/load-$id.tool.out" | tr '\n' ' ')"
	fi
	after_run "load $id"
done

# ---------------------------------------------------------------- report
sumv() { [[ -f $2 ]] && awk -v k="$1" 'index($0, k "=") == 1 {print substr($0, length(k) + 2)}' "$2" || true; }
ms2() { awk -v x="$1" 'BEGIN{if (x=="NaN"||x=="") print "n/a"; else printf "%.1f", x/1000}'; } # us -> ms

md "# servery reload (SIGHUP) benchmark" ""
md "\`$CMDLINE\` at commit $COMMIT$DIRTY (Go sources sha256 $SRC_HASH, binary $BIN_HASH), $(date -u '+%Y-%m-%d %H:%M UTC'), $NPROC CPUs, $(go version | awk '{print $3}')."
md ""
md "## 1. Reload latency, idle server ($IDLE_RELOADS reloads per row, one at a time, $IDLE_GAP apart; unpinned)" ""
md "ready = SIGHUP until \`msg=reloaded\` (every new worker ready, the new generation serving); gone = SIGHUP until \`msg=\"generation retired\"\` (every old worker drained, exited and reaped). Script clock: the helper takes the time just before kill(SIGHUP) and when it reads each line from servery's stderr pipe (microseconds). Log: servery's own \`time=\` stamps, from the \`reload requested\` line (millisecond resolution, so +-1 ms)."
md ""
md "| workers | ready, median (min-max) ms, script clock | gone, median (min-max) ms, script clock | ready / gone median ms, log | SIGHUP to \`reload requested\` line, median ms | old workers alive after \`retired\` | other work on box |"
md "|---:|---|---|---|---:|---:|---:|"
for w in $IDLE_WORKERS; do
	f=$T/idle-w$w.tsv
	if [[ ! -s $f ]] || (($(wc -l <"$f") < 2)); then
		md "| $w | n/a | n/a | n/a | n/a | n/a | n/a |"
		continue
	fi
	n=$(($(wc -l <"$f") - 1))
	read -r rlo rhi < <(col 3 "$f" | minmax)
	read -r glo ghi < <(col 4 "$f" | minmax)
	rmed=$(col 3 "$f" | median)
	gmed=$(col 4 "$f" | median)
	lr=$(col 5 "$f" | median)
	lg=$(col 6 "$f" | median)
	lag=$(col 2 "$f" | median)
	alive=$(col 7 "$f" | awk '{s+=$1} END{print s+0}')
	((alive == 0)) || problem "idle -workers $w: $alive old workers still alive after their generation's \`generation retired\` line"
	((n == IDLE_RELOADS)) || problem "idle -workers $w: $n of $IDLE_RELOADS reloads completed"
	md "| $w$([[ $w == 1 ]] && echo ' (direct)') | $(ms2 "$rmed") ($(ms2 "$rlo")-$(ms2 "$rhi")) | $(ms2 "$gmed") ($(ms2 "$glo")-$(ms2 "$ghi")) | $(fmt "$lr" '%g') / $(fmt "$lg" '%g') | $(ms2 "$lag") | $alive | $(cat "$T/idle-w$w.other" 2>/dev/null || echo n/a) % |"
done
md ""
md "- Direct mode (-workers 1) starts no processes: a reload rebuilds the handler in-process and swaps it in, so ready and gone are close together and tiny."
md ""

md "## 2. Under keep-alive load: $CONNS clients, GET /1k.html, ${DUR} s measured after $WARMUP warmup, SIGHUP at $(tr ',' ' ' <<<"$HUPS")" ""
md "Load: a Go net/http client written by the script (wrk cannot bucket by time): $CONNS goroutines sharing one keep-alive Transport, each GETting in a loop; every response is checked byte for byte and counted in the ${BUCKET_MS} ms bucket of its completion time. $( ((PIN)) && echo "servery and its workers pinned to CPU $SERVER_CPU, the client to CPU $LOAD_CPU." || echo "Unpinned (one CPU).")"
md ""
md "- **GET** rows: ordinary GETs. Go's Transport silently sends a GET again when a reused connection closes before any response byte (the keep-alive race); the script sees each such retry through httptrace (a second \`GotConn\` within one request) and counts it as a keep-alive-race closure, but the request itself succeeds."
md "- **non-replayable** rows: the same GET with an empty body that is not \`http.NoBody\` and no \`GetBody\` (nothing more on the wire), which the Transport will not retry: what a POST, or a client that never retries, would see. A keep-alive race is then an error."
md ""
md "| run | workers | requests | mean req/s | median bucket req/s | lowest bucket within 1 s after a SIGHUP (% of median) | lowest bucket elsewhere (% of median) | buckets < 50 % of median / at 0 | truncated | refused | keep-alive-race closures (retried / failed) | other errors | reloads done / failed | other work on box |"
md "|---|---:|---:|---:|---:|---|---|---|---:|---:|---|---:|---|---:|"
TOT_REQ=0 TOT_TRUNC=0 TOT_REF=0 TOT_RACE=0 TOT_RACEF=0 TOT_OTHER=0
for run in "${LOAD_RUNS[@]}"; do
	IFS='|' read -r id w noretry <<<"$run"
	s=$T/load-$id.sum
	label=$([[ $noretry == true ]] && echo non-replayable || echo GET)
	if [[ ! -s $s ]]; then
		md "| $label | $w | n/a | | | | | | | | | | | |"
		continue
	fi
	req=$(sumv requests "$s") trunc=$(sumv truncated "$s") ref=$(sumv refused "$s")
	race=$(sumv ka_race "$s") racef=$(sumv ka_race_failed "$s") other=$(sumv other "$s")
	TOT_REQ=$((TOT_REQ + req)) TOT_TRUNC=$((TOT_TRUNC + trunc)) TOT_REF=$((TOT_REF + ref))
	TOT_RACE=$((TOT_RACE + race)) TOT_RACEF=$((TOT_RACEF + racef)) TOT_OTHER=$((TOT_OTHER + other))
	worst=$(awk -F'\t' 'NR>1 && (m=="" || $5+0 < m+0) {m=$5; p=$6} END{if (m=="") print "n/a"; else printf "%s (%s %%)", m, p}' "$T/load-$id.tsv")
	ndone=$(awk -F'\t' 'NR>1 && $4!="NaN"' "$T/load-$id.tsv" | wc -l)
	nfail=$(sumv reloads_failed "$s")
	md "| $label | $w | $req | $(sumv rps_mean "$s") | $(sumv rps_median_bucket "$s") | $worst | $(sumv min_rps_away "$s") | $(sumv low_buckets "$s") / $(sumv zero_buckets "$s") of $(sumv buckets "$s") | $trunc | $ref | $((race - racef)) / $racef | $other | $ndone / $nfail of $RELOADS_UNDER_LOAD | $(sumv other_pct "$s") % |"
	((trunc == 0)) || problem "load $id: $trunc truncated responses"
	((ref == 0)) || problem "load $id: $ref refused connections"
	((other == 0)) || problem "load $id: $other other errors: $(sumv other_kind "$s" | head -3 | paste -sd';' -)"
	((nfail == 0)) || problem "load $id: $nfail reloads failed"
	((ndone == RELOADS_UNDER_LOAD)) || problem "load $id: $ndone of $RELOADS_UNDER_LOAD reloads reached \`generation retired\`"
	[[ $(sumv servery_exit "$s") == ok ]] || problem "load $id: servery's exit: $(sumv servery_exit "$s")"
	if [[ $noretry == true ]] && ((racef > 0)); then
		problem "load $id: $racef non-replayable requests failed on a reused connection closed before any response byte (a POST would be lost): $(sumv race_kind "$s" | head -3 | paste -sd';' -)"
	fi
done
md ""
md "**Totals** over the load runs: $TOT_REQ requests, $TOT_TRUNC truncated, $TOT_REF refused, $TOT_RACE keep-alive-race closures ($((TOT_RACE - TOT_RACEF)) retried by the Transport, $TOT_RACEF failed), $TOT_OTHER other errors."
md ""
md "Per reload (log timestamps, from \`reload requested\`; the lowest bucket is over the 1 s from the SIGHUP):"
md ""
md "| run | workers | reload | SIGHUP at (s) | ready (ms) | gone (ms) | lowest bucket req/s (% of median) |"
md "|---|---:|---:|---:|---:|---:|---:|"
for run in "${LOAD_RUNS[@]}"; do
	IFS='|' read -r id w noretry <<<"$run"
	[[ -s $T/load-$id.tsv ]] || continue
	label=$([[ $noretry == true ]] && echo non-replayable || echo GET)
	awk -F'\t' -v l="$label" -v w="$w" 'NR>1 {printf "| %s | %s | %s | %s | %s | %s | %s (%s %%) |\n", l, w, $1, $2, $3, $4, $5, $6}' "$T/load-$id.tsv" >>"$R"
done
md ""
for run in "${LOAD_RUNS[@]}"; do
	IFS='|' read -r id w noretry <<<"$run"
	s=$T/load-$id.sum
	[[ -s $s ]] || continue
	rk=$(sumv race_kind "$s" | head -4 | sed 's/^\([0-9]*\) /\1x /' | paste -sd';' -)
	if [[ -n $rk ]]; then md "- $id, errors of the failed keep-alive-race closures: $rk"; fi
	w8=$(sumv reload_waits "$s")
	if ((w8 > 0)); then md "- $id: $w8 reload(s) waited for the previous generation to finish retiring (\`reload waits for the retiring generation\`)."; fi
done
slow=$(cat "$T"/load-*.tsv 2>/dev/null | awk -F'\t' '$1 != "reload" && $4 != "NaN" && $4+0 >= 900' | wc -l)
if ((slow > 0)); then
	md "- $slow reload(s) took 0.9 s or more to retire the old generation under load. The drain's closeGrace (drain.go) is 1 s: the old workers wait up to that long for their HTTP/1 clients to leave on a \`Connection: close\` answer, and a connection that the client holds idle (a Transport keeps spare ones in its pool) only goes when Shutdown closes it at the end of that second."
fi
md ""
md "![req/s per ${BUCKET_MS} ms bucket across reloads](reload-rps.svg)"
md ""

# ---------------------------------------------------------------- CSV, plot
mkdir -p "$OUT_DIR"
{
	echo "run,workers,t_ms,rps,errors,ka_race"
	for run in "${LOAD_RUNS[@]}"; do
		IFS='|' read -r id w _ <<<"$run"
		[[ -s $T/load-$id.csv ]] && awk -v id="$id" -v w="$w" 'NR>1 {print id "," w "," $0}' "$T/load-$id.csv"
	done
} >"$OUT_DIR/reload-rps.csv"
plots=()
Y2=0
colors=("#1f77b4" "#2ca02c" "#9467bd" "#8c564b")
ci=0
for run in "${LOAD_RUNS[@]}"; do
	IFS='|' read -r id w noretry <<<"$run"
	[[ -s $T/load-$id.csv ]] || continue
	f=$OUT_DIR/reload-rps-$id.csv
	cp "$T/load-$id.csv" "$f"
	if [[ $noretry == true ]]; then
		plots+=("'$f' skip 1 using (\$1/1000):2 with steps lw 1 dt 3 lc rgb '${colors[ci % 4]}' title '-workers $w, non-replayable GET'")
		if awk -F, 'NR>1 && $3>0 {f=1} END{exit !f}' "$f"; then
			plots+=("'$f' skip 1 using (\$1/1000+$BUCKET_MS/2000.0):(\$3>0?\$3:1/0) axes x1y2 with points pt 7 ps 0.6 lc rgb '#d62728' title 'failed requests per bucket, -workers $w non-replayable (right axis)'")
			Y2=1
		fi
	else
		plots+=("'$f' skip 1 using (\$1/1000):2 with steps lw 1.5 lc rgb '${colors[ci % 4]}' title '-workers $w, GET'")
		if awk -F, 'NR>1 && $4>0 {f=1} END{exit !f}' "$f"; then
			plots+=("'$f' skip 1 using (\$1/1000+$BUCKET_MS/2000.0):(\$4>0?\$4:1/0) axes x1y2 with impulses lw 2 lc rgb '${colors[ci % 4]}' title 'keep-alive-race retries per bucket, -workers $w GET (right axis)'")
			Y2=1
		fi
	fi
	ci=$((ci + 1))
done
{
	echo "set terminal svg size 960,540 font 'sans,12' noenhanced"
	echo "set output '$OUT_DIR/reload-rps.svg'"
	echo "set datafile separator ','"
	echo "set title \"servery reload under keep-alive load: req/s per $BUCKET_MS ms bucket, -workers $(tr ' ' ',' <<<"$LOAD_WORKERS"), $CONNS clients, $RELOADS_UNDER_LOAD SIGHUPs (dashed red)\\ncommit $COMMIT$DIRTY, $DATE\""
	echo "set xlabel 'time since the start of measurement (s)'"
	echo "set ylabel 'requests/s (completions per $BUCKET_MS ms bucket x $((1000 / BUCKET_MS)))'"
	if ((Y2)); then
		echo "set y2label 'keep-alive-race retries (bars) / failed requests (dots) per bucket'"
		echo "set y2tics"
		echo "set ytics nomirror"
		echo "set y2range [0:*]"
	fi
	echo "set xrange [0:$DUR]"
	echo "set yrange [0:*]"
	echo "set grid ytics lc rgb '#dddddd'"
	echo "set key outside bottom center horizontal font ',10'"
	echo "set bmargin 7"
	for h in $(tr ',' ' ' <<<"$HUPS"); do
		echo "set arrow from ${h%ms}/1000.0, graph 0 to ${h%ms}/1000.0, graph 1 nohead dt 2 lw 1.5 lc rgb '#d62728' back"
	done
	echo "set label 1 'made by: $CMDLINE (commit $COMMIT$DIRTY, Go sources sha256 $SRC_HASH, $DATE)' at screen 0.01, screen 0.015 font ',9' tc rgb '#555555'"
	printf 'plot '
	printf '%s' "${plots[0]:-1/0 notitle}"
	for p in "${plots[@]:1}"; do printf ', \\\n\t%s' "$p"; done
	echo
} >"$T/plot.gp"
rm -f "$OUT_DIR/reload-rps.svg"
if ! gnuplot "$T/plot.gp" 2>"$T/logs/gnuplot.log"; then
	problem "gnuplot failed: $(head -5 "$T/logs/gnuplot.log" | tr '\n' ' ')"
fi
cp "$T/plot.gp" "$T/logs/"

# ---------------------------------------------------------------- problems, notes
left=$(ours | wc -l)
((left == 0)) || problem "$left processes of ours still running before cleanup: $(ours | paste -sd' ' -)"
md "## Problems observed" ""
if [[ -s $T/problems ]]; then cat "$T/problems" >>"$R"; else md "- none: every reload completed and retired its old generation, no response was truncated, nothing was refused, no other errors, no process left."; fi
md ""
md "## Caveats" ""
md "- $NPROC CPUs shared by servery (old and new generation at once during a reload) and the load client; loopback only; a 1 KiB file from the worker's in-memory cache. The Go client is heavier per request than wrk, so the req/s level is the client's and the pair's, not servery's ceiling; what matters here is the shape around each SIGHUP."
md "- The box may be shared: before each run the script waited (up to ${QUIET_WAIT} s, ${QUIET_BUDGET} s in all; waited ${QUIET_WAITED} s) for other work to use at most ${QUIET_PCT} % of the CPUs; the other-work column is what other processes took during each run (box busy time minus the helper's and servery's). Above a few % the buckets are noisy independently of the reloads."
md "- Buckets are by response completion time; a bucket's req/s is its count x $((1000 / BUCKET_MS)). Reload timestamps under load come from servery's log (1 ms resolution)."
md "- Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg). Wall time: $(($(date +%s) - START_EPOCH)) s."

rm -rf "$OUT_DIR/reload-raw"
cp -r "$T/logs" "$OUT_DIR/reload-raw"
cp "$T"/*.tsv "$T"/*.sum "$OUT_DIR/reload-raw/" 2>/dev/null || true
cp "$R" "$OUT_DIR/reload.md"
rm -f "$OUT_DIR/reload.partial.md"
cat "$R"
say "done in $(($(date +%s) - START_EPOCH)) s; report saved to $OUT_DIR/reload.md, plot to $OUT_DIR/reload-rps.svg"
if grep -qvE 'non-replayable requests failed' "$T/problems"; then exit 1; fi
exit 0
