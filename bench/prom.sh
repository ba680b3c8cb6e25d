#!/usr/bin/env bash
# bench/prom.sh: a real Prometheus scrapes servery's /metrics every second
# for about 35 s while wrk loads it, one slot's worker is killed six times
# in a row (and respawned after a growing backoff),
# workers recycle (-max-worker-age) and a reload replaces the generation.
# Then it asks Prometheus's HTTP API whether any counter reset and how the
# serving-workers gauge moved, and prints the answers as a Markdown table.
#
#   bash bench/prom.sh            (under a minute; installs prometheus and wrk with apt-get)
#
# Everything listens on 127.0.0.1; the EXIT trap ends every process it
# started, by process group.
set -Eeuo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PORT=${PORT:-18380} STATUS=${STATUS:-18381} PROM=${PROM:-18390}
T=$(mktemp -d "${TMPDIR:-/tmp}/servery-prom.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done
	rm -rf "$T"
}
trap cleanup EXIT
say() { printf '[prom %s] %s\n' "$(date +%T)" "$*" >&2; }

need=()
command -v prometheus >/dev/null || need+=(prometheus)
command -v wrk >/dev/null || need+=(wrk)
command -v curl >/dev/null || need+=(curl)
if ((${#need[@]})); then
	sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
	$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

(cd "$REPO" && go build -o "$T/servery" .)
mkdir -p "$T/site" "$T/tsdb"
head -c 1024 /dev/zero | tr '\0' x >"$T/site/index.html"
cat >"$T/prometheus.yml" <<EOF
global: {scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s}
scrape_configs:
  - job_name: servery
    static_configs: [{targets: ['127.0.0.1:$STATUS']}]
EOF

setsid "$T/servery" -workers 2 -dir "$T/site" -addr "127.0.0.1:$PORT" -status-addr "127.0.0.1:$STATUS" \
	-max-worker-age 12s -max-restarts 10 2>"$T/servery.log" &
SRV=$!; pids+=("$SRV")
setsid prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
	--web.listen-address="127.0.0.1:$PROM" 2>"$T/prometheus.log" &
pids+=($!)
for _ in $(seq 100); do curl -sf "127.0.0.1:$PROM/-/ready" >/dev/null && curl -sf "127.0.0.1:$STATUS/readyz" >/dev/null && break; sleep 0.1; done
curl -sf "127.0.0.1:$STATUS/readyz" >/dev/null || { cat "$T/servery.log" >&2; exit 1; }
began=$(date +%s)

say "load for 35 s: a crash loop in one slot from 8 s, recycles from 12 s, reload at about 23 s"
setsid wrk -t1 -c8 -d35s "http://127.0.0.1:$PORT/" >"$T/wrk.txt" &
WRK=$!; pids+=("$WRK")
sleep 8
# A crash loop in slot 0: each replacement is killed as soon as it starts,
# six times, so the backoff (0, then 100 ms doubling) grows past a scrape
# interval and the dip shows in a 1 s scrape; -max-restarts 10 keeps the
# service alive through it. A single kill is healed in tens of
# milliseconds, between two scrapes.
started() { grep -c 'msg="worker started" generation=1 worker=0 ' "$T/servery.log" || true; }
for k in 1 2 3 4 5 6; do
	n=$(started)
	victim=$(grep -o 'msg="worker started" generation=1 worker=0 pid=[0-9]*' "$T/servery.log" | tail -1 | sed 's/.*pid=//')
	say "kill -9 worker 0, pid $victim ($k of 6)"
	kill -KILL "$victim" 2>/dev/null || true
	for _ in $(seq 500); do [ "$(started)" -gt "$n" ] && break; sleep 0.01; done
done
sleep 10
say "reload (SIGHUP)"
kill -HUP "$SRV"
wait "$WRK" || true
sleep 3 # two more scrapes after the load

q() { # PROMQL -> the first result's value, or "none"
	curl -sf "127.0.0.1:$PROM/api/v1/query" --data-urlencode "query=$1" |
		python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "none")'
}
win="$(($(date +%s) - began + 5))s"
served=$(awk '/requests in/ {print $1}' "$T/wrk.txt")
echo "| query (window $win, scraped every 1 s) | result |"
echo "| --- | --- |"
for query in \
	"sum(resets(servery_requests_total[$win]))" \
	"sum(resets(servery_connections_total[$win]))" \
	"min_over_time(servery_workers{state=\"serving\"}[$win])" \
	"max_over_time(servery_workers{state=\"serving\"}[$win])" \
	"max_over_time(servery_workers{state=\"starting\"}[$win])" \
	"servery_workers{state=\"serving\"}" \
	"max_over_time(sum(rate(servery_requests_total[3s]))[$win:1s])" \
	"sum(servery_requests_total)" \
	"servery_worker_respawns_total" \
	"sum(servery_worker_recycles_total)" \
	"servery_reloads_total{result=\"ok\"}" \
	"sum(servery_worker_exits_total)" \
	"servery_generation"; do
	printf '| `%s` | %s |\n' "$query" "$(q "$query")"
done
echo
echo "wrk: $served requests; $(grep -c 'msg="worker recycled"' "$T/servery.log") recycles, $(grep -c 'msg="worker respawned"' "$T/servery.log") respawns, $(grep -c 'msg=reloaded' "$T/servery.log") reloads in the log"
kill -TERM "$SRV"; wait "$SRV" || true
kill -TERM -- "-${pids[1]}" 2>/dev/null || true; sleep 1
