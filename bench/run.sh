#!/usr/bin/env bash
# bench/run.sh: servery benchmark suite, end to end, in one command.
#
#   bash bench/run.sh            full run (about 13-19 minutes on 2 cores)
#   QUICK=1 bash bench/run.sh    smoke test (DUR=2s, TRIALS=1, 3 startup trials)
#   SECTIONS=https bash bench/run.sh   only some sections (throughput,app,balance,startup,memory,https)
#   SECTIONS=app bash bench/run.sh     the application workload (a vendored App writing
#                                      1 KiB from memory, 1/2/4 workers) beside servery's
#                                      static 1 KiB rows and bare net/http, one core
#
# Prints a Markdown report on stdout and saves it to bench/out/report.md;
# raw wrk outputs and server logs go to bench/out/raw/. Progress goes to
# stderr. See bench/README.md for what is measured and what the targets mean.
#
# Every server listens on 127.0.0.1 only, every load run is bounded in time,
# and the EXIT trap kills every process (group) this script started and
# removes its temp dir. Nothing in the repository is modified except bench/out/.
set -Eeuo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
OUT_DIR="$SCRIPT_DIR/out"

# ---------------------------------------------------------------- settings
QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
	DUR=${DUR:-2s}
	TRIALS=${TRIALS:-1}
	STARTUP_TRIALS=${STARTUP_TRIALS:-3}
else
	DUR=${DUR:-5s}
	TRIALS=${TRIALS:-3}
	STARTUP_TRIALS=${STARTUP_TRIALS:-11}
fi
BAL_DUR=${BAL_DUR:-$DUR}     # each connection-balance run
WARMUP=${WARMUP:-1s}         # wrk warmup before every measured run
CONNS=${CONNS:-64}           # wrk -c
MEM_LOAD=${MEM_LOAD:-1s}     # load between the two memory snapshots
IDLE_BEFORE_STOP=${IDLE_BEFORE_STOP:-200ms} # startup test: idle time before SIGTERM
BASE_PORT=${BASE_PORT:-18180}
SERVER_CPU=${SERVER_CPU:-0}  # one-core rows: server here ...
WRK_CPU=${WRK_CPU:-1}        # ... and wrk here
PAIR_CPUS=${PAIR_CPUS:-0-1}  # two-core rows: server and wrk both here
STOP_WAIT=${STOP_WAIT:-20}   # seconds a server gets to exit after SIGTERM
SECTIONS=${SECTIONS:-throughput,app,balance,startup,memory,https} # a subset runs only those
HTTPS_WORKERS=${HTTPS_WORKERS:-2} # https section: servery -workers N next to direct mode
H2_CONNS=${H2_CONNS:-$CONNS}      # https section: h2load -c
H2_STREAMS=${H2_STREAMS:-10}      # https section: h2load -m (concurrent streams per connection)
# The box may be shared (other people's builds and tests). Before each
# measurement wait up to QUIET_WAIT s (QUIET_BUDGET s in all) for other work
# to use at most QUIET_PCT % of all CPUs, and rerun a throughput measurement
# (up to NOISY_RETRIES times) when other work took more than NOISY_PCT % of
# the CPUs during it. QUIET_WAIT=0 NOISY_RETRIES=0 turns this off.
QUIET_PCT=${QUIET_PCT:-10}
NOISY_PCT=${NOISY_PCT:-10}
if [[ $QUICK == 1 ]]; then
	QUIET_WAIT=${QUIET_WAIT:-10}
	QUIET_BUDGET=${QUIET_BUDGET:-60}
	NOISY_RETRIES=${NOISY_RETRIES:-1}
else
	QUIET_WAIT=${QUIET_WAIT:-30}
	QUIET_BUDGET=${QUIET_BUDGET:-240}
	NOISY_RETRIES=${NOISY_RETRIES:-2}
fi

# ---------------------------------------------------------------- plumbing
T=""
say() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() {
	say "FATAL: $*"
	exit 1
}

# Process bookkeeping: every process we start (server, helper) is a session
# and process-group leader (setsid); its pid goes into $T/pids and leaves it
# once we have seen it exit. servery workers lead their own sessions, so
# descendants are looked up and signalled one by one too.
descendants() {
	local c
	for c in $(pgrep -P "$1" 2>/dev/null || true); do
		echo "$c"
		descendants "$c"
	done
}
signal_tree() { # SIG PID: the group led by PID, PID itself, every descendant (and the groups they lead)
	local sig=$1 pid=$2 d
	for d in $(descendants "$pid"); do
		kill -s "$sig" -- "-$d" 2>/dev/null || true
		kill -s "$sig" "$d" 2>/dev/null || true
	done
	kill -s "$sig" -- "-$pid" 2>/dev/null || true
	kill -s "$sig" "$pid" 2>/dev/null || true
}
track() { echo "$1" >>"$T/pids"; }
untrack() {
	[[ -f $T/pids ]] || return 0
	grep -vx -- "$1" "$T/pids" >"$T/pids.new" || true
	mv "$T/pids.new" "$T/pids"
}
# Safety net: any process running a binary from our temp dir, or with our
# temp dir on its command line (nginx -c $T/...). These can only be ours.
sweep() {
	local p pid exe part hit
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
		hit=0
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		[[ $exe == "$T/"* ]] && hit=1
		if [[ $hit == 0 ]]; then
			local -a parts=()
			mapfile -d '' parts <"$p/cmdline" 2>/dev/null || true
			for part in "${parts[@]}"; do [[ $part == *"$T/"* ]] && hit=1 && break; done
		fi
		if [[ $hit == 1 ]]; then
			say "cleanup: killing leftover pid $pid ($exe)"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done
}
cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	if [[ -n $T && -d $T ]]; then
		if [[ -s $T/pids ]]; then
			local pid
			while read -r pid; do [[ $pid =~ ^[0-9]+$ ]] && signal_tree TERM "$pid"; done <"$T/pids"
			sleep 0.5
			while read -r pid; do [[ $pid =~ ^[0-9]+$ ]] && signal_tree KILL "$pid"; done <"$T/pids"
		fi
		sweep
		wait 2>/dev/null
		if [[ $rc != 0 && -s ${R:-/nonexistent} ]]; then
			mkdir -p "$OUT_DIR" && cp "$R" "$OUT_DIR/report.partial.md" &&
				say "partial report saved to $OUT_DIR/report.partial.md"
		fi
		rm -rf "$T"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

