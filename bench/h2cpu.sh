#!/usr/bin/env bash
# bench/h2cpu.sh: the server's CPU time per HTTP/2 request, two servery
# builds and bare net/http side by side, or servery with one worker and
# with two.
#
#   bash bench/h2cpu.sh OTHER                  this tree's build, OTHER (a servery binary), bare
#   bash bench/h2cpu.sh -workers               this tree's build: -workers 1, 2, and 2 with GOGC=$GOGC2 (150)
#   RUNS=5 REQUESTS=300000 bash bench/h2cpu.sh OTHER
#
# Each run starts one server pinned to CPU 0: servery (direct mode, or
# two workers sharing that core), or bench/baseline's baretls (bare
# net/http writing the same headers), with one P-256 certificate openssl
# makes for all. It warms the server with 50,000 requests, then sends
# REQUESTS more with h2load -t1 -c64 -m10 (pinned to CPU 1) for a 1 KiB
# file, and reads from /proc the user and system time the server and its
# workers spent meanwhile, their context switches, and, at the end, their
# resident memory. Servers alternate run by run; it prints every run and
# each server's median CPU time. CPU time per request does not move with
# the load generator's share of the box, as req/s does, which is why
# issue 40's HTTP/2 steps are measured with it. Needs h2load
# (nghttp2-client), openssl and taskset.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/usr/local/go/bin"
other=${1:?usage: bash bench/h2cpu.sh OTHER_SERVERY_BINARY | -workers}
GOGC2=${GOGC2:-150}
RUNS=${RUNS:-5}
REQUESTS=${REQUESTS:-300000}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/servery-h2cpu.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/servery" .
go build -o "$tmp/baseline" ./bench/baseline
mkdir "$tmp/site"
head -c 1024 /dev/zero | tr '\0' 'x' > "$tmp/site/1k.html"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
	-subj /CN=127.0.0.1 -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null

# cpu NAME PORT ARGV...: one run; prints NAME, microseconds and context
# switches per request, and the resident MiB of the server's processes.
cpu() {
	local name=$1 port=$2 pid before after ticks out
	shift 2
	taskset -c 0 "$@" >"$tmp/$name.log" 2>&1 &
	pid=$!
	for _ in $(seq 200); do
		curl -sk -o /dev/null "https://127.0.0.1:$port/1k.html" && break
		sleep 0.05
	done
	taskset -c 1 h2load -t1 -c64 -m10 -n 50000 "https://127.0.0.1:$port/1k.html" >/dev/null
	read -ra before < <(group_counts "$pid")
	out=$(taskset -c 1 h2load -t1 -c64 -m10 -n "$REQUESTS" "https://127.0.0.1:$port/1k.html") || true
	grep -q "$REQUESTS succeeded, 0 failed, 0 errored" <<<"$out" || echo "$name: some requests failed" >&2
	read -ra after < <(group_counts "$pid")
	kill -TERM "$pid"
	wait "$pid" || true
	ticks=$(getconf CLK_TCK)
	awk -v n="$name" -v t=$((after[0] - before[0])) -v cs=$((after[1] - before[1])) -v kb="${after[2]}" \
		-v hz="$ticks" -v r="$REQUESTS" \
		'BEGIN { printf "%s %.2f us  %.4f switches  %.1f MiB\n", n, t / hz * 1e6 / r, cs / r, kb / 1024 }'
}

# group_counts PID: the user+system clock ticks, context switches and
# resident KiB of PID and its children (the workers). A process that
# ends meanwhile counts 0, rather than ending the run.
group_counts() {
	local ticks=0 switches=0 kb=0 p task
	for p in $1 $(pgrep -P "$1" || true); do
		ticks=$((ticks + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
		kb=$((kb + $(awk '/^VmRSS:/ { kb = $2 } END { print kb + 0 }' "/proc/$p/status" 2>/dev/null || echo 0)))
		for task in /proc/"$p"/task/*; do
			switches=$((switches + $(awk '/ctxt_switches:/ { s += $2 } END { print s + 0 }' "$task/status" 2>/dev/null || echo 0)))
		done
	done
	echo "$ticks $switches $kb"
}

tls=(-tls-cert "$tmp/cert.pem" -tls-key "$tmp/key.pem")
site=(-dir "$tmp/site")
if [ "$other" = -workers ]; then
	names=(w1 w2 "w2-gogc$GOGC2")
else
	names=(this other bare)
fi
for run in $(seq "$RUNS"); do
	if [ "$other" = -workers ]; then
		cpu w1 18491 "$tmp/servery" -workers 1 "${site[@]}" -addr 127.0.0.1:18491 "${tls[@]}"
		cpu w2 18492 "$tmp/servery" -workers 2 "${site[@]}" -addr 127.0.0.1:18492 "${tls[@]}"
		cpu "w2-gogc$GOGC2" 18493 env GOGC="$GOGC2" "$tmp/servery" -workers 2 "${site[@]}" -addr 127.0.0.1:18493 "${tls[@]}"
	else
		cpu this 18491 "$tmp/servery" -workers 1 "${site[@]}" -addr 127.0.0.1:18491 "${tls[@]}"
		cpu other 18492 "$other" -workers 1 "${site[@]}" -addr 127.0.0.1:18492 "${tls[@]}"
		cpu bare 18493 "$tmp/baseline" baretls 127.0.0.1:18493 "$tmp/cert.pem" "$tmp/key.pem" "$tmp/site/1k.html"
	fi
done | tee "$tmp/runs"
echo "median server CPU per HTTP/2 request (us), $RUNS runs of $REQUESTS:"
for name in "${names[@]}"; do
	awk -v n="$name" '$1 == n { print $2 }' "$tmp/runs" | sort -n |
		awk -v n="$name" '{ v[NR] = $1 } END { printf "  %-11s %.2f\n", n, (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
done
