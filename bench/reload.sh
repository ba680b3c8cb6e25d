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
mkdir -p "$T/bin" "$T/logs" "$T/run" "$T/site"
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

# The timing helper is a Go program of its own, bench/reloadtool (shared
# with bench/heal.sh), built from the working tree.
(cd "$REPO" && go build -o "$T/bin/reloadtool" ./bench/reloadtool) >"$T/logs/build-tool.log" 2>&1 ||
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
md "Load: a Go net/http client, bench/reloadtool (wrk cannot bucket by time): $CONNS goroutines sharing one keep-alive Transport, each GETting in a loop; every response is checked byte for byte and counted in the ${BUCKET_MS} ms bucket of its completion time. $( ((PIN)) && echo "servery and its workers pinned to CPU $SERVER_CPU, the client to CPU $LOAD_CPU." || echo "Unpinned (one CPU).")"
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