want() { [[ ",$SECTIONS," == *",$1,"* ]]; }
dur_secs() { # 5s, 500ms, 1m -> seconds (integer, rounded up, at least 1)
	awk -v d="$1" 'BEGIN{n=d; u=d; sub(/[a-z]+$/,"",n); sub(/^[0-9.]+/,"",u);
		m = (u=="ms") ? 0.001 : (u=="m") ? 60 : (u=="h") ? 3600 : 1;
		s = n*m; i = int(s); if (i < s) i++; if (i < 1) i = 1; print i}'
}
median() { # numbers on stdin, one per line
	sort -g | awk '{a[NR]=$1} END{if(NR==0){print "NaN"; exit} if(NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'
}
mad_pct() { # numbers on stdin: median absolute deviation as % of the median
	local xs m
	xs=$(cat)
	m=$(median <<<"$xs")
	awk -v m="$m" '{d=$1-m; if(d<0)d=-d; print d}' <<<"$xs" | median | awk -v m="$m" '{if(m>0) printf "%.1f", 100*$1/m; else print "NaN"}'
}
fmt() { awk -v x="$1" -v f="$2" 'BEGIN{if (x=="NaN"||x=="") print "n/a"; else printf f, x}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (a==""||b==""||a=="NaN"||b=="NaN"||b==0) print "NaN"; else printf "%.3f", a/b}'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN{exit !(a!="NaN" && a>=b)}'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN{exit !(a!="NaN" && a<=b)}'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN{exit !(a!="NaN" && a<b)}'; }
mib() { awk -v k="$1" 'BEGIN{printf "%.1f", k/1024}'; }

verdict() { # VALUE OP TARGET [STRETCH]
	local v=$1 op=$2 t=$3 s=${4:-} res
	if $op "$v" "$t"; then res="**PASS**"; else res="**FAIL**"; fi
	if [[ -n $s ]]; then
		if $op "$v" "$s"; then res="$res (stretch $s: PASS)"; else res="$res (stretch $s: not met)"; fi
	fi
	echo "$res"
}
R="" # the report file
md() { printf '%s\n' "$@" >>"$R"; }
problem() {
	printf -- '- %s\n' "$*" >>"$T/problems"
	say "PROBLEM: $*"
}

# ---------------------------------------------------------------- setup
START_EPOCH=$(date +%s)
T=$(mktemp -d /tmp/servery-bench.XXXXXX)
chmod 755 "$T" # nginx workers may run as nobody and must reach the site
mkdir -p "$T/bin" "$T/logs" "$T/run" "$T/nginx/tmp" "$T/site" "$T/src/baseline" "$T/src/benchtool" "$T/tls" "$T/caddy"
: >"$T/pids"
: >"$T/problems"
R=$T/report.md

for tool in go curl taskset setsid pgrep awk; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
APT_PKGS=()
command -v wrk >/dev/null || APT_PKGS+=(wrk)
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || APT_PKGS+=(nginx-light)
if want https; then
	command -v openssl >/dev/null || APT_PKGS+=(openssl)
	command -v h2load >/dev/null || APT_PKGS+=(nghttp2-client)
	command -v caddy >/dev/null || APT_PKGS+=(caddy)
fi
if ((${#APT_PKGS[@]})); then
	say "installing ${APT_PKGS[*]} (apt-get)"
	{ apt-get update && apt-get install -y "${APT_PKGS[@]}"; } >"$T/logs/apt.log" 2>&1 ||
		die "apt-get install ${APT_PKGS[*]} failed: $(tail -5 "$T/logs/apt.log")"
fi
command -v wrk >/dev/null || die "wrk missing after install"
if want https; then
	for tool in openssl h2load caddy; do command -v "$tool" >/dev/null || die "$tool missing after install"; done
fi
NGINX=$(command -v nginx || true)
[[ -x $NGINX ]] || NGINX=/usr/sbin/nginx
[[ -x $NGINX ]] || die "nginx missing after install"

NPROC=$(nproc)
((NPROC >= 2)) || say "warning: only $NPROC CPU(s); server and wrk cannot be separated"

say "building servery from $REPO"
SRC_HASH=$(cd "$REPO" && cat ./*.go go.mod 2>/dev/null | sha256sum | cut -c1-12)
(cd "$REPO" && go build -o "$T/bin/servery" .) >"$T/logs/build.log" 2>&1 ||
	die "go build of servery failed: $(cat "$T/logs/build.log")"
BIN_HASH=$(sha256sum "$T/bin/servery" | cut -c1-12)

# The baselines, one program with two handlers, GOMAXPROCS from the
# environment (the Go runtime reads it), graceful Shutdown on SIGTERM/SIGINT
# so that their stop time is comparable with servery's drain.
#   baseline fileserver ADDR DIR: a plain net/http FileServer.
#   baseline bare ADDR FILE: the net/http ceiling, the same http.Server with
#     no timeouts and a handler that only writes a precomputed reply (FILE's
#     bytes, read once) with the headers servery sends for it, set by direct
#     map assignment of precomputed []string values.
#   baseline baretls ADDR CERT KEY FILE...: the same handler for every FILE
#     (at /BASENAME) over TLS with the given pair: the net/http HTTPS and
#     HTTP/2 ceiling. Its tls.Config is servery's (TLS 1.2 minimum, ALPN h2
#     then http/1.1), served as servery serves it (tls.NewListener, Serve),
#     and the http.Server keeps net/http's HTTP/2 defaults.
cat >"$T/src/baseline/main.go" <<'EOF'
package main

import (
	"context"
	"crypto/tls"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
)

func main() {
	usage := "usage: baseline fileserver ADDR DIR | baseline bare ADDR FILE | baseline baretls ADDR CERT KEY FILE..."
	if len(os.Args) < 4 {
		log.Fatal(usage)
	}
	var handler http.Handler
	var tlsConfig *tls.Config
	switch os.Args[1] {
	case "fileserver":
		handler = http.FileServer(http.Dir(os.Args[3]))
	case "bare":
		handler = bare(os.Args[3])
	case "baretls":
		if len(os.Args) < 6 {
			log.Fatal(usage)
		}
		cert, err := tls.LoadX509KeyPair(os.Args[3], os.Args[4])
		if err != nil {
			log.Fatal(err)
		}
		tlsConfig = &tls.Config{
			Certificates: []tls.Certificate{cert},
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"h2", "http/1.1"},
		}
		handler = bare(os.Args[5:]...)
	default:
		log.Fatalf("unknown baseline %q", os.Args[1])
	}
	srv := &http.Server{Addr: os.Args[2], Handler: handler, TLSConfig: tlsConfig}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	if tlsConfig == nil {
		go func() { errc <- srv.ListenAndServe() }()
	} else {
		ln, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			log.Fatal(err)
		}
		go func() { errc <- srv.Serve(tls.NewListener(ln, tlsConfig)) }()
	}
	select {
	case err := <-errc:
		log.Fatal(err)
	case <-ctx.Done():
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// bare answers GET /BASENAME of each file with its bytes and servery's
// headers, all precomputed.
func bare(files ...string) http.Handler {
	type reply struct {
		body                []byte
		contentLength, etag []string
	}
	replies := map[string]*reply{}
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			log.Fatal(err)
		}
		name := filepath.Base(file)
		replies["/"+name] = &reply{
			body:          body,
			contentLength: []string{strconv.Itoa(len(body))},
			etag:          []string{`"servery-bench-` + name + `"`},
		}
	}
	var (
		acceptRanges = []string{"bytes"}
		contentType  = []string{"text/html; charset=utf-8"}
		lastModified = []string{"Mon, 01 Jan 2024 00:00:00 GMT"}
		vary         = []string{"Accept-Encoding"}
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rp := replies[r.URL.Path]
		if rp == nil {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h["Accept-Ranges"] = acceptRanges
		h["Content-Length"] = rp.contentLength
		h["Content-Type"] = contentType
		h["Etag"] = rp.etag
		h["Last-Modified"] = lastModified
		h["Vary"] = vary
		w.WriteHeader(http.StatusOK)
		w.Write(rp.body)
	})
}
EOF
printf 'module baseline\n\ngo 1.22\n' >"$T/src/baseline/go.mod"

# benchtool: gensite (the fixed 1 KiB file) and firstanswer (startup/stop timing).
cat >"$T/src/benchtool/main.go" <<'EOF'
// benchtool gensite DIR
//   writes DIR/1k.html and DIR/64k.html: 1024 and 65536 fixed pseudo-random
//   printable bytes.
// benchtool firstanswer -url URL -len N -log FILE [-idle D] [-timeout D] [-poll D] -- CMD ARGS...
//   execs CMD (stdout+stderr to FILE), GETs URL every -poll until a 200 with
//   a body of N bytes, idles -idle, sends SIGTERM and waits for CMD to exit.
//   Both timestamps are taken in this process. Prints
//   "ready_ms=R stop_ms=S exit=E".
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: benchtool gensite|firstanswer ...")
	}
	switch os.Args[1] {
	case "gensite":
		gensite(os.Args[2])
	case "firstanswer":
		firstAnswer(os.Args[2:])
	default:
		fail("unknown subcommand " + os.Args[1])
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "benchtool:", msg)
	os.Exit(1)
}

func gensite(dir string) {
	genfile(dir, "1k", 1024, 42)
	genfile(dir, "64k", 64<<10, 43)
}

func genfile(dir, name string, size int, seed uint64) {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n"
	head := "<!doctype html><title>servery bench " + name + "</title><pre>\n"
	tail := "\n</pre>\n"
	r := rand.New(rand.NewPCG(20240101, seed))
	b := []byte(head)
	for len(b) < size-len(tail) {
		b = append(b, alphabet[r.IntN(len(alphabet))])
	}
	b = append(b, tail...)
	if err := os.WriteFile(filepath.Join(dir, name+".html"), b, 0o644); err != nil {
		fail(err.Error())
	}
}

// killTree SIGKILLs pid and every descendant (servery workers lead their
// own sessions, so a group signal would not reach them).
func killTree(pid int) {
	for _, c := range children(pid) {
		killTree(c)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

func children(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

func firstAnswer(args []string) {
	fs := flag.NewFlagSet("firstanswer", flag.ExitOnError)
	url := fs.String("url", "", "URL to poll")
	wantLen := fs.Int("len", -1, "required body length (-1: any)")
	logPath := fs.String("log", os.DevNull, "file for the command's stdout and stderr")
	idle := fs.Duration("idle", 200*time.Millisecond, "idle time between the first answer and SIGTERM")
	timeout := fs.Duration("timeout", 15*time.Second, "limit for start, and again for stop")
	poll := fs.Duration("poll", time.Millisecond, "poll interval")
	fs.Parse(args)
	argv := fs.Args()
	if len(argv) == 0 || *url == "" {
		fail("firstanswer: need -url and a command")
	}
	logf, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fail(err.Error())
	}
	// An *os.File, not a pipe: Wait then returns when the process exits,
	// not when every descendant has closed its copy of the descriptor.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	client := &http.Client{
		Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
		Timeout:   2 * time.Second,
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		fail(err.Error())
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	go func() { <-sigs; killTree(pid); os.Exit(130) }()

	deadline := t0.Add(*timeout)
	var ready time.Duration
	for {
		resp, err := client.Get(*url)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK && (*wantLen < 0 || len(body) == *wantLen) {
				ready = time.Since(t0)
				break
			}
		}
		select {
		case <-exited:
			fail(fmt.Sprintf("firstanswer: server exited before answering: %v", cmd.ProcessState))
		default:
		}
		if time.Now().After(deadline) {
			killTree(pid)
			fail("firstanswer: no answer within " + timeout.String())
		}
		time.Sleep(*poll)
	}
	client.CloseIdleConnections()
	time.Sleep(*idle)
	t1 := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(*timeout):
		killTree(pid)
		fail("firstanswer: server still running " + timeout.String() + " after SIGTERM")
	}
	stop := time.Since(t1)
	fmt.Printf("ready_ms=%.3f stop_ms=%.3f exit=%d\n",
		float64(ready)/1e6, float64(stop)/1e6, cmd.ProcessState.ExitCode())
}
EOF
printf 'module benchtool\n\ngo 1.22\n' >"$T/src/benchtool/go.mod"

say "building baseline and helpers"
for p in baseline benchtool; do
	(cd "$T/src/$p" && GOWORK=off GOFLAGS= go build -o "$T/bin/$p" .) >>"$T/logs/build.log" 2>&1 ||
		die "building $p failed: $(cat "$T/logs/build.log")"
done

# The application workload (section "app"): servery vendored into a module
# of its own by the README's steps ("Embedding your own handler"),
# run literally as TestVendoredCopyServesItsOwnApp runs them,
# with a main.go whose App serves one fixed reply held in memory. Built from
# the working tree's sources as they are now, like servery itself, so
# servery's own code carries no benchmark-only flag.
#   app -body FILE [servery flags]: each worker's Start reads FILE once and
#     answers GET /BASENAME with its bytes and the headers servery's static
#     handler sends for it, precomputed and set by direct map assignment:
#     the same reply and handler code as "baseline bare", run by servery.
APP_HASH=""
if want app; then
	say "building the vendored app (README vendoring steps)"
	mkdir -p "$T/src/app"
	# (errexit does not apply left of ||: hence the &&.) The README's
	# commands, as written there, run from the module's root.
	(
		cd "$T/src/app" &&
			GOWORK=off GOFLAGS='' go mod init benchapp &&
			SERVERY=$REPO bash -eu <<'STEPS'
mkdir servery
cp "$SERVERY"/*.go servery/
rm servery/*_test.go servery/main.go
sed -i.orig 's/^package main$/package servery/' servery/*.go
rm servery/*.orig
STEPS
	) >>"$T/logs/build.log" 2>&1 || die "vendoring servery into the app failed: $(tail -20 "$T/logs/build.log")"
	cat >"$T/src/app/main.go" <<'EOF'
// benchapp: bench/run.sh's application workload, servery vendored by the
// README's steps with an App whose handler writes a fixed reply held in
// memory (the bytes of -body, read once by each worker's Start) with the
// headers servery's static handler sends for it, all precomputed: the
// handler of the bare net/http baseline, served by servery.
package main

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"benchapp/servery"
)

var bodyFile = flag.String("body", "", "`file` whose bytes GET /BASENAME answers with, read once by each worker at start")

func main() {
	// Code here runs in the parent and in every worker: only define flags.
	os.Exit(servery.Main(servery.App{
		Check: func() error {
			if *bodyFile == "" {
				return errors.New("-body is required")
			}
			_, err := os.Stat(*bodyFile)
			return err
		},
		Start: func(ctx context.Context, w servery.Worker) (http.Handler, error) {
			body, err := os.ReadFile(*bodyFile)
			if err != nil {
				return nil, err
			}
			name := filepath.Base(*bodyFile)
			return reply("/"+name, body, `"servery-bench-`+name+`"`), nil
		},
	}))
}

// reply answers GET path with body and precomputed headers, anything else
// with 404: the bare baseline's handler for one file.
func reply(path string, body []byte, etag string) http.Handler {
	var (
		acceptRanges  = []string{"bytes"}
		contentLength = []string{strconv.Itoa(len(body))}
		contentType   = []string{"text/html; charset=utf-8"}
		etags         = []string{etag}
		lastModified  = []string{"Mon, 01 Jan 2024 00:00:00 GMT"}
		vary          = []string{"Accept-Encoding"}
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h["Accept-Ranges"] = acceptRanges
		h["Content-Length"] = contentLength
		h["Content-Type"] = contentType
		h["Etag"] = etags
		h["Last-Modified"] = lastModified
		h["Vary"] = vary
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	})
}
EOF
	(cd "$T/src/app" && GOWORK=off GOFLAGS='' go build -o "$T/bin/app" .) >>"$T/logs/build.log" 2>&1 ||
		die "building the vendored app failed: $(tail -20 "$T/logs/build.log")"
	APP_HASH=$(sha256sum "$T/bin/app" | cut -c1-12)
fi

"$T/bin/benchtool" gensite "$T/site"
chmod 755 "$T/site"
SITE=$T/site
[[ $(stat -c %s "$SITE/1k.html") == 1024 ]] || die "1k.html is not 1024 bytes"
[[ $(stat -c %s "$SITE/64k.html") == 65536 ]] || die "64k.html is not 65536 bytes"

# One self-signed ECDSA P-256 certificate for 127.0.0.1, given to every TLS
# server (servery -tls-cert/-tls-key, nginx, caddy, bare net/http TLS).
CERT=$T/tls/cert.pem
KEY=$T/tls/key.pem
if want https; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout "$KEY" -out "$CERT" >"$T/logs/openssl.log" 2>&1 ||
		die "openssl req failed: $(cat "$T/logs/openssl.log")"
fi

# nginx config: one file per (workers, port). With a third argument "tls":
# HTTPS with HTTP/2 and our certificate ("http2 on;" from nginx 1.25.1, the
# listen parameter before).
NGINX_VER=$("$NGINX" -v 2>&1 | sed -n 's|.*nginx/\([0-9.]*\).*|\1|p')
nginx_conf() { # WORKERS PORT [tls] -> prints the config path
	local w=$1 port=$2 tls=${3:-} conf=$T/nginx/nginx-w$1-p$2${3:+-$3}.conf listen
	listen="listen 127.0.0.1:$port;"
	if [[ $tls == tls ]]; then
		if printf '%s\n' 1.25.1 "$NGINX_VER" | sort -V -C; then
			listen="listen 127.0.0.1:$port ssl; http2 on;"
		else
			listen="listen 127.0.0.1:$port ssl http2;"
		fi
		listen="$listen
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate $CERT;
        ssl_certificate_key $KEY;"
	fi
	cat >"$conf" <<EOF
# servery bench baseline (generated)
worker_processes $w;
daemon off;
pid $T/nginx/nginx-p$port.pid;
error_log $T/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65s;
    keepalive_requests 1000000;
    open_file_cache max=1000 inactive=60s;
    open_file_cache_valid 60s;
    types { text/html html; }
    default_type application/octet-stream;
    client_body_temp_path $T/nginx/tmp/body;
    proxy_temp_path $T/nginx/tmp/proxy;
    fastcgi_temp_path $T/nginx/tmp/fastcgi;
    uwsgi_temp_path $T/nginx/tmp/uwsgi;
    scgi_temp_path $T/nginx/tmp/scgi;
    server {
        $listen
        root $SITE;
    }
}
EOF
	echo "$conf"
}
"$NGINX" -t -p "$T/nginx/" -e "$T/nginx/error.log" -c "$(nginx_conf 1 "$BASE_PORT")" >"$T/logs/nginx-t.log" 2>&1 ||
	die "nginx -t failed: $(cat "$T/logs/nginx-t.log")"

# caddy config (Caddyfile), one per port: file_server over HTTPS with our
# certificate; no admin endpoint, no automatic HTTPS (no certificate
# management, no HTTP->HTTPS redirect listener), HTTP/1.1 and HTTP/2 only
# (no HTTP/3 UDP listener), no access log, only errors logged; its state
# directories (XDG_*, see server_cmd) are in our temp dir.
caddy_conf() { # PORT -> prints the config path
	local port=$1 conf=$T/caddy/Caddyfile-p$1
	cat >"$conf" <<EOF
# servery bench baseline (generated)
{
	admin off
	auto_https off
	storage file_system $T/caddy/data
	servers {
		protocols h1 h2
	}
	log {
		output stderr
		level ERROR
	}
}
https://127.0.0.1:$port {
	bind 127.0.0.1
	tls $CERT $KEY
	root * $SITE
	file_server
}
EOF
	echo "$conf"
}
if want https; then
	"$NGINX" -t -p "$T/nginx/" -e "$T/nginx/error.log" -c "$(nginx_conf 1 "$BASE_PORT" tls)" >"$T/logs/nginx-t-tls.log" 2>&1 ||
		die "nginx -t (TLS) failed: $(cat "$T/logs/nginx-t-tls.log")"
	CADDY=$(command -v caddy)
	CADDY_ENV=(env "HOME=$T/caddy" "XDG_DATA_HOME=$T/caddy/data" "XDG_CONFIG_HOME=$T/caddy/config")
	"${CADDY_ENV[@]}" "$CADDY" validate --config "$(caddy_conf "$BASE_PORT")" --adapter caddyfile >"$T/logs/caddy-validate.log" 2>&1 ||
		die "caddy validate failed: $(tail -5 "$T/logs/caddy-validate.log")"
fi

# ---------------------------------------------------------------- servers
# server_cmd KIND WORKERS PORT: the argv of one server, one word per line.
server_cmd() {
	local kind=$1 w=$2 port=$3
	case $kind in
	servery) printf '%s\n' "$T/bin/servery" -workers "$w" -dir "$SITE" -addr "127.0.0.1:$port" -status-addr "127.0.0.1:$((port + 1000))" ;;
	nethttp) printf '%s\n' env "GOMAXPROCS=$w" "$T/bin/baseline" fileserver "127.0.0.1:$port" "$SITE" ;;
	nethttp-default) printf '%s\n' "$T/bin/baseline" fileserver "127.0.0.1:$port" "$SITE" ;;
	barehttp) printf '%s\n' env "GOMAXPROCS=$w" "$T/bin/baseline" bare "127.0.0.1:$port" "$SITE/1k.html" ;;
	app) printf '%s\n' "$T/bin/app" -workers "$w" -body "$SITE/1k.html" -addr "127.0.0.1:$port" ;;
	nginx) printf '%s\n' "$NGINX" -p "$T/nginx/" -e "$T/nginx/error.log" -c "$(nginx_conf "$w" "$port")" ;;
	# HTTPS (section 5); every one with the same certificate and key.
	servery-tls) printf '%s\n' "$T/bin/servery" -workers "$w" -dir "$SITE" -addr "127.0.0.1:$port" -tls-cert "$CERT" -tls-key "$KEY" ;;
	baretls) printf '%s\n' env "GOMAXPROCS=$w" "$T/bin/baseline" baretls "127.0.0.1:$port" "$CERT" "$KEY" "$SITE/1k.html" "$SITE/64k.html" ;;
	nginx-tls) printf '%s\n' "$NGINX" -p "$T/nginx/" -e "$T/nginx/error.log" -c "$(nginx_conf "$w" "$port" tls)" ;;
	caddy) printf '%s\n' "${CADDY_ENV[@]}" "GOMAXPROCS=$w" "$CADDY" run --config "$(caddy_conf "$port")" --adapter caddyfile ;;
	*) die "unknown server kind $kind" ;;
	esac
}

port_busy() { curl -s -o /dev/null --max-time 0.5 "http://127.0.0.1:$1/" 2>/dev/null; }

# start_server NAME KIND WORKERS CPUS PORT LOG: sets SRV_PID and SRV_BG.
# The server becomes a session leader (setsid); CPUS (may be empty) pins it
# and, by inheritance, every process it starts.
start_server() {
	local name=$1 kind=$2 w=$3 cpus=$4 port=$5 log=$6 pidf i
	local -a argv
	mapfile -t argv < <(server_cmd "$kind" "$w" "$port")
	if port_busy "$port"; then die "port $port is already answering before starting $name"; fi
	[[ -n $cpus ]] && argv=(taskset -c "$cpus" "${argv[@]}")
	pidf=$T/run/$name.$RANDOM.pid
	echo "### $(date +%T.%N) start: ${argv[*]}" >>"$log"
	setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidf" "${argv[@]}" </dev/null >>"$log" 2>&1 &
	SRV_BG=$!
	for i in $(seq 400); do [[ -s $pidf ]] && break; sleep 0.005; done
	[[ -s $pidf ]] || die "$name: no pid file"
	SRV_PID=$(<"$pidf")
	SRV_START=$(proc_start "$SRV_PID") || SRV_START=""
	track "$SRV_PID"
	[[ $SRV_PID == "$SRV_BG" ]] || track "$SRV_BG"
	case $kind in
	*-tls | baretls | caddy) wait_ready "$name" "$port" "$log" https ;;
	*) wait_ready "$name" "$port" "$log" ;;
	esac
}

# wait_ready NAME PORT LOG [SCHEME]: until GET /1k.html answers 200 with our
# exact bytes (https: verified against our certificate).
wait_ready() {
	local name=$1 port=$2 log=$3 scheme=${4:-http} i code
	local -a tlsopt=()
	[[ $scheme == https ]] && tlsopt=(--cacert "$CERT")
	for i in $(seq 1500); do
		code=$(curl -s "${tlsopt[@]}" -o "$T/run/probe" -w '%{http_code}' --max-time 2 "$scheme://127.0.0.1:$port/1k.html" 2>/dev/null || true)
		if [[ $code == 200 ]]; then
			cmp -s "$T/run/probe" "$SITE/1k.html" || die "$name: /1k.html answered 200 with wrong bytes"
			return 0
		fi
		if ! alive "$SRV_PID" "$SRV_START"; then
			die "$name exited before answering; log tail: $(tail -20 "$log")"
		fi
		sleep 0.01
	done
	die "$name not answering on port $port after 15 s; log tail: $(tail -20 "$log")"
}

# proc_stat PID: sets PS_STATE and PS_START (start time in ticks since boot)
# from /proc/PID/stat; fails when the process is gone.
proc_stat() {
	local line rest
	local -a f
	{ read -r line <"/proc/$1/stat"; } 2>/dev/null || return 1
	rest=${line##*) }
	read -r -a f <<<"$rest"
	PS_STATE=${f[0]}
	PS_START=${f[19]}
}
proc_start() { proc_stat "$1" && echo "$PS_START"; }
# alive PID [START]: running (not a zombie) and, given START, still the same
# process (pid_max may be small and pids reused on a busy box).
alive() {
	proc_stat "$1" || return 1
	[[ $PS_STATE != Z && $PS_STATE != X ]] || return 1
	[[ -z ${2:-} || $PS_START == "$2" ]]
}

# stop_server NAME: SIGTERM to SRV_PID, wait for exit, reap; sets STOP_RC.
stop_server() {
	local name=$1 i d descs="" t0 waited
	for d in $(descendants "$SRV_PID"); do descs="$descs $d:$(proc_start "$d" || true)"; done
	t0=$(date +%s.%N)
	kill -TERM "$SRV_PID" 2>/dev/null || true
	for i in $(seq $((STOP_WAIT * 100))); do alive "$SRV_PID" "$SRV_START" || break; sleep 0.01; done
	if alive "$SRV_PID" "$SRV_START"; then
		waited=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
		problem "$name: pid $SRV_PID still running ${waited}s after SIGTERM (state $PS_STATE, $(tr '\0' ' ' </proc/"$SRV_PID"/cmdline 2>/dev/null | cut -c1-80)); killed"
		signal_tree KILL "$SRV_PID"
	fi
	STOP_RC=0
	wait "$SRV_BG" 2>/dev/null || STOP_RC=$?
	local left=""
	for d in $descs; do alive "${d%%:*}" "${d#*:}" && left="$left $d"; done
	if [[ -n $left ]]; then
		sleep 1
		for d in $left; do
			if alive "${d%%:*}" "${d#*:}"; then
				problem "$name: child pid ${d%%:*} still alive 1 s after the parent exited; killed"
				signal_tree KILL "${d%%:*}"
			fi
		done
	fi
	untrack "$SRV_PID"
	untrack "$SRV_BG"
	((STOP_RC == 0)) || problem "$name: exit status $STOP_RC after SIGTERM (expected 0)"
}

# run_wrk OUT CPUS DUR PORT [THREADS [extra wrk args...]]: GET /1k.html over HTTP
run_wrk() {
	local out=$1 cpus=$2 dur=$3 port=$4 threads=${5:-1}
	shift 5 || shift $#
	run_wrk_url "$out" "$cpus" "$dur" "http://127.0.0.1:$port/1k.html" "$threads" "$@"
}
# run_wrk_url OUT CPUS DUR URL [THREADS [extra wrk args...]]
run_wrk_url() {
	local out=$1 cpus=$2 dur=$3 url=$4 threads=${5:-1}
	shift 5 || shift $#
	run_load "$out" $(($(dur_secs "$dur") + 30)) "$cpus" wrk -t"$threads" -c"$CONNS" -d"$dur" --latency "$@" "$url"
}

# run_h2load OUT CPUS DUR URL: HTTP/2 over TLS (ALPN h2), one thread,
# H2_CONNS connections with H2_STREAMS concurrent streams each, WARMUP on
# the same connections first, then DUR measured (timing mode, -D).
run_h2load() {
	local out=$1 cpus=$2 dur=$3 url=$4
	run_load "$out" $(($(dur_secs "$dur") + $(dur_secs "$WARMUP") + 30)) "$cpus" \
		h2load -t1 -c"$H2_CONNS" -m"$H2_STREAMS" --warm-up-time="$WARMUP" -D "$dur" "$url"
}

# run_load OUT LIMIT CPUS CMD...: runs a load generator pinned to CPUS (if
# any) with output to OUT, killed after LIMIT seconds. In the background
# and waited for, so that a signal to this script is handled at once;
# timeout makes the tool's process group, which cleanup kills.
run_load() {
	local out=$1 limit=$2 cpus=$3
	shift 3
	local -a pre=()
	[[ -n $cpus ]] && pre=(taskset -c "$cpus")
	timeout -k 5 "$limit" "${pre[@]}" "$@" >"$out" 2>&1 </dev/null &
	local wp=$! rc=0
	track "$wp"
	wait "$wp" || rc=$?
	untrack "$wp"
	((rc == 0)) || problem "$1 failed, rc $rc ($out): $(tail -3 "$out" | tr '\n' ' ')"
}

# parse_h2load FILE -> "rps errors alpn": errors = failed + errored + timeout
# requests + non-2xx answers; alpn = the negotiated application protocol.
parse_h2load() {
	awk '
	/^finished in/ {for (i=1; i<=NF; i++) if ($(i+1) ~ /^req\/s/) rps=$i}
	/^requests:/ {for (i=2; i<=NF; i++) if ($(i+1) ~ /^(failed|errored|timeout)/) e+=$i}
	/^status codes:/ {for (i=3; i<=NF; i++) if ($(i+1) ~ /^[345]xx/) e+=$i}
	/^Application protocol:/ {alpn=$3}
	END {if (rps=="") rps="NaN"; if (alpn=="") alpn="none"; printf "%s %d %s\n", rps, e, alpn}' "$1"
}

# parse_wrk FILE -> "rps p99_ms errors"
parse_wrk() {
	awk '
	/^Requests\/sec:/ {rps=$2}
	/^[ \t]*99%/ {v=$2; n=v; u=v; sub(/[a-z]+$/,"",n); sub(/^[0-9.]+/,"",u);
		m = (u=="us") ? 0.001 : (u=="ms") ? 1 : (u=="s") ? 1000 : (u=="m") ? 60000 : (u=="h") ? 3600000 : -1;
		p99 = (m < 0) ? "NaN" : n*m}
	/Socket errors:/ {for (i=3; i<=NF; i++) if ($i ~ /^[0-9]+,?$/) {x=$i; sub(/,/,"",x); e+=x}}
	/Non-2xx or 3xx responses:/ {e+=$NF}
	END {if (rps=="") rps="NaN"; if (p99=="") p99="NaN"; printf "%s %s %d\n", rps, p99, e}' "$1"
}

# counters LOG -> "worker pid accepted served" per worker, from the stop log
counters() {
	awk '/msg="worker counters"/ {w=p=a=s="";
		for (i=1; i<=NF; i++) {k=$i; v=$i; sub(/=.*/,"",k); sub(/^[^=]*=/,"",v);
			if (k=="worker") w=v; else if (k=="pid") p=v; else if (k=="accepted") a=v; else if (k=="served") s=v; else if (k=="reported") {a="?"; s="?"}}
		print w, p, a, s}' "$1"
}
# max/fair of a column of numbers on stdin
max_fair() { awk '{n++; t+=$1; if ($1>m) m=$1} END{if (n==0||t==0) print "NaN"; else printf "%.2f", m/(t/n)}'; }

# CPU accounting around a measured run, to show how busy the box was with
# work that is not ours (other users' builds and tests) while we measured.
CLK_TCK=$(getconf CLK_TCK)
# user+nice+system+steal. irq/softirq time is left out: loopback TCP work
# runs in softirq and is not charged to any task, so it would show up as
# "other" work although our own traffic caused it.
cpu_busy() { awk '/^cpu / {print $2+$3+$4+$9}' /proc/stat; }
tree_ticks() { # utime+stime of PID and its descendants
	local p t=0 v
	for p in "$1" $(descendants "$1"); do
		v=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12+$13}')
		t=$((t + ${v:-0}))
	done
	echo "$t"
}
child_secs() { awk 'NR==2 {s=0; for (i=1; i<=2; i++) {split($i, a, "m"); sub(/s/, "", a[2]); s += a[1]*60 + a[2]} print s}' "$1"; }
acct_begin() {
	ACCT_B0=$(cpu_busy)
	ACCT_S0=$(tree_ticks "$SRV_PID")
	ACCT_E0=$(date +%s.%N)
	times >"$T/run/times0" # our reaped children's CPU (wrk): main shell, no fork
}
acct_end() { # sets ACCT_SERVER_PCT (% of one core) and ACCT_OTHER_PCT (% of all cores)
	times >"$T/run/times1"
	local e1 b1 s1 w0 w1
	e1=$(date +%s.%N)
	b1=$(cpu_busy)
	s1=$(tree_ticks "$SRV_PID")
	w0=$(child_secs "$T/run/times0")
	w1=$(child_secs "$T/run/times1")
	read -r ACCT_SERVER_PCT ACCT_OTHER_PCT < <(awk -v b="$((b1 - ACCT_B0))" -v s="$((s1 - ACCT_S0))" -v w="$(awk -v a="$w0" -v b="$w1" -v hz="$CLK_TCK" 'BEGIN{print (b-a)*hz}')" \
		-v el="$(awk -v a="$ACCT_E0" -v b="$e1" 'BEGIN{print b-a}')" -v hz="$CLK_TCK" -v n="$NPROC" \
		'BEGIN{o = b - s - w; if (o < 0) o = 0; printf "%.0f %.1f\n", 100*s/(hz*el), 100*o/(hz*el*n)}')
}

