#!/usr/bin/env bash
# bench/heal.sh: what healing costs: a worker killed under load and
# replaced in its slot, workers recycled under load, and a crash loop.
#
#   bash bench/heal.sh           full run (about 2 min on 2 cores, plus any wait for a quiet box)
#   QUICK=1 bash bench/heal.sh   smoke test (4 kills 1 s apart, 3 cold starts each, 5 s of recycling, no settle before the crash loop)
#   KILLS=15 KILL_GAP=4 MAX_REQUESTS=5000 bash bench/heal.sh
#
# 1. Kill: servery -workers 4 -max-restarts 20 under CONNS (64) keep-alive
#    clients; KILLS (11) SIGKILLs of one worker, KILL_GAP (3) s apart,
#    rotating over the slots so that each slot's worker has served steadily
#    (10 s) when it is killed; requests refused (must be none), requests
#    lost and on whose connections (only the killed worker's may be), time
#    from the loss to the replacement's ready (the `worker respawned`
#    lines' after=), req/s per 100 ms bucket; beside it the cold start of
#    servery -workers 1 and 2 (COLD_RUNS, 11, exec to `msg=serving`).
# 2. Recycle: -workers 4 -max-requests MAX_REQUESTS (2000) under the same
#    load for RECYCLE_DUR (10) s: refused, truncated, keep-alive races and
#    other errors (all must be 0), recycles done, lowest bucket vs median.
# 3. Crash loop: -workers 4 with the default -max-restarts 5; once it
#    serves, its -dir is renamed so every later worker start fails, and one
#    worker is killed: the healing lines, the backoffs actually taken, and
#    the time from the kill to servery's exit 1.
#
# The timing is done by bench/reloadtool (shared with go run ./bench's reload section),
# built from the working tree. Prints Markdown and saves it to
# bench/out/heal.md, the req/s series to bench/out/heal-rps.csv (one file
# per run next to it), the plot to bench/out/heal-rps.svg, servery's logs
# and the helper's TSVs to bench/out/heal-raw/. Progress goes to stderr.
# Every server listens on 127.0.0.1, every run is bounded in time, and the
# EXIT trap kills every process (group) the script started and removes its
# temp dir. Nothing in the repository is modified except bench/out/.
# Exits non-zero on a refused request (1, 2), a request lost on a worker
# that was not killed (1), a truncated, keep-alive-race or other error in
# 2, an expected log line missing, a wrong exit status, a failed run, or a
# leftover process.
set -Eeuo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
OUT_DIR="$SCRIPT_DIR/out"
export PATH="$PATH:/usr/local/go/bin"

# ---------------------------------------------------------------- settings
QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
	KILLS=${KILLS:-4}
	KILL_GAP=${KILL_GAP:-1}         # s between kills
	FIRST_KILL=${FIRST_KILL:-1}     # s into the measurement
	COLD_RUNS=${COLD_RUNS:-3}
	RECYCLE_DUR=${RECYCLE_DUR:-5}
	CRASH_SETTLE=${CRASH_SETTLE:-0} # s the crash loop's workers serve before the kill
	QUIET_WAIT=${QUIET_WAIT:-5}
	QUIET_BUDGET=${QUIET_BUDGET:-10}
else
	KILLS=${KILLS:-11}
	KILL_GAP=${KILL_GAP:-3}
	FIRST_KILL=${FIRST_KILL:-1.5}
	COLD_RUNS=${COLD_RUNS:-11}
	RECYCLE_DUR=${RECYCLE_DUR:-10}
	CRASH_SETTLE=${CRASH_SETTLE:-11}
	QUIET_WAIT=${QUIET_WAIT:-20}
	QUIET_BUDGET=${QUIET_BUDGET:-60}
fi
WORKERS=${WORKERS:-4}              # sections 1, 2, 3
KILL_RESTARTS=${KILL_RESTARTS:-20} # section 1's -max-restarts
KILL_TAIL=${KILL_TAIL:-1.5}        # s measured after the last kill
KILL_NORETRY=${KILL_NORETRY:-1}    # 1: section 1's requests are non-replayable, so every request the kill breaks shows
STEADY=${STEADY:-10.5}             # s a slot's worker serves before its kill (servery's Steady is 10 s)
COLD_WORKERS=${COLD_WORKERS:-1 2}
MAX_REQUESTS=${MAX_REQUESTS:-2000}
CONNS=${CONNS:-64}
WARMUP=${WARMUP:-1}                # s of load before the measurement
BUCKET_MS=${BUCKET_MS:-100}
SERVER_CPU=${SERVER_CPU:-0}        # servery (and its workers) here,
LOAD_CPU=${LOAD_CPU:-1}            # the load client here
BASE_PORT=${BASE_PORT:-18480}      # ports BASE_PORT to BASE_PORT+9
QUIET_PCT=${QUIET_PCT:-10}         # before each run wait up to QUIET_WAIT s (QUIET_BUDGET in all)

# servery gives up past -max-restarts losses within a minute: section 1
# must stay below it.
((KILLS < KILL_RESTARTS)) || { echo "heal.sh: KILLS ($KILLS) must stay below KILL_RESTARTS ($KILL_RESTARTS), section 1's -max-restarts" >&2; exit 2; }

