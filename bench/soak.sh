#!/usr/bin/env bash
# bench/soak.sh: graceful stop under load, many times over.
#
#   bash bench/soak.sh                         10 rounds, 64 clients, 2s of load each
#   ROUNDS=50 bash bench/soak.sh
#   SERVERY_SOAK_CLIENTS=128 SERVERY_SOAK_DURATION=5s RACE=1 bash bench/soak.sh
#
# Each round is one run of TestGracefulStopUnderLoadTruncatesNothing
# (reliability_test.go): a 4-worker generation serves keep-alive clients
# over raw HTTP/1.1 and is stopped mid-load, and every exchange is
# classified as complete, refused (dial after the listener closed), closed
# before any response byte (the keep-alive race), truncated, or other. The
# script sums the "soak:" line each round logs, then counts orphans:
# processes still running the test binary, which it builds under a unique
# path so that nobody else's tests are counted. It exits non-zero if any
# response was truncated, any exchange was "other", any process was left,
# or a round failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/usr/local/go/bin"

ROUNDS=${ROUNDS:-10}
export SERVERY_SOAK_CLIENTS=${SERVERY_SOAK_CLIENTS:-64}
export SERVERY_SOAK_DURATION=${SERVERY_SOAK_DURATION:-2s}
RACE=${RACE:-0}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/servery-soak.XXXXXX")
bin="$tmp/servery-soak.test"
log="$tmp/rounds.log"

# orphans lists the pids of processes running this script's test binary.
orphans() { pgrep -f -- "$bin" || true; }

cleanup() {
	local pid
	for pid in $(orphans); do
		kill -KILL "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

race_flag=-race=false
if [[ $RACE == 1 ]]; then
	race_flag=-race
fi
echo "soak: building the test binary ($race_flag)" >&2
go test -c "$race_flag" -o "$bin" .

echo "soak: $ROUNDS rounds, $SERVERY_SOAK_CLIENTS clients, $SERVERY_SOAK_DURATION of load before each stop" >&2
began=$(date +%s)
status=0
"$bin" -test.run '^TestGracefulStopUnderLoadTruncatesNothing$' -test.count "$ROUNDS" -test.v >"$log" 2>&1 || status=$?
took=$(($(date +%s) - began))

# Processes end with the harness's cleanup, before the binary exits; give
# the kernel a moment to finish tearing them down before counting.
for _ in 1 2 3 4 5 6 7 8 9 10; do
	[[ -z $(orphans) ]] && break
	sleep 0.2
done
left=$(orphans | wc -l)
if ((left > 0)); then
	echo "soak: processes left running the test binary:" >&2
	ps -o pid,ppid,etime,args -p "$(orphans | paste -sd, -)" >&2 || true
fi

# One "soak: k=v ..." line per round; print a row per round and the totals.
lines=$(grep -o 'soak: complete=.*' "$log" || true)
rounds_seen=$(printf '%s' "$lines" | grep -c . || true)
printf '%s\n' "$lines" | awk -v left="$left" -v took="$took" -v rounds="$ROUNDS" '
	BEGIN {
		n = split("complete refused closed_before_response truncated other complete_after_stop_began", keys, " ")
		printf "| round |"
		for (i = 1; i <= n; i++) printf " %s |", keys[i]
		printf "\n|---|"
		for (i = 1; i <= n; i++) printf "---:|"
		printf "\n"
	}
	/^soak: / {
		r++
		for (f = 2; f <= NF; f++) {
			split($f, kv, "=")
			v[kv[1]] = kv[2]
			sum[kv[1]] += kv[2]
		}
		printf "| %d |", r
		for (i = 1; i <= n; i++) printf " %d |", v[keys[i]]
		printf "\n"
	}
	END {
		printf "| **all %d** |", r
		for (i = 1; i <= n; i++) printf " **%d** |", sum[keys[i]]
		printf "\n\n"
		sent = sum["complete"] + sum["closed_before_response"] + sum["truncated"] + sum["other"]
		printf "rounds: %d of %d, requests sent: %d, truncated: %d, other: %d, orphans: %d, wall: %ds\n",
			r, rounds, sent, sum["truncated"], sum["other"], left, took
	}'

fail=0
if ((status != 0)); then
	echo "soak: FAIL: the test binary exited $status; its output:" >&2
	grep -E -- '--- FAIL|_test\.go:[0-9]+:' "$log" | grep -v 'soak: complete=' | head -40 >&2 || true
	fail=1
fi
if ((rounds_seen != ROUNDS)); then
	echo "soak: FAIL: $rounds_seen of $ROUNDS rounds logged their counts" >&2
	fail=1
fi
if grep -qE 'truncated=[1-9]|other=[1-9]' <<<"$lines"; then
	echo "soak: FAIL: truncated or unclassified exchanges" >&2
	fail=1
fi
if ((left > 0)); then
	echo "soak: FAIL: $left orphaned processes" >&2
	fail=1
fi
exit "$fail"