QUIET_WAITED=0
RETRIED=0
# wait_quiet: call with none of our servers running; waits until the rest of
# the box is near idle, within QUIET_WAIT / QUIET_BUDGET.
wait_quiet() {
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

log_issues() { # NAME LOG [IGNORE_ERE]: WARN/ERROR lines from a servery log become problems
	local name=$1 log=$2 ign=${3:-} lines
	lines=$(grep -E 'level=(WARN|ERROR)|panic:|fatal error' "$log" | { if [[ -n $ign ]]; then grep -vE -- "$ign"; else cat; fi; } | head -5 || true)
	[[ -z $lines ]] || problem "$name: warnings/errors in its log ($log): $(tr '\n' ' ' <<<"$lines")"
}

# ---------------------------------------------------------------- header
git_rev=$(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n $(cd "$REPO" && git status --porcelain --untracked-files=no 2>/dev/null) ]]; then git_rev="$git_rev-dirty"; fi
md "# servery benchmark report" ""
md "| | |" "|---|---|"
md "| date | $(date -u '+%Y-%m-%d %H:%M:%S UTC') |"
md "| kernel | $(uname -r) |"
md "| CPU | $(lscpu 2>/dev/null | awk -F: '/^Model name/ {gsub(/^[ \t]+/,"",$2); print $2; exit}') |"
md "| nproc | $NPROC |"
md "| go | $(go version | awk '{print $3, $4}') |"
md "| servery | git $git_rev, sources sha256 $SRC_HASH, binary sha256 $BIN_HASH |"
if want app; then
	md "| app (section 1b) | the same sources vendored by the README's steps, with a main.go that writes 1 KiB from memory; binary sha256 $APP_HASH |"