# Kill offsets and slots: FIRST_KILL + k*KILL_GAP s, slot k mod WORKERS.
KILL_OFFS=$(awk -v f="$FIRST_KILL" -v g="$KILL_GAP" -v n="$KILLS" 'BEGIN{for (k = 0; k < n; k++) printf "%s%dms", (k?",":""), int(1000*(f+k*g)+0.5)}')
KILL_SLOTS=$(awk -v w="$WORKERS" 'BEGIN{for (k = 0; k < w; k++) printf "%s%d", (k?",":""), k}')
KILL_DUR_MS=$(awk -v f="$FIRST_KILL" -v g="$KILL_GAP" -v n="$KILLS" -v t="$KILL_TAIL" 'BEGIN{printf "%d", 1000*(f+(n-1)*g+t)+0.5}')
# Idle wait after serving, so that the first workers have served STEADY s
# when the first kill comes; and whether the rotation gives each slot that
# long between kills.
KILL_SETTLE_MS=$(awk -v s="$STEADY" -v w="$WARMUP" -v f="$FIRST_KILL" 'BEGIN{x=1000*(s-w-f); printf "%d", (x>0?x:0)}')
ROTATION_STEADY=$(awk -v g="$KILL_GAP" -v w="$WORKERS" -v n="$KILLS" -v s="$STEADY" 'BEGIN{print ((n <= w || g*w >= s) ? 1 : 0)}')

# ---------------------------------------------------------------- plumbing
T=""
START_EPOCH=$(date +%s)
say() { printf '[heal %s] %s\n' "$(date +%T)" "$*" >&2; }
die() {
	say "FATAL: $*"
	exit 1
}