fi
md "| wrk | $(wrk --version 2>&1 | head -1 | awk '{print $1, $2}') |"
md "| nginx | $("$NGINX" -v 2>&1 | sed 's/^nginx version: //') |"
if want https; then
	md "| h2load / caddy / openssl | $(h2load --version 2>&1 | head -1 | awk '{print $2}') / caddy $("$CADDY" version 2>/dev/null | awk '{print $1}') / $(openssl version | awk '{print $1, $2}') |"
fi
md "| DUR / TRIALS | $DUR / $TRIALS (warmup $WARMUP; wrk -c$CONNS --latency) |"
md "| startup trials | $STARTUP_TRIALS |"
md "| QUICK / SECTIONS | $QUICK / $SECTIONS |"
md "| shared-box guard | wait for other work <= ${QUIET_PCT}% (up to ${QUIET_WAIT}s each, ${QUIET_BUDGET}s in all); rerun a throughput measurement when other work > ${NOISY_PCT}% (up to ${NOISY_RETRIES}x) |"
md "| load average at start | $(cut -d' ' -f1-3 /proc/loadavg) |"
md ""

# ---------------------------------------------------------------- 1. throughput
if want throughput || want app; then
# id|label|kind|workers|server cpus|wrk cpus|wrk threads|group
TP_STATIC=(
	"s1|servery|servery|1|$SERVER_CPU|$WRK_CPU|1|A"
	"s2|servery|servery|2|$SERVER_CPU|$WRK_CPU|1|A"
	"s4|servery|servery|4|$SERVER_CPU|$WRK_CPU|1|A"
	"h1|net/http FileServer|nethttp|1|$SERVER_CPU|$WRK_CPU|1|A"
	"b1|bare net/http (same headers)|barehttp|1|$SERVER_CPU|$WRK_CPU|1|A"
	"n1|nginx|nginx|1|$SERVER_CPU|$WRK_CPU|1|A"
	"s2p|servery|servery|2|$PAIR_CPUS|$PAIR_CPUS|1|B"
	"h2p|net/http FileServer|nethttp|2|$PAIR_CPUS|$PAIR_CPUS|1|B"
	"n2p|nginx|nginx|2|$PAIR_CPUS|$PAIR_CPUS|1|B"
)
# Section "app" (1b) adds its rows to the same round-robin, measured exactly
# as group A. Without "throughput" the round-robin holds only the rows its
# table compares them with: servery's static rows and bare net/http.
if want throughput; then
	CONFIGS=("${TP_STATIC[@]}")
else
	CONFIGS=()
	for cfg in "${TP_STATIC[@]}"; do
		case ${cfg%%|*} in s1 | s2 | s4 | b1) CONFIGS+=("$cfg") ;; esac
	done
fi
if want app; then
	CONFIGS+=(
		"a1|servery app (1 KiB from memory)|app|1|$SERVER_CPU|$WRK_CPU|1|A"
		"a2|servery app (1 KiB from memory)|app|2|$SERVER_CPU|$WRK_CPU|1|A"
		"a4|servery app (1 KiB from memory)|app|4|$SERVER_CPU|$WRK_CPU|1|A"
	)
fi
: >"$T/tp.tsv"
: >"$T/tp-balance.tsv"
ncfg=${#CONFIGS[@]}
for trial in $(seq "$TRIALS"); do
	for k in $(seq 0 $((ncfg - 1))); do
		idx=$(((k + trial - 1) % ncfg)) # round-robin, rotated per trial
		IFS='|' read -r id label kind w cpus wcpus wthreads group <<<"${CONFIGS[$idx]}"
		port=$((BASE_PORT + idx))
		log=$T/logs/tp-$id-t$trial.log
		say "throughput trial $trial/$TRIALS: $id ($label w=$w on cpus $cpus, wrk on $wcpus)"
		wait_quiet
		start_server "tp-$id" "$kind" "$w" "$cpus" "$port" "$log"
		run_wrk "$T/logs/wrk-warm-$id-t$trial.txt" "$wcpus" "$WARMUP" "$port" "$wthreads"
		for attempt in $(seq 0 "$NOISY_RETRIES"); do
			acct_begin
			run_wrk "$T/logs/wrk-$id-t$trial.txt" "$wcpus" "$DUR" "$port" "$wthreads"
			acct_end
			le "$ACCT_OTHER_PCT" "$NOISY_PCT" && break
			((attempt < NOISY_RETRIES)) || break
			say "  other work took ${ACCT_OTHER_PCT}% of the CPUs during the run; measuring again"
			RETRIED=$((RETRIED + 1))
			sleep 1
		done
		stop_server "tp-$id"
		read -r rps p99 errs < <(parse_wrk "$T/logs/wrk-$id-t$trial.txt")
		[[ $rps == NaN ]] && problem "tp-$id trial $trial: no Requests/sec in wrk output"
		((errs == 0)) || problem "tp-$id trial $trial: wrk reported $errs errors (socket errors + non-2xx)"
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$trial" "$rps" "$p99" "$errs" "$ACCT_SERVER_PCT" "$ACCT_OTHER_PCT" >>"$T/tp.tsv"
		say "  $(fmt "$rps" '%.0f') req/s, p99 $(fmt "$p99" '%.2f') ms, errors $errs, server CPU ${ACCT_SERVER_PCT}% of a core, other work on the box ${ACCT_OTHER_PCT}%"
		if [[ $kind == servery || $kind == app ]]; then
			log_issues "tp-$id trial $trial" "$log"
			if ((w > 1)); then
				mf=$(counters "$log" | awk '{print $4}' | max_fair)
				acc=$(counters "$log" | awk '{printf "%s%s", sep, $3; sep="/"}')
				srv=$(counters "$log" | awk '{printf "%s%s", sep, $4; sep="/"}')
				printf '%s\t%s\t%s\t%s\t%s\n' "$id" "$trial" "$mf" "$acc" "$srv" >>"$T/tp-balance.tsv"
			fi
		fi
	done
done

declare -A MED_RPS
for cfg in "${CONFIGS[@]}"; do
	IFS='|' read -r id _ <<<"$cfg"
	MED_RPS[$id]=$(awk -v id="$id" '$1==id {print $3}' "$T/tp.tsv" | median)
done

if want throughput; then
md "## 1. Throughput: GET /1k.html, keep-alive, wrk -t1 -c$CONNS -d$DUR" ""
md "Each cell is over $TRIALS trial(s), run round-robin across servers (each trial starts a fresh server, warms up for $WARMUP, then measures)."
md "**Group A (one core):** the server and all its processes pinned to CPU $SERVER_CPU (\`taskset\`, children inherit), wrk pinned to CPU $WRK_CPU."
md "**Group B (two cores):** the server on CPUs $PAIR_CPUS and wrk on the same CPUs: the load generator competes with the server for the 2 cores, so these numbers understate what the server could do alone."
md "servery with N workers runs each worker with GOMAXPROCS = max(1, cpus/N) (its own default); net/http gets GOMAXPROCS explicitly. nginx: sendfile on, access_log off, **open_file_cache on**, keepalive_requests 1000000."
md ""
md "| group | server | workers / GOMAXPROCS | cores | median req/s | MAD req/s | median p99 (ms) | errors | vs net/http (same cores) | vs nginx (same cores) | server CPU (% of 1 core) | other work on box (max %) |"
md "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for cfg in "${CONFIGS[@]}"; do
	IFS='|' read -r id label kind w cpus wcpus wthreads group <<<"$cfg"
	[[ $kind == app ]] && continue # section 1b's table
	rps=${MED_RPS[$id]}
	mad=$(awk -v id="$id" '$1==id {print $3}' "$T/tp.tsv" | mad_pct)
	p99=$(awk -v id="$id" '$1==id {print $4}' "$T/tp.tsv" | median)
	errs=$(awk -v id="$id" '$1==id {e+=$5} END{print e+0}' "$T/tp.tsv")
	case $kind in
	servery) wdesc="$w workers" ;;
	nethttp | barehttp) wdesc="GOMAXPROCS=$w" ;;
	nginx) wdesc="worker_processes $w" ;;
	esac
	[[ $kind == servery && $w == 1 ]] && wdesc="1 (direct mode)"
	scpu=$(awk -v id="$id" '$1==id {print $6}' "$T/tp.tsv" | median)
	ocpu=$(awk -v id="$id" '$1==id {print $7}' "$T/tp.tsv" | sort -g | tail -1)
	if [[ $group == A ]]; then href=h1 nref=n1; else href=h2p nref=n2p; fi
	md "| $group | $label | $wdesc | $cpus | $(fmt "$rps" '%.0f') | $(fmt "$mad" '%s%%') | $(fmt "$p99" '%.2f') | $errs | $(fmt "$(ratio "$rps" "${MED_RPS[$href]}")" '%.2fx') | $(fmt "$(ratio "$rps" "${MED_RPS[$nref]}")" '%.2fx') | $(fmt "$scpu" '%.0f') | $(fmt "$ocpu" '%.1f') |"
done
md "" "errors = wrk socket errors (connect+read+write+timeout) + non-2xx/3xx responses, summed over trials. The nginx reference is worker_processes 1 in group A and worker_processes 2 in group B."
md "server CPU = user+system time of the server's whole process tree during the measured run (median). other work on box = CPU time (/proc/stat user+nice+system+steal; irq/softirq left out) not used by the server or wrk, as % of all $NPROC CPUs, worst trial: anything above a few % means another workload competed and the row is noisy."
worst_other=$(awk '{print $7}' "$T/tp.tsv" | sort -g | tail -1)
if ! le "$worst_other" 5; then
	md "" "**Warning: other work used up to $(fmt "$worst_other" '%.1f')% of the machine during some throughput runs; compare rows with care, or rerun on a quiet machine.**"
	problem "machine not quiet: other processes used up to $(fmt "$worst_other" '%.1f')% of all CPUs during throughput runs (not a servery problem; it makes the numbers noisy)"
fi
md ""

r1=$(ratio "${MED_RPS[s1]}" "${MED_RPS[h1]}")
r2=$(ratio "${MED_RPS[s1]}" "${MED_RPS[n1]}")
r3=$(ratio "${MED_RPS[s4]}" "${MED_RPS[s1]}")
r4=$(ratio "${MED_RPS[s1]}" "${MED_RPS[b1]}")
md "### Throughput targets (group A, one core)" ""
md "- servery w1 / net/http FileServer: $(fmt "$r1" '%.2fx') ($(fmt "${MED_RPS[s1]}" '%.0f') / $(fmt "${MED_RPS[h1]}" '%.0f') req/s), target >= 2.0x: $(verdict "$r1" ge 2.0)"
md "- servery w1 / nginx 1 worker: $(fmt "$r2" '%.2fx') ($(fmt "${MED_RPS[s1]}" '%.0f') / $(fmt "${MED_RPS[n1]}" '%.0f') req/s), target >= 0.75x: $(verdict "$r2" ge 0.75 0.85)"
md "- servery w4 / servery w1 on one core: $(fmt "$r3" '%.2fx') ($(fmt "${MED_RPS[s4]}" '%.0f') / $(fmt "${MED_RPS[s1]}" '%.0f') req/s), target >= 0.9x: $(verdict "$r3" ge 0.9)"
md "- servery w1 / bare net/http (same headers): $(fmt "$r4" '%.2fx') — how close servery's handler is to the net/http ceiling ($(fmt "${MED_RPS[s1]}" '%.0f') / $(fmt "${MED_RPS[b1]}" '%.0f') req/s; informational, no target)"
md ""
md "### N workers with GOMAXPROCS=1 vs 1 process with GOMAXPROCS=N (group B, two cores, wrk sharing them)" ""
md "- servery 2 workers / net/http GOMAXPROCS=2: $(fmt "$(ratio "${MED_RPS[s2p]}" "${MED_RPS[h2p]}")" '%.2fx'); servery 2 workers / nginx 2 workers: $(fmt "$(ratio "${MED_RPS[s2p]}" "${MED_RPS[n2p]}")" '%.2fx'); servery 2 workers on 2 cores / servery 1 worker on 1 core: $(fmt "$(ratio "${MED_RPS[s2p]}" "${MED_RPS[s1]}")" '%.2fx')"
md ""
fi