# Process bookkeeping as in go run ./bench: every process we start leads
# its own session (setsid) and goes into $T/pids, and so does each servery
# the helper starts (its pid file); servery's workers lead their own
# sessions, so descendants are signalled one by one too.
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
# ours lists running processes whose command line names our temp dir or
# that run one of our binaries: only ours can. No forks (bash reads the
# command line, test -ef follows /proc/PID/exe), so it stays quick on a
# busy box with many processes.
ours() {
	local p pid a
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
		a=()
		{ mapfile -d '' -t a <"$p/cmdline"; } 2>/dev/null || continue
		((${#a[@]} > 0)) || continue # a kernel thread, or gone
		if [[ "${a[*]}" == *"$T/"* || $p/exe -ef $T/bin/servery || $p/exe -ef $T/bin/reloadtool ]]; then
			echo "$pid"
		fi
	done 2>/dev/null
	return 0
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
			mkdir -p "$OUT_DIR" && cp "$R" "$OUT_DIR/heal.partial.md" &&
				say "partial report saved to $OUT_DIR/heal.partial.md"
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
col() { awk -F'\t' -v c="$1" 'NR>1 && $c!="NaN" && $c!="" {print $c}' "$2"; } # column C of TSV file, no header
fmt() { awk -v x="$1" -v f="$2" 'BEGIN{if (x=="NaN"||x=="") print "n/a"; else printf f, x}'; }
R=""
md() { printf '%s\n' "$@" >>"$R"; }
# problem TEXT: listed under Problems and makes the exit status non-zero;
# note TEXT: listed under Problems, exit status unchanged.
problem() {
	printf -- '- %s\n' "$*" >>"$T/problems"
	printf -- '- %s\n' "$*" >>"$T/fatal"
	say "PROBLEM: $*"
}
note() {
	printf -- '- %s\n' "$*" >>"$T/problems"
	say "note: $*"
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
sumv() { [[ -f $2 ]] && awk -v k="$1" 'index($0, k "=") == 1 {print substr($0, length(k) + 2)}' "$2" || true; }
num() { local v; v=$(sumv "$1" "$2" | head -1); echo "${v:-0}"; } # a numeric summary key, 0 when missing

# ---------------------------------------------------------------- setup
T=$(mktemp -d /tmp/servery-heal.XXXXXX)
mkdir -p "$T/bin" "$T/logs" "$T/run" "$T/site" "$T/site-crash"
: >"$T/pids"
: >"$T/problems"
: >"$T/fatal"
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
srv_pin=()
cli_pin=()
if ((PIN)); then
	srv_pin=(taskset -c "$SERVER_CPU")
	cli_pin=(taskset -c "$LOAD_CPU")
fi

COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=""
git -C "$REPO" diff --quiet HEAD -- '*.go' go.mod 2>/dev/null || DIRTY="+dirty"
DATE=$(date -u +%Y-%m-%d)
CMDLINE="bash bench/heal.sh"
[[ $QUICK == 1 ]] && CMDLINE="QUICK=1 $CMDLINE"

say "building servery and bench/reloadtool from $REPO (commit $COMMIT$DIRTY)"
SRC_HASH=$(cd "$REPO" && cat ./*.go go.mod 2>/dev/null | sha256sum | cut -c1-12)
(cd "$REPO" && go build -o "$T/bin/servery" .) >"$T/logs/build.log" 2>&1 ||
	die "go build of servery failed: $(cat "$T/logs/build.log")"
# Someone may be editing the tree: the sources must be the same before and
# after the build.
[[ $(cd "$REPO" && cat ./*.go go.mod 2>/dev/null | sha256sum | cut -c1-12) == "$SRC_HASH" ]] ||
	die "the Go sources changed while servery was being built; run again"
git -C "$REPO" diff --quiet HEAD -- '*.go' go.mod 2>/dev/null || DIRTY="+dirty"
BIN_HASH=$(sha256sum "$T/bin/servery" | cut -c1-12)
(cd "$REPO" && go build -o "$T/bin/reloadtool" ./bench/reloadtool) >"$T/logs/build-tool.log" 2>&1 ||
	die "go build of the helper failed: $(cat "$T/logs/build-tool.log")"

# The site: one fixed 1 KiB file; the crash loop gets a copy of its own,
# which it renames.
awk 'BEGIN{for (i = 0; i < 1024; i++) printf "%c", (i % 64 == 63) ? 10 : 97 + (i * 7) % 26}' >"$T/site/1k.html"
[[ $(stat -c %s "$T/site/1k.html") == 1024 ]] || die "1k.html is not 1024 bytes"
cp "$T/site/1k.html" "$T/site-crash/1k.html"

k=0
next_port() {
	PORT=$((BASE_PORT + k))
	k=$((k + 1))
	port_free "$PORT" || die "port $PORT is already in use"
}

# ---------------------------------------------------------------- 1. kills
next_port
wait_quiet
say "kill: -workers $WORKERS, $CONNS clients, ${KILL_DUR_MS} ms measured after ${KILL_SETTLE_MS} ms idle and ${WARMUP} s warmup, SIGKILL at $KILL_OFFS (slots $KILL_SLOTS in turn)"
if ! run_tool kill $((KILL_DUR_MS / 1000 + KILL_SETTLE_MS / 1000 + WARMUP + 60)) "${cli_pin[@]}" "$T/bin/reloadtool" load \
	-noretry="$([[ $KILL_NORETRY == 1 ]] && echo true || echo false)" \
	-url "http://127.0.0.1:$PORT/1k.html" -expect "$T/site/1k.html" -c "$CONNS" -warmup "${WARMUP}s" \
	-dur "${KILL_DUR_MS}ms" -bucket "${BUCKET_MS}ms" -settle "${KILL_SETTLE_MS}ms" \
	-kills "$KILL_OFFS" -kill-slots "$KILL_SLOTS" \
	-log "$T/logs/kill.log" -pidfile "$T/run/kill.pid" -csv "$T/kill.csv" -summary "$T/kill.sum" \
	-kill-out "$T/kill-kills.tsv" -heal "$T/kill-heal.tsv" \
	-- "${srv_pin[@]}" "$T/bin/servery" -workers "$WORKERS" -dir "$T/site" -addr "127.0.0.1:$PORT" -max-restarts "$KILL_RESTARTS"; then
	problem "kill: the run failed: $(tail -3 "$T/logs/kill.tool.out" | tr '\n' ' ')"
fi
after_run "kill"

# Cold starts, servery pinned as under load, idle.
for w in $COLD_WORKERS; do
	next_port
	wait_quiet
	say "cold start: -workers $w, $COLD_RUNS runs"
	if ! run_tool "cold-w$w" $((COLD_RUNS * 25 + 30)) "$T/bin/reloadtool" coldstart -n "$COLD_RUNS" \
		-log "$T/logs/cold-w$w.log" -pidfile "$T/run/cold-w$w.pid" -out "$T/cold-w$w.tsv" \
		-- "${srv_pin[@]}" "$T/bin/servery" -workers "$w" -dir "$T/site" -addr "127.0.0.1:$PORT"; then
		problem "cold start -workers $w: the run failed: $(tail -3 "$T/logs/cold-w$w.tool.out" | tr '\n' ' ')"
	fi
	after_run "cold start -workers $w"
done

# ---------------------------------------------------------------- 2. recycling
next_port
wait_quiet
say "recycle: -workers $WORKERS -max-requests $MAX_REQUESTS, $CONNS clients, ${RECYCLE_DUR} s"
if ! run_tool recycle $((RECYCLE_DUR + WARMUP + 60)) "${cli_pin[@]}" "$T/bin/reloadtool" load \
	-url "http://127.0.0.1:$PORT/1k.html" -expect "$T/site/1k.html" -c "$CONNS" -warmup "${WARMUP}s" \
	-dur "${RECYCLE_DUR}s" -bucket "${BUCKET_MS}ms" \
	-log "$T/logs/recycle.log" -pidfile "$T/run/recycle.pid" -csv "$T/recycle.csv" -summary "$T/recycle.sum" \
	-heal "$T/recycle-heal.tsv" \
	-- "${srv_pin[@]}" "$T/bin/servery" -workers "$WORKERS" -dir "$T/site" -addr "127.0.0.1:$PORT" -max-requests "$MAX_REQUESTS"; then
	problem "recycle: the run failed: $(tail -3 "$T/logs/recycle.tool.out" | tr '\n' ' ')"
fi
after_run "recycle"

# ---------------------------------------------------------------- 3. crash loop
next_port
wait_quiet
say "crash loop: -workers $WORKERS, default -max-restarts; after ${CRASH_SETTLE} s, -dir renamed and slot 1's worker killed"
if ! run_tool crash $((CRASH_SETTLE + 90)) "$T/bin/reloadtool" crashloop -vanish "$T/site-crash" -slot 1 \
	-settle "${CRASH_SETTLE}s" -timeout 60s \
	-log "$T/logs/crash.log" -pidfile "$T/run/crash.pid" -out "$T/crash.tsv" -summary "$T/crash.sum" \
	-- "${srv_pin[@]}" "$T/bin/servery" -workers "$WORKERS" -dir "$T/site-crash" -addr "127.0.0.1:$PORT"; then
	problem "crash loop: the run failed: $(tail -3 "$T/logs/crash.tool.out" | tr '\n' ' ')"
fi
after_run "crash loop"

# ---------------------------------------------------------------- report
md "# servery healing benchmark" ""
md "\`$CMDLINE\` at commit $COMMIT$DIRTY (Go sources sha256 $SRC_HASH, binary $BIN_HASH), $(date -u '+%Y-%m-%d %H:%M UTC'), $NPROC CPUs, $(go version | awk '{print $3}')."
md ""
md "Load in sections 1 and 2: bench/reloadtool's Go client, $CONNS goroutines sharing one keep-alive Transport, each GETting \`/1k.html\` in a loop; every response is checked byte for byte and counted in the ${BUCKET_MS} ms bucket of its completion time; every error is classified: refused (ECONNREFUSED), closed before any response byte on a reused connection (the keep-alive race's symptom), truncated (body cut short), other. $( ((PIN)) && echo "servery and its workers pinned to CPU $SERVER_CPU, the client to CPU $LOAD_CPU." || echo "Unpinned (one CPU).")"
md ""

# --- section 1
ks=$T/kill.sum
kt=$T/kill-kills.tsv
md "## 1. A worker killed under load: -workers $WORKERS -max-restarts $KILL_RESTARTS, $KILLS SIGKILLs ${KILL_GAP} s apart" ""
if [[ $KILL_NORETRY == 1 ]]; then
	md "Requests are non-replayable (an empty body that is not \`http.NoBody\`, no \`GetBody\`; nothing more on the wire), so the Transport retries nothing: every request a kill breaks is a failed request here, what a POST or a client without retries sees. (Go's Transport would resend a GET that failed this way on a reused connection.)"
else
	md "Requests are ordinary GETs: Go's Transport resends one that failed on a reused connection before any response byte; those resends are counted as retried."
fi
md ""
md "Kills at $(tr ',' ' ' <<<"$KILL_OFFS") into the measurement, slots $KILL_SLOTS in turn; servery served ${KILL_SETTLE_MS} ms idle and ${WARMUP} s under load first, so each slot's worker had served at least ${STEADY} s when killed (servery counts a worker lost within 10 s of its ready as a failure and backs off)$( ((ROTATION_STEADY)) || echo "; **but with $WORKERS slots and kills ${KILL_GAP} s apart, a slot is killed again sooner than that, so later kills back off**"). Just before each SIGKILL the helper lists the killed worker's established client connections (its socket fds against \`/proc/PID/net/tcp\`); a failed request is the killed worker's when its connection was in that list, else it is lost elsewhere."
md ""
if [[ -s $ks ]]; then
	req=$(num requests "$ks") ref=$(num refused "$ks") trunc=$(num truncated "$ks") other=$(num other "$ks")
	race=$(num ka_race "$ks") racef=$(num ka_race_failed "$ks")
	lk=$(num lost_killed "$ks") le=$(num lost_elsewhere "$ks") rk=$(num retried_killed "$ks") re=$(num retried_elsewhere "$ks")
	nk=$(num kills "$ks") nkf=$(num kills_failed "$ks") nmiss=$(num kills_missing_lines "$ks")
	# Lowest bucket within 1 s after a kill, and elsewhere.
	read -r near_min away_min < <(awk -F'\t' 'NR==FNR {if (FNR>1) k[++n]=$2*1000; next}
		FNR>1 {split($0, f, ","); t=f[1]; r=f[2]; near=0; for (i=1; i<=n; i++) if (t+'"$BUCKET_MS"' > k[i] && t < k[i]+1000) near=1
			if (near) {if (nm=="" || r+0<nm+0) nm=r} else {if (am=="" || r+0<am+0) am=r}}
		END{print (nm==""?"NaN":nm), (am==""?"NaN":am)}' "$kt" "$T/kill.csv" 2>/dev/null || echo "NaN NaN")
	med=$(num rps_median_bucket "$ks")
	pct() { awk -v x="$1" -v m="$med" 'BEGIN{if (x=="NaN"||m+0==0) print "n/a"; else printf "%s (%.0f %%)", x, 100*x/m}'; }
	kinds=$(sumv lost_killed_kind "$ks" | sed -e 's/ race$/ closed before any response byte/' | paste -sd';' - | sed 's/;/; /g')
	ekinds=$(sumv lost_elsewhere_kind "$ks" | sed -e 's/ race$/ closed before any response byte/' | paste -sd';' - | sed 's/;/; /g')
	conns_total=$(col 5 "$kt" | awk '{s+=$1} END{print s+0}')
	busy_total=$(col 19 "$kt" | awk '{s+=$1} END{print s+0}')
	read -r krlo krhi < <(col 13 "$kt" | minmax)
	md "| requests | mean req/s | median bucket req/s | lowest bucket within 1 s after a kill (% of median) | lowest bucket elsewhere (% of median) | refused | lost on the killed worker | lost elsewhere | retried by the Transport (killed worker / elsewhere) | truncated / other (all connections) | loss to replacement ready (after=), median (min-max) ms | kill to \`worker respawned\` stamp, median (min-max) ms | other work on box |"
	md "|---:|---:|---:|---|---|---:|---|---:|---|---|---|---|---:|"
	md "| $req | $(sumv rps_mean "$ks") | $med | $(pct "$near_min") | $(pct "$away_min") | $ref | $lk, from the $conns_total connections the killed workers held, $busy_total of them carrying a request${kinds:+ ($kinds)} | $le${ekinds:+ ($ekinds)} | $rk / $re | $trunc / $other | $(num after_ms_median "$ks") ($(num after_ms_min "$ks")-$(num after_ms_max "$ks")) | $(col 13 "$kt" | median) ($krlo-$krhi) | $(sumv other_pct "$ks") % |"
	md ""
	((ref == 0)) || problem "kill: $ref requests refused"
	((le == 0)) || problem "kill: $le requests lost on connections of workers that were not killed: $ekinds"
	((re == 0)) || problem "kill: $re requests retried after failing on connections of workers that were not killed"
	((nk == KILLS)) || problem "kill: $nk of $KILLS kills made"
	((nkf == 0)) || problem "kill: $nkf kills failed: $(awk -F'\t' 'NR>1 && $17!="" {print $17}' "$kt" | head -3 | paste -sd';' -)"
	((nmiss == 0)) || problem "kill: $nmiss kills lack an expected line (worker lost, worker respawning, worker started, worker respawned): see the table"
	[[ $(sumv servery_exit "$ks") == ok ]] || problem "kill: servery's exit: $(sumv servery_exit "$ks")"
	md "Per kill. conns: the killed worker's established client connections, and how many of them carried a request of the client's just before the kill (the client's pool also holds idle connections; a request begun between that look and the kill is lost too); after: the \`worker respawned\` line's after=, servery's clock from the loss (as its lifecycle loop saw it) to the replacement's ready; kill to lost / respawned: from the helper's clock just before kill() to the \`time=\` stamps of the \`worker lost\` and \`worker respawned\` lines (the same wall clock; the stamps have 1 ms resolution), so they include how long servery took to notice the death:"
	md ""
	md "| kill | at (s) | slot | pid | conns (carrying a request) | lost | retried | \`worker respawning\` delay, failures | after (ms) | kill to lost / respawned (ms) | new pid | lowest bucket within 1 s (% of median) |"
	md "|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---|"
	awk -F'\t' 'NR>1 {d=$9; if (d!="NaN") sub(/\.[0-9]*/, "", d)
		printf "| %s | %s | %s | %s | %s (%s) | %s | %s | %s, %s | %s | %s / %s | %s | %s (%s %%) |\n", $1, $2, $3, $4, $5, $19, $6, $7, d, $10, $12, $18, $13, $14, $15, $16}' "$kt" >>"$R"
	md ""
	backed=$(awk -F'\t' 'NR>1 && $10!="0" && $10!="NaN"' "$kt" | wc -l)
	if ((backed > 0)); then
		if ((ROTATION_STEADY)); then
			problem "kill: $backed of $KILLS respawns waited a backoff (failures > 0) although every killed worker had served ${STEADY} s or more: servery counted it as a failure"
		else
			note "kill: $backed of $KILLS respawns waited a backoff: the rotation kills a slot again within 10 s of its replacement's ready (KILL_GAP x WORKERS < ${STEADY} s)"
		fi
	fi
	lostrows=$(awk -F'\t' 'NR>1 && $6+0 > $5+0' "$kt" | wc -l)
	((lostrows == 0)) || note "kill: $lostrows kills lost more requests than the killed worker had connections (a client can lose only one request per connection)"
else
	md "No results: the run failed."
	problem "kill: no summary"
fi
md ""
md "**Beside it, a cold start** ($COLD_RUNS runs per row, idle, servery pinned to CPU $SERVER_CPU): ready_in is the \`msg=serving\` line's own (servery's clock from its process start); exec is the helper's clock from just before exec to reading that line."
md ""
md "| servery | ready_in, median (min-max) ms | exec to \`serving\` line, median (min-max) ms | stop after SIGTERM, median ms |"
md "|---|---|---|---:|"
for w in $COLD_WORKERS; do
	f=$T/cold-w$w.tsv
	if [[ ! -s $f ]] || (($(wc -l <"$f") < 2)); then
		md "| -workers $w | n/a | n/a | n/a |"
		problem "cold start -workers $w: no results"
		continue
	fi
	n=$(($(wc -l <"$f") - 1))
	((n == COLD_RUNS)) || problem "cold start -workers $w: $n of $COLD_RUNS runs"
	read -r lo hi < <(col 2 "$f" | minmax)
	read -r elo ehi < <(col 3 "$f" | minmax)
	bad=$(awk -F'\t' 'NR>1 && $6!="ok"' "$f" | wc -l)
	((bad == 0)) || problem "cold start -workers $w: $bad runs did not stop cleanly: $(awk -F'\t' 'NR>1 && $6!="ok" {print $6}' "$f" | head -2 | paste -sd';' -)"
	md "| -workers $w$([[ $w == 1 ]] && echo ' (direct mode: no worker process)') | $(col 2 "$f" | median) ($lo-$hi) | $(col 3 "$f" | median) ($elo-$ehi) | $(col 5 "$f" | median) |"
done
if [[ -s $ks ]]; then
	md "| respawn of one of $WORKERS workers under load (section 1's after=) | $(num after_ms_median "$ks") ($(num after_ms_min "$ks")-$(num after_ms_max "$ks")) | | |"
fi
md ""
md "![req/s per ${BUCKET_MS} ms bucket across the kills, and across recycling](heal-rps.svg)"
md ""

# --- section 2
rs=$T/recycle.sum
rh=$T/recycle-heal.tsv
md "## 2. Recycling under load: -workers $WORKERS -max-requests $MAX_REQUESTS, ${RECYCLE_DUR} s measured after ${WARMUP} s warmup" ""
md "Ordinary GETs. A worker that has answered its -max-requests (plus up to 10 % jitter) asks to be recycled; servery starts its replacement first, then drains it; one recycle at a time."
md ""
if [[ -s $rs ]]; then
	req=$(num requests "$rs") ref=$(num refused "$rs") trunc=$(num truncated "$rs") other=$(num other "$rs")
	race=$(num ka_race "$rs") racef=$(num ka_race_failed "$rs")
	nrec=$(num lines_worker_recycled "$rs") nrecing=$(num lines_worker_recycling "$rs") nrecf=$(num lines_worker_recycle_failed "$rs")
	nq=$(num lines_worker_recycle_queued "$rs") nlost=$(num lines_worker_lost "$rs")
	inwin=$(awk -F'\t' -v d="$RECYCLE_DUR" 'NR>1 && $3=="worker recycled" && $1+0>=0 && $1+0<d*1000' "$rh" 2>/dev/null | wc -l)
	md "| requests | mean req/s | median bucket req/s | lowest bucket req/s (% of median) | buckets < 50 % of median / at 0 | recycles done (during the measurement) | recycles begun / failed | refused | truncated | keep-alive-race closures (retried / failed) | other errors | new connections | other work on box |"
	md "|---:|---:|---:|---|---|---|---|---:|---:|---|---:|---:|---:|"
	md "| $req | $(sumv rps_mean "$rs") | $(sumv rps_median_bucket "$rs") | $(sumv min_rps "$rs") | $(sumv low_buckets "$rs") / $(sumv zero_buckets "$rs") of $(sumv buckets "$rs") | $nrec ($inwin) | $nrecing / $nrecf | $ref | $trunc | $((race - racef)) / $racef | $other | $(num new_conns "$rs") | $(sumv other_pct "$rs") % |"
	md ""
	((ref == 0)) || problem "recycle: $ref requests refused"
	((trunc == 0)) || problem "recycle: $trunc truncated responses"
	((race == 0)) || problem "recycle: $race keep-alive-race closures ($racef failed): $(sumv race_kind "$rs" | head -3 | paste -sd';' -)"
	((other == 0)) || problem "recycle: $other other errors: $(sumv other_kind "$rs" | head -3 | paste -sd';' -)"
	((nrec > 0)) || problem "recycle: no \`worker recycled\` line"
	((nrecf == 0)) || problem "recycle: $nrecf \`worker recycle failed\` lines"
	((nlost == 0)) || problem "recycle: $nlost \`worker lost\` lines"
	[[ $(sumv servery_exit "$rs") == ok ]] || problem "recycle: servery's exit: $(sumv servery_exit "$rs")"
	if [[ -s $rh ]]; then
		# Recycle durations: recycling -> recycled of the same slot, by
		# servery's time= stamps (the helper, busy being the load, reads
		# lines late and in batches).
		awk -F'\t' 'function ms(t) {return substr(t, 12, 2)*3600000 + substr(t, 15, 2)*60000 + substr(t, 18, 6)*1000}
			NR>1 && $3=="worker recycling" {b[$4]=ms($2)}
			NR>1 && $3=="worker recycled" && ($4 in b) {d=ms($2)-b[$4]; if (d<0) d+=86400000; print d; delete b[$4]}' "$rh" >"$T/recycle-took.txt"
		if [[ -s $T/recycle-took.txt ]]; then
			read -r lo hi < <(minmax <"$T/recycle-took.txt")
			md "- A recycle (\`worker recycling\` to \`worker recycled\`, the replacement started and ready, the old worker told to drain) took $(median <"$T/recycle-took.txt") ms median ($lo-$hi), by servery's log stamps (1 ms resolution); $nq requests to be recycled were queued in all."
		fi
	fi
else
	md "No results: the run failed."
	problem "recycle: no summary"
fi
md ""

# --- section 3
cs=$T/crash.sum
ct=$T/crash.tsv
md "## 3. Crash loop: -workers $WORKERS, default -max-restarts 5 / -restart-window 1m" ""
md "servery served ${CRASH_SETTLE} s; then the helper renamed its -dir, so every later worker start fails (\`app start: open root\`), and SIGKILLed slot 1's worker. $( [[ $CRASH_SETTLE == 0 ]] && echo "The worker had served less than 10 s, so servery counts its loss as a failure and the first respawn already backs off (QUICK)." || echo "The worker had served more than 10 s, so the first respawn is immediate and the backoff begins with the first failed start.")"
md ""
if [[ -s $cs ]]; then
	md "Lines (t: the helper's clock from the kill; log: servery's time= stamps from the \`worker lost\` line):"
	md ""
	md "| t (ms) | log (ms) | msg | worker | pid | delay | failures | detail |"
	md "|---:|---:|---|---:|---:|---|---:|---|"
	awk -F'\t' 'NR>1 {d=$8; if (length(d) > 90) d=substr(d, 1, 90) "..."; gsub(/\|/, "\\|", d)
		printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, d}' "$ct" >>"$R"
	md ""
	IFS=, read -r -a delays <<<"$(sumv delays "$cs")"
	IFS=, read -r -a gaps <<<"$(sumv gaps_ms "$cs")"
	IFS=, read -r -a gapsl <<<"$(sumv gaps_log_ms "$cs")"
	md "Backoffs: the \`worker respawning\` line's delay, and the time actually taken from the failure (the loss, then each \`worker respawn failed\`) to the next \`worker started\` of the slot; nominal: 100 ms doubling per consecutive failure, times 0.8-1.2."
	md ""
	md "| respawn | failures | logged delay (ms) | nominal (ms) | taken, helper's clock (ms) | taken, log (ms) |"
	md "|---:|---:|---:|---|---:|---:|"
	fails=($(awk -F'\t' 'NR>1 && $3=="worker respawning" && $4=="1" {print $7}' "$ct"))
	for i in "${!delays[@]}"; do
		d=${delays[i]}
		dm=$(awk -v d="$d" 'BEGIN{ if (d ~ /ms$/) {sub(/ms$/, "", d); printf "%.1f", d} else if (d ~ /µs$|us$/) {sub(/(µs|us)$/, "", d); printf "%.3f", d/1000} else if (d ~ /^[0-9.]+s$/) {sub(/s$/, "", d); printf "%.1f", d*1000} else if (d == "0s") print 0; else print d }')
		f=${fails[i]:-NaN}
		nom=$(awk -v f="$f" 'BEGIN{if (f+0 == 0) print "0"; else {b=100*2^(f-1); printf "%d-%d", 0.8*b, 1.2*b}}')
		md "| $((i + 1)) | $f | $dm | $nom | ${gaps[i]:-n/a} | ${gapsl[i]:-n/a} |"
	done
	md ""
	exitc=$(sumv exit "$cs")
	md "Kill to \`giving up\` line: $(sumv kill_to_giving_up_ms "$cs") ms; kill to servery's exit (its /proc entry a zombie, the helper polling every 1 ms): $(sumv kill_to_exit_ms "$cs") ms; exit status $exitc; \`giving up\` counted lost=$(sumv giving_up_lost "$cs")."
	md ""
	[[ $(sumv kill "$cs") == ok ]] || problem "crash loop: the kill failed: $(sumv kill "$cs")"
	[[ $exitc == 1 ]] || problem "crash loop: servery's exit status was $exitc, not 1"
	((${#delays[@]} == 5)) || problem "crash loop: ${#delays[@]} \`worker respawning\` lines for the slot, not 5"
	(($(num lines_worker_respawn_failed "$cs") == 5)) || problem "crash loop: $(num lines_worker_respawn_failed "$cs") \`worker respawn failed\` lines, not 5"
	(($(num lines_worker_lost "$cs") == 1)) || problem "crash loop: $(num lines_worker_lost "$cs") \`worker lost\` lines, not 1"
	(($(num lines_giving_up "$cs") == 1)) || problem "crash loop: $(num lines_giving_up "$cs") \`giving up\` lines, not 1"
	(($(num lines_worker_respawned "$cs") == 0)) || problem "crash loop: a respawn succeeded although the -dir was gone"
	((${#gaps[@]} == ${#delays[@]})) || problem "crash loop: ${#gaps[@]} \`worker started\` lines after a failure, for ${#delays[@]} respawns"
	# Each backoff taken, by servery's own stamps (the helper may read a
	# line late on a busy box): at least the logged delay (the stamps have
	# 1 ms resolution), and not much more.
	for i in "${!delays[@]}"; do
		[[ -n ${gapsl[i]:-} ]] || continue
		d=$(awk -v d="${delays[i]}" 'BEGIN{ if (d ~ /ms$/) {sub(/ms$/, "", d); print d+0} else if (d ~ /µs$|us$/) print 0; else if (d ~ /s$/) {sub(/s$/, "", d); print d*1000} else print 0 }')
		if awk -v g="${gapsl[i]}" -v d="$d" 'BEGIN{exit !(g + 1 < d)}'; then
			problem "crash loop: respawn $((i + 1)) started ${gapsl[i]} ms after the failure (log), before its logged delay ${delays[i]}"
		elif awk -v g="${gapsl[i]}" -v d="$d" 'BEGIN{exit !(g > d + 250)}'; then
			note "crash loop: respawn $((i + 1)) started ${gapsl[i]} ms after the failure (log), its logged delay was ${delays[i]}: servery was slow to start it (busy box?)"
		fi
	done
else
	md "No results: the run failed."
	problem "crash loop: no summary"
fi

# ---------------------------------------------------------------- CSV, plot
mkdir -p "$OUT_DIR"
# events: kills (section 1) or \`worker recycled\` lines (section 2) per bucket.
events_col() { # CSV EVENT_TIMES_FILE(ms, one a line) -> CSV with an events column
	awk -F, -v b="$BUCKET_MS" 'NR==FNR {e[int($1/b)]++; next} FNR==1 {print $0 ",events"; next} {print $0 "," (e[int($1/b)]+0)}' "$2" "$1"
}
[[ -s $T/kill-kills.tsv ]] && awk -F'\t' 'NR>1 {print $2*1000}' "$T/kill-kills.tsv" >"$T/kill-events.txt" || : >"$T/kill-events.txt"
[[ -s $T/recycle-heal.tsv ]] && awk -F'\t' 'NR>1 && $3=="worker recycled" && $1>=0 {print $1}' "$T/recycle-heal.tsv" >"$T/recycle-events.txt" || : >"$T/recycle-events.txt"
RUNS=(kill recycle)
for run in "${RUNS[@]}"; do
	[[ -s $T/$run.csv ]] && events_col "$T/$run.csv" "$T/$run-events.txt" >"$OUT_DIR/heal-rps-$run.csv"
done
{
	echo "run,workers,t_ms,rps,errors,ka_race,events"
	for run in "${RUNS[@]}"; do
		f=$OUT_DIR/heal-rps-$run.csv
		[[ -s $f ]] && awk -v id="$run" -v w="$WORKERS" 'NR>1 {print id "," w "," $0}' "$f"
	done
} >"$OUT_DIR/heal-rps.csv"
kill_x=$(awk -v d="$KILL_DUR_MS" 'BEGIN{printf "%g", d/1000}')
{
	echo "set terminal svg size 960,900 font 'sans,12' noenhanced"
	echo "set output '$OUT_DIR/heal-rps.svg'"
	echo "set datafile separator ','"
	echo "set multiplot layout 2,1 title \"servery healing under keep-alive load: req/s per $BUCKET_MS ms bucket, -workers $WORKERS, $CONNS clients\\ncommit $COMMIT$DIRTY, $DATE\""
	echo "set grid ytics lc rgb '#dddddd'"
	echo "set key outside bottom center horizontal font ',10'"
	echo "set ylabel 'requests/s'"
	echo "set y2tics"
	echo "set ytics nomirror"
	echo "set y2range [0:*]"
	echo "set yrange [0:*]"
	echo "set xlabel 'time since the start of measurement (s)'"
	# Panel 1: kills.
	echo "set title '1. SIGKILL of one worker ($KILLS, dashed red), slots in turn; failed requests per bucket on the right axis'"
	echo "set y2label 'failed requests per bucket'"
	echo "set xrange [0:$kill_x]"
	while read -r t; do
		[[ -n $t ]] && echo "set arrow from $t/1000.0, graph 0 to $t/1000.0, graph 1 nohead dt 2 lw 1.5 lc rgb '#d62728' back"
	done <"$T/kill-events.txt"
	f=$OUT_DIR/heal-rps-kill.csv
	if [[ -s $f ]]; then
		echo "plot '$f' skip 1 using (\$1/1000):2 with steps lw 1.5 lc rgb '#1f77b4' title 'req/s, $([[ $KILL_NORETRY == 1 ]] && echo non-replayable GET || echo GET)', \\"
		echo "  '$f' skip 1 using (\$1/1000+$BUCKET_MS/2000.0):(\$3>0?\$3:1/0) axes x1y2 with points pt 7 ps 0.6 lc rgb '#d62728' title 'failed requests (right axis)'"
	else
		echo "plot 0 with lines lc rgb '#ffffff' title 'no data'"
	fi
	echo "unset arrow"
	# Panel 2: recycling.
	echo "set title '2. -max-requests $MAX_REQUESTS: worker recycles completed per bucket on the right axis'"
	echo "set y2label 'recycles / errors per bucket'"
	echo "set xrange [0:$RECYCLE_DUR]"
	echo "set label 1 'made by: $CMDLINE (commit $COMMIT$DIRTY, Go sources sha256 $SRC_HASH, $DATE)' at screen 0.01, screen 0.012 font ',9' tc rgb '#555555'"
	f=$OUT_DIR/heal-rps-recycle.csv
	if [[ -s $f ]]; then
		echo "plot '$f' skip 1 using (\$1/1000):2 with steps lw 1.5 lc rgb '#2ca02c' title 'req/s, GET', \\"
		echo "  '$f' skip 1 using (\$1/1000+$BUCKET_MS/2000.0):(\$5>0?\$5:1/0) axes x1y2 with impulses lw 2 lc rgb '#9467bd' title 'recycles completed (right axis)', \\"
		echo "  '$f' skip 1 using (\$1/1000+$BUCKET_MS/2000.0):(\$3>0?\$3:1/0) axes x1y2 with points pt 7 ps 0.6 lc rgb '#d62728' title 'errors (right axis)'"
	else
		echo "plot 0 with lines lc rgb '#ffffff' title 'no data'"
	fi
	echo "unset multiplot"
} >"$T/plot.gp"
rm -f "$OUT_DIR/heal-rps.svg"
if ! gnuplot "$T/plot.gp" 2>"$T/logs/gnuplot.log"; then
	problem "gnuplot failed: $(head -5 "$T/logs/gnuplot.log" | tr '\n' ' ')"
fi
cp "$T/plot.gp" "$T/logs/"

# ---------------------------------------------------------------- problems, notes
left=$(ours | wc -l)
((left == 0)) || problem "$left processes of ours still running before cleanup: $(ours | paste -sd' ' -)"
md "## Problems observed" ""
if [[ -s $T/problems ]]; then cat "$T/problems" >>"$R"; else md "- none: nothing refused, no request lost but on a killed worker's connections, every kill respawned, recycling lost nothing, the crash loop gave up as it should, no process left."; fi
md ""
md "## Caveats" ""
md "- $NPROC CPUs shared by servery and the load client; loopback only; a 1 KiB file from the worker's in-memory cache. The Go client is heavier per request than wrk, so the req/s level is the client's and the pair's; what matters is the shape around each kill or recycle."
md "- Under load servery's parent shares CPU $SERVER_CPU with its busy workers, so the time from a loss to the replacement's ready includes waiting for that CPU; the cold starts ran on the same CPU, idle."
md "- The box may be shared: before each run the script waited (up to ${QUIET_WAIT} s, ${QUIET_BUDGET} s in all; waited ${QUIET_WAITED} s) for other work to use at most ${QUIET_PCT} % of the CPUs; the other-work column is what other processes took during each run. Above a few % the buckets are noisy independently of the kills."
md "- Buckets are by response completion time; a bucket's req/s is its count x $((1000 / BUCKET_MS))."
md "- Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg). Wall time: $(($(date +%s) - START_EPOCH)) s."

rm -rf "$OUT_DIR/heal-raw"
cp -r "$T/logs" "$OUT_DIR/heal-raw"
cp "$T"/*.tsv "$T"/*.sum "$T"/*.csv "$OUT_DIR/heal-raw/" 2>/dev/null || true
cp "$R" "$OUT_DIR/heal.md"
rm -f "$OUT_DIR/heal.partial.md"
cat "$R"
say "done in $(($(date +%s) - START_EPOCH)) s; report saved to $OUT_DIR/heal.md, plot to $OUT_DIR/heal-rps.svg"
if [[ -s $T/fatal ]]; then exit 1; fi
exit 0