# ---------------------------------------------------------------- 1b. application handler
if want app; then
tp_col() { awk -v id="$1" -v c="$2" '$1==id {print $c}' "$T/tp.tsv"; } # ID COLUMN of tp.tsv
# tp_stats ID: sets TS_MAD TS_P99 TS_ERRS TS_SCPU TS_OCPU from the rows of tp.tsv, as section 1's table does
tp_stats() {
	TS_MAD=$(tp_col "$1" 3 | mad_pct)
	TS_P99=$(tp_col "$1" 4 | median)
	TS_ERRS=$(awk -v id="$1" '$1==id {e+=$5} END{print e+0}' "$T/tp.tsv")
	TS_SCPU=$(tp_col "$1" 6 | median)
	TS_OCPU=$(tp_col "$1" 7 | sort -g | tail -1)
}
md "## 1b. Application handler: GET /1k.html answered from memory by a vendored App, keep-alive, wrk -t1 -c$CONNS -d$DUR" ""
md "The design record's second workload (its ASGI row), in Go: servery vendored into a program of its own by the README's steps (\"Embedding your own handler\"), whose \`App.Start\` returns a handler that writes a fixed 1 KiB reply held in memory (the bytes of /1k.html, read once per worker at start) with the headers servery sends for that file, precomputed and set by direct map assignment: the bare net/http row's handler, run by servery's workers."
md "Measured as section 1's group A and in the same round-robin: $TRIALS trial(s), a fresh server each, $WARMUP warmup, then \`wrk -t1 -c$CONNS -d$DUR --latency\`; the server and all its processes on CPU $SERVER_CPU, wrk on CPU $WRK_CPU; medians. Its workers run with GOMAXPROCS = max(1, cpus/N), as servery's. The static and bare rows below are the same measurements as in section 1 when both sections run."
md ""
md "| server | workers / GOMAXPROCS | cores | median req/s | MAD | median p99 (ms) | errors | vs 1 worker (same server) | vs bare net/http | app / static (same workers) | server CPU (% of 1 core) | other work on box (max %) |"
md "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for id in s1 s2 s4 a1 a2 a4 b1; do
	for cfg in "${CONFIGS[@]}"; do [[ ${cfg%%|*} == "$id" ]] && break; done
	IFS='|' read -r _ label kind w cpus _ <<<"$cfg"
	rps=${MED_RPS[$id]}
	tp_stats "$id"
	vs1=- vsapp=-
	case $kind in
	servery | app)
		wdesc="$w workers"
		[[ $w == 1 ]] && wdesc="1 (direct mode)"
		vs1=$(fmt "$(ratio "$rps" "${MED_RPS[${id:0:1}1]}")" '%.2fx')
		[[ $kind == app ]] && vsapp=$(fmt "$(ratio "$rps" "${MED_RPS[s$w]}")" '%.2fx')
		[[ $kind == servery ]] && label="servery static (cached file)"
		;;
	*) wdesc="GOMAXPROCS=$w" ;;
	esac
	md "| $label | $wdesc | $cpus | $(fmt "$rps" '%.0f') | $(fmt "$TS_MAD" '%s%%') | $(fmt "$TS_P99" '%.2f') | $TS_ERRS | $vs1 | $(fmt "$(ratio "$rps" "${MED_RPS[b1]}")" '%.2fx') | $vsapp | $(fmt "$TS_SCPU" '%.0f') | $(fmt "$TS_OCPU" '%.1f') |"
done
md "" "errors, server CPU and other work on box: as in section 1. vs 1 worker: against the same server's direct mode (app against app, static against static); app / static: the app row against servery's static row with as many workers."
app_other=$(for id in s1 s2 s4 a1 a2 a4 b1; do tp_col "$id" 7; done | sort -g | tail -1)
if ! le "$app_other" 5; then
	md "" "**Warning: other work used up to $(fmt "$app_other" '%.1f')% of the machine during some of these runs; compare rows with care, or rerun on a quiet machine.**"
	# With section 1 in the run its own check has already reported the same runs.
	want throughput || problem "machine not quiet: other processes used up to $(fmt "$app_other" '%.1f')% of all CPUs during the app section's runs (not a servery problem; it makes the numbers noisy)"
fi
md ""
ra1=$(ratio "${MED_RPS[a1]}" "${MED_RPS[b1]}")
rs1=$(ratio "${MED_RPS[s1]}" "${MED_RPS[b1]}")
md "### Application handler ratios (one core; informational, no targets: the design record's targets are set for the static rows)" ""
md "- app w1 / bare net/http (same handler, same reply): $(fmt "$ra1" '%.2fx') ($(fmt "${MED_RPS[a1]}" '%.0f') / $(fmt "${MED_RPS[b1]}" '%.0f') req/s): what servery costs around an application's handler in direct mode; static servery w1 / bare net/http: $(fmt "$rs1" '%.2fx')."
md "- app w2 / app w1: $(fmt "$(ratio "${MED_RPS[a2]}" "${MED_RPS[a1]}")" '%.2fx'); app w4 / app w1: $(fmt "$(ratio "${MED_RPS[a4]}" "${MED_RPS[a1]}")" '%.2fx') (extra workers on one busy core); static: w2 / w1 $(fmt "$(ratio "${MED_RPS[s2]}" "${MED_RPS[s1]}")" '%.2fx'), w4 / w1 $(fmt "$(ratio "${MED_RPS[s4]}" "${MED_RPS[s1]}")" '%.2fx') (its target: w4 / w1 >= 0.9x)."
md "- app / static with 1, 2, 4 workers: $(fmt "$(ratio "${MED_RPS[a1]}" "${MED_RPS[s1]}")" '%.2fx'), $(fmt "$(ratio "${MED_RPS[a2]}" "${MED_RPS[s2]}")" '%.2fx'), $(fmt "$(ratio "${MED_RPS[a4]}" "${MED_RPS[s4]}")" '%.2fx'): the static handler's own work (cache lookup, revalidation, conditional and range checks) against a handler that only writes a precomputed reply."
md ""
fi

fi

# ---------------------------------------------------------------- 2. balance
if want balance; then
md "## 2. Connection balance: servery -workers 4, wrk -t1 -c$CONNS -d$BAL_DUR, counters from the stop log" ""
md "served = requests answered per worker; fair share = 25%; max/fair = the busiest worker's served count over the mean (target <= 1.5)."
md "With keep-alive the $CONNS connections are accepted once, at the start, so the spread of those $CONNS accepts decides the spread of requests; the Connection: close run makes every request a new accept."
md ""
BAL_RUNS=(
	"ka-core0|keep-alive, server on CPU $SERVER_CPU, wrk on CPU $WRK_CPU|$SERVER_CPU|$WRK_CPU|"
	"ka-free|keep-alive, both unpinned|||"
	"close-free|Connection: close, both unpinned|||-H|Connection: close"
)
bal_port=$((BASE_PORT + 20))
md "| run | worker | pid | accepted | served | share of served |"
md "|---|---:|---:|---:|---:|---:|"
BAL_SUMMARY=()
for b in "${BAL_RUNS[@]}"; do
	IFS='|' read -r id desc cpus wcpus extra1 extra2 <<<"$b"
	log=$T/logs/balance-$id.log
	say "balance: $desc"
	wait_quiet
	start_server "balance-$id" servery 4 "$cpus" "$bal_port" "$log"
	if [[ -n $extra1 ]]; then
		run_wrk "$T/logs/wrk-balance-$id.txt" "$wcpus" "$BAL_DUR" "$bal_port" 1 "$extra1" "$extra2"
	else
		run_wrk "$T/logs/wrk-balance-$id.txt" "$wcpus" "$BAL_DUR" "$bal_port" 1
	fi
	stop_server "balance-$id"
	log_issues "balance-$id" "$log"
	read -r rps p99 errs < <(parse_wrk "$T/logs/wrk-balance-$id.txt")
	((errs == 0)) || problem "balance-$id: wrk reported $errs errors"
	counters "$log" >"$T/bal-$id.txt"
	if [[ ! -s $T/bal-$id.txt ]]; then
		problem "balance-$id: no 'worker counters' lines in the servery log"
		md "| $desc | - | - | - | - | no counters logged |"
		BAL_SUMMARY+=("- $desc: no counters: **FAIL**")
		continue
	fi
	total=$(awk '{t+=$4} END{print t+0}' "$T/bal-$id.txt")
	while read -r wk pid acc srv; do
		md "| $desc | $wk | $pid | $acc | $srv | $(awk -v s="$srv" -v t="$total" 'BEGIN{if (t>0 && s ~ /^[0-9]+$/) printf "%.1f%%", 100*s/t; else print "n/a"}') |"
	done <"$T/bal-$id.txt"
	mf=$(awk '{print $4}' "$T/bal-$id.txt" | max_fair)
	mfa=$(awk '{print $3}' "$T/bal-$id.txt" | max_fair)
	BAL_SUMMARY+=("- $desc: $(fmt "$rps" '%.0f') req/s, $total served; max/fair served $(fmt "$mf" '%.2f') (accepted $(fmt "$mfa" '%.2f')), target <= 1.5: $(verdict "$mf" le 1.5)")
	le "$mf" 1.5 || problem "balance ($desc): served max/fair $(fmt "$mf" '%.2f') > 1.5; accepted per worker $(awk '{printf "%s%s", sep, $3; sep="/"}' "$T/bal-$id.txt"), served $(awk '{printf "%s%s", sep, $4; sep="/"}' "$T/bal-$id.txt")"
	idle=$(awk '$4=="0" {printf "%s%s", sep, $1; sep=","}' "$T/bal-$id.txt")
	[[ -z $idle ]] || problem "balance ($desc): worker(s) $idle served nothing during $BAL_DUR of load"
done
md "" "${BAL_SUMMARY[@]}" ""
if [[ -s $T/tp-balance.tsv ]]; then
	md "The same counters from the throughput runs (warmup + measured run; per trial, per worker):" ""
	md "| throughput row | trial | accepted per worker | served per worker | served max/fair |"
	md "|---|---:|---|---|---:|"
	for id in s2 s4 s2p a2 a4; do
		awk -F'\t' -v id="$id" '$1==id {f=1} END{exit !f}' "$T/tp-balance.tsv" || continue # row not in this run's SECTIONS
		case $id in
		s2) d="servery 2 workers, core 0" ;; s4) d="servery 4 workers, core 0" ;; s2p) d="servery 2 workers, cores 0-1" ;;
		a2) d="servery app 2 workers, core 0" ;; a4) d="servery app 4 workers, core 0" ;;
		esac
		while IFS=$'\t' read -r _ tr mf acc srv; do
			md "| $d | $tr | $acc | $srv | $(fmt "$mf" '%.2f') |"
		done < <(awk -F'\t' -v id="$id" '$1==id' "$T/tp-balance.tsv")
		v=$(awk -v id="$id" '$1==id {print $3}' "$T/tp-balance.tsv" | median)
		le "$v" 1.5 || problem "throughput row $d: served max/fair median $(fmt "$v" '%.2f') over $TRIALS trial(s) (served per worker, per trial: $(awk -F'\t' -v id="$id" '$1==id {printf "%s%s", sep, $5; sep="; "}' "$T/tp-balance.tsv"))"
	done
	md ""
fi

fi

# ---------------------------------------------------------------- 3. startup / stop
if want startup; then
# Each trial: benchtool firstanswer execs the server (unpinned), polls GET
# /1k.html every 1 ms until a 200 with the right length, idles, SIGTERMs it
# and times the exit.
SU_CONFIGS=("servery|1" "servery|2" "servery|4" "servery|8" "nethttp-default|1")
: >"$T/su.tsv"
for trial in $(seq "$STARTUP_TRIALS"); do
	wait_quiet
	for k in $(seq 0 $((${#SU_CONFIGS[@]} - 1))); do
		IFS='|' read -r kind w <<<"${SU_CONFIGS[$k]}"
		port=$((BASE_PORT + 30 + k))
		log=$T/logs/startup-$kind-w$w-t$trial.log
		mapfile -t argv < <(server_cmd "$kind" "$w" "$port")
		port_busy "$port" && die "port $port busy before the startup test"
		say "startup trial $trial/$STARTUP_TRIALS: $kind w=$w"
		setsid "$T/bin/benchtool" firstanswer -url "http://127.0.0.1:$port/1k.html" -len 1024 -log "$log" \
			-idle "$IDLE_BEFORE_STOP" -timeout 15s -- "${argv[@]}" >"$T/run/fa.out" 2>"$T/run/fa.err" </dev/null &
		fa=$!
		track "$fa"
		rc=0
		wait "$fa" || rc=$?
		untrack "$fa"
		if ((rc != 0)); then
			problem "startup $kind w=$w trial $trial: firstanswer failed (rc $rc): $(cat "$T/run/fa.err") log: $(tail -5 "$log" | tr '\n' ' ')"
			continue
		fi
		read -r ready_kv stop_kv exit_kv <"$T/run/fa.out"
		((${exit_kv#exit=} == 0)) || problem "startup $kind w=$w trial $trial: exit status ${exit_kv#exit=} after SIGTERM"
		[[ $kind == servery ]] && log_issues "startup servery w=$w trial $trial" "$log"
		lt "${stop_kv#stop_ms=}" 250 || problem "startup $kind w=$w trial $trial: stop took ${stop_kv#stop_ms=} ms (>= 250 ms) on an idle server"
		# servery's own numbers: ready_in on the serving line, took on "generation stopped"
		self_ready=$(awk '/msg=serving/ {for (i=1;i<=NF;i++) if ($i ~ /^ready_in=/) {v=substr($i,10)}} END{print v}' "$log")
		self_stop=$(awk '/msg="generation stopped"/ {for (i=1;i<=NF;i++) if ($i ~ /^took=/) {v=substr($i,6)}} END{print v}' "$log")
		printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$w" "${ready_kv#ready_ms=}" "${stop_kv#stop_ms=}" "${self_ready:-}" "${self_stop:-}" >>"$T/su.tsv"
	done
done
to_ms() { awk '{v=$1; n=v; u=v; sub(/[a-zµ]+$/,"",n); sub(/^[0-9.]+/,"",u);
	m = (u=="ms") ? 1 : (u=="s") ? 1000 : (u=="µs"||u=="us") ? 0.001 : (u=="ns") ? 0.000001 : (u=="m") ? 60000 : -1;
	if (v!="" && m>0) print n*m}'; }
md "## 3. Startup and stop ($STARTUP_TRIALS trials each, medians, unpinned, idle server)" ""
md "ready = exec to the first 200 answer for /1k.html with the right body, both timestamps in one helper process that polls every 1 ms with a new connection each time (resolution about 1 ms). stop = SIGTERM to process exit after ${IDLE_BEFORE_STOP} idle. servery's self-reported ready_in (its serving log line) and generation-stop time are shown for reference."
md ""
md "| server | processes | ready median (ms) | ready min-max (ms) | self-reported ready_in median (ms) | stop median (ms) | stop min-max (ms) | self-reported stop median (ms) |"
md "|---|---:|---:|---:|---:|---:|---:|---:|"
declare -A SU_READY SU_STOP
for c in "${SU_CONFIGS[@]}"; do
	IFS='|' read -r kind w <<<"$c"
	sel() { awk -F'\t' -v k="$kind" -v w="$w" -v col="$1" '$1==k && $2==w && $col!="" {print $col}' "$T/su.tsv"; }
	rd=$(sel 3 | median)
	st=$(sel 4 | median)
	SU_READY[$kind$w]=$rd
	SU_STOP[$kind$w]=$st
	rmin=$(sel 3 | sort -g | head -1)
	rmax=$(sel 3 | sort -g | tail -1)
	smin=$(sel 4 | sort -g | head -1)
	smax=$(sel 4 | sort -g | tail -1)
	sr=$(sel 5 | to_ms | median)
	ss=$(sel 6 | to_ms | median)
	if [[ $kind == servery ]]; then
		name="servery -workers $w"
		procs=$((w == 1 ? 1 : w + 1))
	else
		name="net/http FileServer (GOMAXPROCS default)"
		procs=1
	fi
	md "| $name | $procs | $(fmt "$rd" '%.1f') | $(fmt "$rmin" '%.1f')-$(fmt "$rmax" '%.1f') | $(fmt "$sr" '%.1f') | $(fmt "$st" '%.1f') | $(fmt "$smin" '%.1f')-$(fmt "$smax" '%.1f') | $(fmt "$ss" '%.1f') |"
done
rs=$(ratio "${SU_READY[servery4]}" "${SU_READY[nethttp-default1]}")
md ""
md "- ready, servery 4 workers / net/http: $(fmt "$rs" '%.2fx') ($(fmt "${SU_READY[servery4]}" '%.1f') / $(fmt "${SU_READY[nethttp-default1]}" '%.1f') ms), target <= 2.5x: $(verdict "$rs" le 2.5 2.0)"
md "- stop, servery 4 workers: $(fmt "${SU_STOP[servery4]}" '%.1f') ms, target < 250 ms: $(verdict "${SU_STOP[servery4]}" lt 250 50)"
md ""

fi

# ---------------------------------------------------------------- 4. memory
if want memory; then
# rollup PID -> "rss_kb pss_kb"
rollup() { awk '/^Rss:/ {r=$2} /^Pss:/ {p=$2} END{print r+0, p+0}' "/proc/$1/smaps_rollup" 2>/dev/null || echo "0 0"; }
# snapshot NAME PHASE: one line per process of SRV_PID's tree: name phase role pid rss pss
snapshot() {
	local name=$1 phase=$2 c
	echo "$name $phase parent $SRV_PID $(rollup "$SRV_PID")" >>"$T/mem.tsv"
	for c in $(pgrep -P "$SRV_PID" | sort -n); do
		echo "$name $phase child $c $(rollup "$c")" >>"$T/mem.tsv"
	done
}
MEM_CONFIGS=("servery|1" "servery|2" "servery|4" "servery|8" "nethttp-default|1" "nginx|1")
: >"$T/mem.tsv"
mem_port=$((BASE_PORT + 40))
for c in "${MEM_CONFIGS[@]}"; do
	IFS='|' read -r kind w <<<"$c"
	name=$kind-$w
	log=$T/logs/mem-$name.log
	say "memory: $kind w=$w"
	wait_quiet
	start_server "mem-$name" "$kind" "$w" "" "$mem_port" "$log"
	sleep 0.3
	snapshot "$name" ready
	run_wrk "$T/logs/wrk-mem-$name.txt" "" "$MEM_LOAD" "$mem_port" 1
	sleep 0.2
	snapshot "$name" loaded
	stop_server "mem-$name"
	[[ $kind == servery ]] && log_issues "mem-$name" "$log"
done
md "## 4. Memory (smaps_rollup; unpinned; after ready, and after $MEM_LOAD of wrk -c$CONNS)" ""
md "PSS splits shared pages (the binary's text, shared libraries) among the processes that map them, so the PSS total is the real footprint; RSS counts shared pages in every process."
md ""
md "| server | phase | parent PSS / RSS (MiB) | each child PSS / RSS (MiB) | total PSS (MiB) | total RSS (MiB) |"
md "|---|---|---:|---|---:|---:|"
declare -A MEM_PSS
for c in "${MEM_CONFIGS[@]}"; do
	IFS='|' read -r kind w <<<"$c"
	name=$kind-$w
	for phase in ready loaded; do
		par=$(awk -v n="$name" -v p="$phase" '$1==n && $2==p && $3=="parent" {printf "%.1f / %.1f", $6/1024, $5/1024}' "$T/mem.tsv")
		kids=$(awk -v n="$name" -v p="$phase" '$1==n && $2==p && $3=="child" {printf "%s%.1f / %.1f", sep, $6/1024, $5/1024; sep=", "}' "$T/mem.tsv")
		tp=$(awk -v n="$name" -v p="$phase" '$1==n && $2==p {t+=$6} END{print t+0}' "$T/mem.tsv")
		tr_=$(awk -v n="$name" -v p="$phase" '$1==n && $2==p {t+=$5} END{print t+0}' "$T/mem.tsv")
		MEM_PSS[$name.$phase]=$tp
		case $kind in
		servery) label="servery -workers $w" ;;
		nethttp-default) label="net/http FileServer" ;;
		nginx) label="nginx worker_processes $w" ;;
		esac
		md "| $label | $phase | $par | ${kids:--} | $(mib "$tp") | $(mib "$tr_") |"
	done
done
md ""
for phase in ready loaded; do
	d48=$(awk -v a="${MEM_PSS[servery-8.$phase]}" -v b="${MEM_PSS[servery-4.$phase]}" 'BEGIN{printf "%.2f", (a-b)/4/1024}')
	d24=$(awk -v a="${MEM_PSS[servery-4.$phase]}" -v b="${MEM_PSS[servery-2.$phase]}" 'BEGIN{printf "%.2f", (a-b)/2/1024}')
	md "- PSS per added worker ($phase): 4->8 workers $d48 MiB, 2->4 workers $d24 MiB; target <= 6 MiB: $(verdict "$d48" le 6) (4->8), $(verdict "$d24" le 6) (2->4)"
done
maxw=$(awk '$1 ~ /^servery-/ && $2=="loaded" && $3=="child" {if ($6>m) m=$6} END{printf "%.1f", m/1024}' "$T/mem.tsv")
idlew=$(awk '$1 ~ /^servery-/ && $2=="ready" && $3=="child" {if ($6>m) m=$6} END{printf "%.1f", m/1024}' "$T/mem.tsv")
md "- Largest single worker PSS: $idlew MiB when ready, $maxw MiB after load. The loaded deltas depend on how many workers the load reached (see section 2: a worker that got no connection stays at its idle size), so the ready deltas are the stable measure of a worker's fixed cost."
md ""

fi

# ---------------------------------------------------------------- 5. https
if want https; then
# id|label|kind|workers. Every server pinned to SERVER_CPU (children
# inherit), the load generator to WRK_CPU, as in throughput group A.
HS_CONFIGS=(
	"sv1|servery -workers 1 (direct)|servery-tls|1"
	"svn|servery -workers $HTTPS_WORKERS|servery-tls|$HTTPS_WORKERS"
	"ng|nginx (1 worker)|nginx-tls|1"
	"cd|caddy file_server|caddy|1"
	"bt|bare net/http TLS (ceiling)|baretls|1"
)
HS_LOADS=("h1|1k" "h1|64k" "h2|1k" "h2|64k")
# https_check NAME PORT: both files over HTTP/1.1 and HTTP/2 (ALPN), our
# exact bytes, verified against our certificate.
https_check() {
	local name=$1 port=$2 f v out
	for f in 1k 64k; do
		for v in 1.1 2; do
			out=$(curl -s --cacert "$CERT" "--http$v" -o "$T/run/probe" -w '%{http_code} %{http_version}' --max-time 5 \
				"https://127.0.0.1:$port/$f.html" 2>&1 || true)
			[[ $out == "200 $v" ]] || die "$name: GET /$f.html over HTTP/$v answered '$out' (want '200 $v')"
			cmp -s "$T/run/probe" "$SITE/$f.html" || die "$name: /$f.html over HTTP/$v answered 200 with wrong bytes"
		done
	done
}
: >"$T/hs.tsv"
declare -A HS_TLSINFO HS_EOF HS_NWRK
HS_EOF_ERE='TLS handshake error from 127\.0\.0\.1:[0-9]+: EOF'
ncfg=${#HS_CONFIGS[@]}
for trial in $(seq "$TRIALS"); do
	for k in $(seq 0 $((ncfg - 1))); do
		idx=$(((k + trial - 1) % ncfg)) # round-robin, rotated per trial
		IFS='|' read -r id label kind w <<<"${HS_CONFIGS[$idx]}"
		port=$((BASE_PORT + 50 + idx))
		log=$T/logs/https-$id-t$trial.log
		say "https trial $trial/$TRIALS: $id ($label on cpu $SERVER_CPU, load on $WRK_CPU)"
		wait_quiet
		start_server "https-$id" "$kind" "$w" "$SERVER_CPU" "$port" "$log"
		https_check "https-$id" "$port"
		nwrk=0
		for ld in "${HS_LOADS[@]}"; do
			IFS='|' read -r proto size <<<"$ld"
			url="https://127.0.0.1:$port/$size.html"
			out=$T/logs/https-$proto-$size-$id-t$trial.txt
			if [[ $proto == h1 ]]; then
				run_wrk_url "$T/logs/https-warm-$proto-$size-$id-t$trial.txt" "$WRK_CPU" "$WARMUP" "$url" 1
				nwrk=$((nwrk + 1))
			fi
			for attempt in $(seq 0 "$NOISY_RETRIES"); do
				acct_begin
				if [[ $proto == h1 ]]; then
					run_wrk_url "$out" "$WRK_CPU" "$DUR" "$url" 1
					nwrk=$((nwrk + 1))
				else
					run_h2load "$out" "$WRK_CPU" "$DUR" "$url"
				fi
				acct_end
				le "$ACCT_OTHER_PCT" "$NOISY_PCT" && break
				((attempt < NOISY_RETRIES)) || break
				say "  other work took ${ACCT_OTHER_PCT}% of the CPUs during the run; measuring again"
				RETRIED=$((RETRIED + 1))
				sleep 1
			done
			if [[ $proto == h1 ]]; then
				read -r rps _ errs < <(parse_wrk "$out")
				alpn=http/1.1
			else
				read -r rps errs alpn < <(parse_h2load "$out")
				[[ $alpn == h2 ]] || problem "https-$id $proto $size trial $trial: h2load negotiated '$alpn', not h2"
				[[ -n ${HS_TLSINFO[$id]:-} ]] || HS_TLSINFO[$id]=$(awk -F': ' '/^TLS Protocol:/ {p=$2} /^Cipher:/ {c=$2} END{print p, c}' "$out")
			fi
			[[ $rps == NaN ]] && problem "https-$id $proto $size trial $trial: no req/s in the load generator's output ($out)"
			((errs == 0)) || problem "https-$id $proto $size trial $trial: $errs errors (socket errors, failed requests, non-2xx) ($out)"
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$trial" "$proto" "$size" "$rps" "$errs" "$ACCT_SERVER_PCT" "$ACCT_OTHER_PCT" >>"$T/hs.tsv"
			say "  $proto $size: $(fmt "$rps" '%.0f') req/s, errors $errs, server CPU ${ACCT_SERVER_PCT}% of a core, other work ${ACCT_OTHER_PCT}%"
		done
		stop_server "https-$id"
		# wrk makes one plain TCP connection per run to test the address
		# (wrk.resolve -> wrk.connect) and closes it unused: one "TLS
		# handshake error ... EOF" per wrk run in a Go server's log is wrk's.
		neof=$(grep -cE "$HS_EOF_ERE" "$log" || true)
		HS_EOF[$id]=$((${HS_EOF[$id]:-0} + neof))
		HS_NWRK[$id]=$((${HS_NWRK[$id]:-0} + nwrk))
		if ((neof > nwrk)); then problem "https-$id trial $trial: $neof 'TLS handshake error ... EOF' log lines, more than the $nwrk wrk runs that explain one each"; fi
		if [[ $kind == servery-tls ]]; then log_issues "https-$id trial $trial" "$log" "$HS_EOF_ERE"; fi
	done
done

hs_sel() { awk -F'\t' -v id="$1" -v p="$2" -v s="$3" -v col="$4" '$1==id && $3==p && $4==s {print $col}' "$T/hs.tsv"; }
md "## 5. HTTPS: HTTP/1.1 over TLS (wrk) and HTTP/2 (h2load), GET /1k.html and /64k.html" ""
md "Each server pinned to CPU $SERVER_CPU (children inherit; Go servers get GOMAXPROCS=1 from it, servery's workers their own default), the load generator to CPU $WRK_CPU, $TRIALS trial(s) run round-robin across servers, a fresh server per trial running all four loads. Every server has the same self-signed ECDSA P-256 certificate and key; keep-alive throughout, so handshakes are not what is measured."
md "- h1 TLS: \`wrk -t1 -c$CONNS -d$DUR\` after a $WARMUP warmup run (wrk offers no ALPN: HTTP/1.1)."
md "- h2: \`h2load -t1 -c$H2_CONNS -m$H2_STREAMS --warm-up-time=$WARMUP -D $DUR\`: $H2_CONNS connections with up to $H2_STREAMS streams in flight on each, req/s over the measured $DUR from its \"finished in ..., N req/s\" line; ALPN h2 checked."
md "- nginx $NGINX_VER: 1 worker, HTTP/2 by $(printf '%s\n' 1.25.1 "$NGINX_VER" | sort -V -C && echo '`http2 on;`' || echo '`listen ... ssl http2` (nginx < 1.25.1)'), \`ssl_protocols TLSv1.2 TLSv1.3\` (servery's range), \`keepalive_requests 1000000\` (the default 1000 ends HTTP/2 connections, which h2load does not reopen), access_log off, open_file_cache on. caddy $("$CADDY" version 2>/dev/null | awk '{print $1}'): \`file_server\`, admin off, auto_https off, HTTP/1.1+HTTP/2 only, errors-only log. bare net/http TLS: servery's tls.Config and precomputed replies with servery's headers, default http.Server (no timeouts) and net/http's HTTP/2 defaults."
md "- Cells: median req/s (MAD as % of the median). Target: servery / bare net/http TLS >= 0.95x in every row, for direct mode and for -workers $HTTPS_WORKERS (whose workers share the one core)."
md ""
md "| protocol | file | servery w1 | servery w$HTTPS_WORKERS | nginx | caddy | bare net/http TLS (ceiling) | servery w1 / ceiling | servery w$HTTPS_WORKERS / ceiling | errors | other work on box (max %) |"
md "|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|"
HS_SUMMARY=()
for ld in "${HS_LOADS[@]}"; do
	IFS='|' read -r proto size <<<"$ld"
	declare -A hm=()
	row="| $([[ $proto == h1 ]] && echo 'h1 TLS (wrk)' || echo 'h2 (h2load)') | $size |"
	for cfg in "${HS_CONFIGS[@]}"; do
		IFS='|' read -r id _ <<<"$cfg"
		hm[$id]=$(hs_sel "$id" "$proto" "$size" 5 | median)
		row="$row $(fmt "${hm[$id]}" '%.0f') ($(fmt "$(hs_sel "$id" "$proto" "$size" 5 | mad_pct)" '±%s%%')) |"
	done
	for id in sv1 svn; do
		r=$(ratio "${hm[$id]}" "${hm[bt]}")
		row="$row $(fmt "$r" '%.3fx') $(verdict "$r" ge 0.95) |"
		if ! ge "$r" 0.95; then
			HS_SUMMARY+=("- $proto $size: servery $([[ $id == sv1 ]] && echo w1 || echo "w$HTTPS_WORKERS") / ceiling $(fmt "$r" '%.3fx') ($(fmt "${hm[$id]}" '%.0f') / $(fmt "${hm[bt]}" '%.0f') req/s), below the 0.95x target")
		fi
	done
	errs=$(awk -F'\t' -v p="$proto" -v s="$size" '$3==p && $4==s {e+=$6} END{print e+0}' "$T/hs.tsv")
	ocpu=$(awk -F'\t' -v p="$proto" -v s="$size" '$3==p && $4==s {print $8}' "$T/hs.tsv" | sort -g | tail -1)
	md "$row $errs | $(fmt "$ocpu" '%.1f') |"
done
md ""
tinfo=""
for cfg in "${HS_CONFIGS[@]}"; do
	IFS='|' read -r id label _ <<<"$cfg"
	tinfo="$tinfo${tinfo:+; }$label: ${HS_TLSINFO[$id]:-n/a}"
done
md "- Negotiated with h2load (TLS version, cipher): $tinfo."
eofs=""
for id in sv1 svn bt; do eofs="$eofs${eofs:+, }$id ${HS_EOF[$id]:-0}/${HS_NWRK[$id]:-0}"; done
md "- \"TLS handshake error ... EOF\" log lines / wrk runs: $eofs (sv1/svn = servery w1/w$HTTPS_WORKERS, bt = bare net/http TLS). wrk tests the address with one plain TCP connect per run and closes it before any handshake, so up to one such line per wrk run is wrk's, not a server fault, and is left out of the Problems list; more would be reported there."
if ((${#HS_SUMMARY[@]})); then md "${HS_SUMMARY[@]}"; else md "- servery is within 0.95x of the bare net/http TLS ceiling in every row."; fi
md "- errors = wrk socket errors + non-2xx/3xx, or h2load failed + errored + timeout + non-2xx, summed over trials. other work on box: as in section 1; above a few % the row is noisy."
md ""
fi

# ---------------------------------------------------------------- problems, caveats
md "## Problems observed" ""
if [[ -s $T/problems ]]; then cat "$T/problems" >>"$R"; else md "- none: every server answered, every wrk run had 0 errors, every stop exited 0 with no WARN/ERROR log lines and no leftover processes."; fi
md ""
md "## Caveats" ""
md "- 2 cores in all, shared with the load generator: in group A wrk has its own core, in group B (and the balance/memory runs) it competes with the server, so group B measures the pair, not the server alone."
md "- Loopback only: no NIC, no interrupts, no real network latency; 1 KiB responses from a warm page cache (and nginx's open_file_cache), so this measures per-request CPU cost, not I/O."
md "- wrk uses one thread and $CONNS keep-alive connections; a single wrk thread may be near its own limit against the fastest servers, which compresses ratios towards 1."
md "- Short runs ($DUR x $TRIALS trials) on a shared machine: other work on it (builds, tests) shows up as noise; see the MAD and other-work columns, the retries and waits below, and the load average. Startup times are ~1 ms resolution."
md "- servery is measured as built from the working tree at run time (see the sha256s above), which may include uncommitted edits."
md "- Waited ${QUIET_WAITED} s in all for the box to go quiet; reran $RETRIED throughput measurement(s) that other work disturbed."
md "- Load average at end: $(cut -d' ' -f1-3 /proc/loadavg). Wall time: $(($(date +%s) - START_EPOCH)) s."

# ---------------------------------------------------------------- output
mkdir -p "$OUT_DIR"
rm -rf "$OUT_DIR/raw"
cp -r "$T/logs" "$OUT_DIR/raw"
cp "$T"/*.tsv "$OUT_DIR/raw/" 2>/dev/null || true
cp "$R" "$OUT_DIR/report.md"
rm -f "$OUT_DIR/report.partial.md"
cat "$R"
say "done in $(($(date +%s) - START_EPOCH)) s; report saved to $OUT_DIR/report.md"
