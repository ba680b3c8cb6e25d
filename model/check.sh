#!/usr/bin/env bash
# model/check.sh -- model-check model/lifecycle.pml, model/reload.pml and
# model/heal.pml with spin.
#
# lifecycle.pml (one generation): for N = 2 and N = 3 workers it runs
# exhaustive searches (no bitstate, no hash compaction):
#   safety+deadlock  assertions and invalid end states
#   no_cycles        the state graph has no cycle at all, so every run ends
#                    in a state where nothing can move (the model's
#                    "Scheduling" note rests on this)
#   ltl <name>       each ltl formula of the model, on its own (-N name)
# Then it breaks a copy of the model on purpose (the parent commits before
# the prepared quorum) and requires spin to report property 1 violated.
#
# reload.pml (the lifecycle loop over the sequence of generations, N = 2):
# the same kinds of search in three configurations (see reload_configs
# below), then five broken copies -- the serving generation retired as the
# new one starts, a reload that does not wait for a stopping generation,
# SIGHUPs that do not coalesce, a loss reported after a promotion dropped,
# a generation's stop that ends before its loss is reported -- each of
# which spin must catch by its assertion or its ltl formula.
#
# heal.pml (the serving generation heals: respawn, backoff, restart
# budget, recycle, hung workers and stop, N = 2 slots): a safety search in
# each of five configurations (see heal_configs below) and a no_cycles
# search in one; then six broken copies, each of which breaks one of its
# properties (P1-P6), and four "as-is" copies, each of which puts back what heal.go
# or slot.go did before the defects the model found were fixed (FIX A1,
# A2, B, C in heal.pml). spin must catch every one by its property's assertion. This
# section runs after the others, and its time is reported on its own.
#
# Any error, counterexample or incomplete search fails the script. Files
# pan writes stay in a temporary directory. JOBS (default 2) searches run
# at once.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
model="$here/lifecycle.pml"
reload_model="$here/reload.pml"
# reload.pml's configurations: name, spin -D flags, and its searches
# (safety, no_cycles, or an ltl name). A: two reloads, so one waits for a
# retiring generation, with a faulty worker; B: one reload, a faulty
# worker and the operator's stop at any moment; C: two reloads and the
# parent's death at any moment. Every configuration has the assertions
# (R1-R7) in its safety search; no_cycles runs once, on B, since every
# loop of the model is bounded the same way in each.
reload_configs=(
	"A|-DHUPS=2 -DFAULTY=1|safety lost_ends"
	"B|-DHUPS=1 -DFAULTY=1 -DSTOP|safety no_cycles no_early_accept stop_ends lost_ends"
	"C|-DHUPS=2 -DFAULTY=0 -DDEATH|safety orphans_end"
)
reload_safety_ltl="no_early_accept"
heal_model="$here/heal.pml"
# heal.pml's configurations: name, spin -D flags, and its searches. The
# faults a run may have (LOSSES workers lost after ready, FAILS
# replacements failing before prepared, RECYCLES recycle requests), the
# restart budget (MAXR), and the operator's stop at any moment (OPSTOP).
# A: a recycle whose old or new worker is lost, and another loss; B:
# recycles queued, one at a time, failing and retried, a loss, past the
# budget; C: the stop at any moment of a respawn or a recycle; D:
# respawns, their failures and backoff, past the budget, and the stop at
# any moment. no_cycles runs on B, whose recycle retries and respawns
# after failures are the model's longest loops.
heal_configs=(
	"A|-DLOSSES=2 -DFAILS=0 -DRECYCLES=1 -DMAXR=2|safety"
	"B|-DLOSSES=1 -DFAILS=1 -DRECYCLES=2 -DMAXR=1|safety no_cycles"
	"C|-DOPSTOP -DLOSSES=1 -DFAILS=0 -DRECYCLES=1 -DMAXR=2|safety"
	"D|-DOPSTOP -DLOSSES=2 -DFAILS=1 -DRECYCLES=0 -DMAXR=1|safety"
	"E|-DLOSSES=1 -DHANGS=1 -DFAILS=0 -DRECYCLES=1 -DMAXR=1|safety"
)
depth=100000        # pan -m; the searches reach depth ~260
safety_ltl="no_early_accept start_ok_all_ready"   # [] p: a safety search suffices
liveness_ltl="start_returns stop_ends orphans_end lost_worker_stops"
jobs=${JOBS:-2}
cc=${CC:-cc}

if ! command -v spin >/dev/null 2>&1; then
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
	echo "spin not found; installing it with apt-get"
	$sudo apt-get update
	$sudo apt-get install -y spin
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/lifecycle-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(date +%s)

# reports LOG REGEX MARKER: whether a line of LOG matches REGEX and
# contains MARKER, as written. One awk, not grep into grep -q: under
# pipefail a grep -q that stops early can fail the pipe (SIGPIPE).
reports() {
	awk -v re="$2" -v m="$3" '$0 ~ re && index($0, m) { found = 1 } END { exit !found }' "$1"
}

# bg DIR LOG CMD...: run CMD in DIR with its output in LOG, at most $jobs at once
bg() {
	local dir=$1 log=$2
	shift 2
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
	( cd "$dir" && "$@" >"$log" 2>&1 ) &
}

# ---------------------------------------------------------------- build
broken_from='pending = N;  /\* the prepared quorum: one from every worker \*/'
broken_to='pending = 0;  /* BROKEN: commit before the prepared quorum */'
if [ "$(grep -c "$broken_from" "$model")" -ne 1 ]; then
	echo "FAIL  the quorum line the broken variant changes is not in the model"
	exit 1
fi
b="$work/broken"
mkdir -p "$b/claim"
sed "s|$broken_from|$broken_to|" "$model" >"$b/early.pml"
# the same, less the worker's assertion: the ltl claim alone must catch it
sed 's|assert(nprepared == N);|skip; /* assertion removed */|' "$b/early.pml" >"$b/claim/early.pml"
if cmp -s "$b/early.pml" "$b/claim/early.pml"; then
	echo "FAIL  the broken variant: the property-1 assertion to remove is not in the model"
	exit 1
fi

for n in 2 3; do
	mkdir -p "$work/n$n"
	cp "$model" "$work/n$n/lifecycle.pml"
	(cd "$work/n$n" && spin -a -DN="$n" lifecycle.pml >spin.out)
done
(cd "$b" && spin -a -DN=2 early.pml >spin.out)
(cd "$b/claim" && spin -a -DN=2 early.pml >spin.out)

# reload.pml: each configuration, and the broken copies. break_reload
# NAME FROM TO writes the copy with the one occurrence of FROM replaced.
for c in "${reload_configs[@]}"; do
	IFS='|' read -r name defs _ <<<"$c"
	mkdir -p "$work/r$name"
	cp "$reload_model" "$work/r$name/reload.pml"
	(cd "$work/r$name" && spin -a $defs reload.pml >spin.out)
done
break_reload() {
	local d="$work/rb-$1"
	local claim=${5:-}
	mkdir -p "$d"
	if ! python3 - "$reload_model" "$d/reload.pml" "$2" "$3" <<'PY'
import sys
src, dst, old, new = sys.argv[1:]
s = open(src).read()
if s.count(old) != 1:
    sys.exit("the line to break occurs %d times" % s.count(old))
open(dst, "w").write(s.replace(old, new))
PY
	then
		echo "FAIL  reload.pml: the broken variant $1 does not apply"
		exit 1
	fi
	(cd "$d" && spin -a $4 reload.pml >spin.out)
	printf %s "$claim" >"$d/claim"
}
# the serving generation retired as the next one starts: R1
break_reload early '		starting = ngens; ngens++;                /* begin */' \
	'		starting = ngens; ngens++; stop(serving);  /* BROKEN */' "-DHUPS=1 -DFAULTY=0"
# a reload that does not wait for a generation still stopping: R4
break_reload nowait '	:: reload_due > 0 && !ending && starting == NONE && nstopping == 0 ->' \
	'	:: reload_due > 0 && !ending && starting == NONE ->' "-DHUPS=2 -DFAULTY=0"
# every SIGHUP queued, none coalesced (three, so two queue behind one): R6
break_reload nocoalesce '					reload_due = 1;                        /* coalesced */' \
	'					reload_due++;' "-DHUPS=3 -DFAULTY=0"
# a loss that reaches run after a promotion retired its generation,
# dropped: R7, by its ltl formula
break_reload droplost '					:: g == serving || g == retiring -> svc_err = true; end()' \
	'					:: g == serving -> svc_err = true; end()' "-DHUPS=2 -DFAULTY=1" lost_ends
# a generation's stop that ends before its loss is reported: the loss
# then reaches run after the generation is gone, and is dropped: R7
break_reload nowaitreport '		atomic { nended[s] == nspawned[s] && !g_reporting[s] -> g_done[s] = true };' \
	'		atomic { nended[s] == nspawned[s] -> g_done[s] = true };' "-DHUPS=2 -DFAULTY=1" lost_ends

for n in 2 3; do
	bg "$work/n$n" cc_safety.log $cc -O2 -w -DSAFETY -DNOCLAIM -o pan_safety pan.c
	bg "$work/n$n" cc_np.log $cc -O2 -w -DNP -DNOCLAIM -o pan_np pan.c
	bg "$work/n$n" cc_claim_safety.log $cc -O2 -w -DSAFETY -o pan_claim_safety pan.c
	bg "$work/n$n" cc_claim.log $cc -O2 -w -o pan_claim pan.c
done
bg "$b" cc.log $cc -O2 -w -DSAFETY -DNOCLAIM -o pan pan.c
bg "$b/claim" cc.log $cc -O2 -w -DSAFETY -o pan pan.c
for c in "${reload_configs[@]}"; do
	IFS='|' read -r name _ _ <<<"$c"
	d="$work/r$name"
	bg "$d" cc_safety.log $cc -O2 -w -DSAFETY -DNOCLAIM -o pan_safety pan.c
	bg "$d" cc_np.log $cc -O2 -w -DNP -DNOCLAIM -o pan_np pan.c
	bg "$d" cc_claim_safety.log $cc -O2 -w -DSAFETY -o pan_claim_safety pan.c
	bg "$d" cc_claim.log $cc -O2 -w -o pan_claim pan.c
done
for v in early nowait nocoalesce droplost nowaitreport; do
	if [ -s "$work/rb-$v/claim" ]; then
		bg "$work/rb-$v" cc.log $cc -O2 -w -o pan pan.c
	else
		bg "$work/rb-$v" cc.log $cc -O2 -w -DSAFETY -DNOCLAIM -o pan pan.c
	fi
done
wait
for c in "${reload_configs[@]}"; do
	IFS='|' read -r name _ _ <<<"$c"
	for f in pan_safety pan_np pan_claim_safety pan_claim; do
		if [ ! -x "$work/r$name/$f" ]; then
			echo "FAIL  could not compile reload.pml ($name) $f:"
			cat "$work/r$name"/cc*.log
			exit 1
		fi
	done
done
for f in "$work"/n2/pan_safety "$work"/n2/pan_np "$work"/n2/pan_claim_safety "$work"/n2/pan_claim \
	"$work"/n3/pan_safety "$work"/n3/pan_np "$work"/n3/pan_claim_safety "$work"/n3/pan_claim \
	"$b/pan" "$b/claim/pan"; do
	if [ ! -x "$f" ]; then
		echo "FAIL  could not compile $f:"
		cat "$(dirname "$f")"/cc*.log
		exit 1
	fi
done

# --------------------------------------------------------------- search
checks=()   # "dir label log" in report order
# reload.pml's searches first: the longest of all are among them.
for c in "${reload_configs[@]}"; do
	IFS='|' read -r name _ searches <<<"$c"
	d="$work/r$name"
	for p in $searches; do
		case $p in
		safety) bg "$d" safety.log ./pan_safety -m$depth ;;
		no_cycles) bg "$d" no_cycles.log ./pan_np -l -m$depth ;;
		*)
			if [[ " $reload_safety_ltl " == *" $p "* ]]; then
				bg "$d" "$p.log" ./pan_claim_safety -m$depth -N "$p"
			else
				bg "$d" "$p.log" ./pan_claim -a -m$depth -N "$p"
			fi
			;;
		esac
	done
done
for v in early nowait nocoalesce droplost nowaitreport; do
	if [ -s "$work/rb-$v/claim" ]; then
		bg "$work/rb-$v" pan.log ./pan -a -m$depth -N "$(cat "$work/rb-$v/claim")"
	else
		bg "$work/rb-$v" pan.log ./pan -m$depth
	fi
done
for n in 3 2; do            # the big ones first, to keep both cores busy
	d="$work/n$n"
	bg "$d" no_cycles.log ./pan_np -l -m$depth
	bg "$d" safety.log ./pan_safety -m$depth
	for p in $liveness_ltl; do bg "$d" "$p.log" ./pan_claim -a -m$depth -N "$p"; done
	for p in $safety_ltl; do bg "$d" "$p.log" ./pan_claim_safety -m$depth -N "$p"; done
done
bg "$b" pan.log ./pan -m$depth
bg "$b/claim" pan.log ./pan -m$depth -N no_early_accept
wait

# ------------------------------------------------------------- heal.pml
# Its own phase: build, compile and search, timed.
heal_start=$(date +%s)
for c in "${heal_configs[@]}"; do
	IFS='|' read -r name defs _ <<<"$c"
	mkdir -p "$work/h$name"
	cp "$heal_model" "$work/h$name/heal.pml"
	(cd "$work/h$name" && spin -a $defs heal.pml >spin.out)
done
# break_heal NAME FROM TO DEFS writes the copy with the one occurrence of
# FROM replaced, and spin's analyser for it with DEFS.
heal_broken=()
break_heal() {
	local d="$work/hb-$1"
	mkdir -p "$d"
	if ! python3 - "$heal_model" "$d/heal.pml" "$2" "$3" <<'PY'
import sys
src, dst, old, new = sys.argv[1:]
s = open(src).read()
if s.count(old) != 1:
    sys.exit("the line to break occurs %d times" % s.count(old))
open(dst, "w").write(s.replace(old, new))
PY
	then
		echo "FAIL  heal.pml: the broken variant $1 does not apply"
		exit 1
	fi
	(cd "$d" && spin -a $4 heal.pml >spin.out)
	heal_broken+=("$1")
}
# P1: the barrier writes the commit with the config, before prepared
break_heal early '		run Worker(w);' \
	'		run Worker(w); commit[w] = true;  /* BROKEN */' "-DLOSSES=1 -DFAILS=0 -DRECYCLES=0"
# P2: a respawn that does not wait for the lost worker's exit (a worker
# lost by a bad line may still run)
break_heal nowait '		:: !alive[old] -> skip                       /* <-old.exited */' \
	'		:: true -> skip                              /* BROKEN */' "-DLOSSES=2 -DFAILS=0 -DRECYCLES=0"
# P3: the stop does not take spawnMu
break_heal nospawnmu '	atomic { !spawn_mu -> skip };' \
	'	skip;                          /* BROKEN */' "-DOPSTOP -DLOSSES=1 -DFAILS=0 -DRECYCLES=0"
# P4: the budget check off by one
break_heal offbyone '#define OVER_BUDGET    (losses > MAXR)' \
	'#define OVER_BUDGET    (losses > MAXR + 1)  /* BROKEN */' "-DLOSSES=2 -DFAILS=0 -DRECYCLES=0 -DMAXR=1"
# P5: a loss while the slot is busy, ignored (not kept in s.lost)
break_heal droplost '					:: busy[s] -> lost[s] = lost[s] | (1 << w)        /* s.lost */' \
	'					:: busy[s] -> skip                           /* BROKEN */' "-DLOSSES=2 -DFAILS=0 -DRECYCLES=0"
# as-is A1: a successful replacement ignores a loss of its new worker
# taken while the slot was busy (Go: onReplaced ignores or clears s.lost)
break_heal asis-A1 '					:: WAS_LOST(s, w) -> lost[s] = 0; respawnAfter(s, true)  /* FIX A1 */' \
	'					:: false -> skip                         /* AS IS */' "-DLOSSES=2 -DFAILS=0 -DRECYCLES=0"
# as-is A2: a loss of a worker that already left its slot respawns the
# slot (Go: onWorkerLost does not know which worker the slot has)
break_heal asis-A2 '					:: !busy[s] && w != known[s] -> skip  /* FIX A2: it had left its slot */' \
	'					:: !busy[s] && w != known[s] -> respawnAfter(s, true)  /* AS IS */' "-DLOSSES=1 -DFAILS=0 -DRECYCLES=1"
# as-is B: a slot is not busy while its respawn backs off
break_heal asis-B '	:: true -> busy[s] = true; t_respawn[s] = true  /* FIX B: busy while it backs off */' \
	'	:: true -> t_respawn[s] = true                  /* AS IS */' "-DLOSSES=1 -DFAILS=1 -DRECYCLES=1"
# as-is C: a recycle ends as soon as it retired the old worker
break_heal asis-C '		(!alive[old] || g_stopping);      /* FIX C: wait for it, as abandon does */' \
	'		skip;                             /* AS IS */' "-DLOSSES=0 -DFAILS=0 -DRECYCLES=2"
# P6: a hang kill counted against the budget, as a crash is
break_heal hungcount '				:: ok -> skip                     /* FIX H: a hang kill spends no budget */' \
	'				:: ok -> losses++                 /* BROKEN */' "-DLOSSES=0 -DHANGS=2 -DFAILS=0 -DRECYCLES=0 -DMAXR=1"

for c in "${heal_configs[@]}"; do
	IFS='|' read -r name _ searches <<<"$c"
	d="$work/h$name"
	bg "$d" cc_safety.log $cc -O2 -w -DSAFETY -DNOCLAIM -o pan_safety pan.c
	if [[ " $searches " == *" no_cycles "* ]]; then
		bg "$d" cc_np.log $cc -O2 -w -DNP -DNOCLAIM -o pan_np pan.c
	fi
done
for v in "${heal_broken[@]}"; do
	bg "$work/hb-$v" cc.log $cc -O2 -w -DSAFETY -DNOCLAIM -o pan pan.c
done
wait
for c in "${heal_configs[@]}"; do
	IFS='|' read -r name _ searches <<<"$c"
	for p in $searches; do
		f=pan_safety
		[ "$p" = no_cycles ] && f=pan_np
		if [ ! -x "$work/h$name/$f" ]; then
			echo "FAIL  could not compile heal.pml ($name) $f:"
			cat "$work/h$name"/cc*.log
			exit 1
		fi
	done
done
for v in "${heal_broken[@]}"; do
	if [ ! -x "$work/hb-$v/pan" ]; then
		echo "FAIL  could not compile heal.pml broken copy $v:"
		cat "$work/hb-$v/cc.log"
		exit 1
	fi
done
for c in "${heal_configs[@]}"; do       # no_cycles, the longest, first
	IFS='|' read -r name _ searches <<<"$c"
	if [[ " $searches " == *" no_cycles "* ]]; then
		bg "$work/h$name" no_cycles.log ./pan_np -l -m$depth
	fi
done
for c in "${heal_configs[@]}"; do
	IFS='|' read -r name _ _ <<<"$c"
	bg "$work/h$name" safety.log ./pan_safety -m$depth
done
for v in "${heal_broken[@]}"; do
	bg "$work/hb-$v" pan.log ./pan -m$depth
done
wait
heal_secs=$(($(date +%s) - heal_start))
for n in 2 3; do
	checks+=("n$n|N=$n safety+deadlock|safety.log" "n$n|N=$n no cycles|no_cycles.log")
	for p in $safety_ltl $liveness_ltl; do checks+=("n$n|N=$n ltl $p|$p.log"); done
done
for c in "${reload_configs[@]}"; do
	IFS='|' read -r name _ searches <<<"$c"
	for p in $searches; do
		case $p in
		safety) checks+=("r$name|reload $name safety+deadlock|safety.log") ;;
		no_cycles) checks+=("r$name|reload $name no cycles|no_cycles.log") ;;
		*) checks+=("r$name|reload $name ltl $p|$p.log") ;;
		esac
	done
done
for c in "${heal_configs[@]}"; do
	IFS='|' read -r name _ searches <<<"$c"
	for p in $searches; do
		case $p in
		safety) checks+=("h$name|heal $name safety+deadlock|safety.log") ;;
		no_cycles) checks+=("h$name|heal $name no cycles|no_cycles.log") ;;
		esac
	done
done

# --------------------------------------------------------------- report
failed=0
for c in "${checks[@]}"; do
	IFS='|' read -r dir label logname <<<"$c"
	log="$work/$dir/$logname"
	problems=""
	grep -Eq 'errors: 0$' "$log" || problems+=" no 'errors: 0'"
	grep -Eq 'errors: [1-9]' "$log" && problems+=" errors reported"
	# pan:1: assertion violated | acceptance cycle | invalid end state | ...
	if grep -Eq '^pan:[0-9]+:' "$log"; then problems+=" $(grep -Em1 '^pan:[0-9]+:' "$log")"; fi
	if grep -Eqi 'search depth too small|search not completed|out of memory' "$log"; then
		problems+=" incomplete search"
	fi
	states=$(awk '/states, stored/ {print $1; exit}' "$log")
	reached=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/;T;p;q' "$log")
	secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\) seconds.*/\1/;T;p;q' "$log")
	if [ -z "$problems" ]; then
		printf 'ok    %-34s states %9s  depth %3s  %6ss\n' "$label" "${states:-?}" "${reached:-?}" "${secs:-?}"
	else
		printf 'FAIL  %-34s%s\n' "$label" "$problems"
		sed -n '1,40s/^/    | /p' "$log"
		failed=1
	fi
done

caught=1
if grep -Eq 'errors: [1-9]' "$b/pan.log" && grep -Eq 'assertion violated \(nprepared==2\)' "$b/pan.log"; then
	printf 'ok    %-28s spin reports %s\n' "broken: assertion" \
		"$(grep -Eo 'assertion violated \(nprepared==2\) \(at depth [0-9]+\)' "$b/pan.log")"
else
	printf 'FAIL  %-28s the early commit went unnoticed\n' "broken: assertion"
	caught=0
fi
if grep -Eq 'errors: [1-9]' "$b/claim/pan.log" \
	&& grep -Eq 'assertion violated +!\( *!\(\( *!\(any_accepting\)\|\|\(nprepared==2\)\)\)\)' "$b/claim/pan.log"; then
	printf 'ok    %-28s spin reports ltl no_early_accept violated (%s)\n' "broken: ltl" \
		"$(grep -Eo -m1 'at depth [0-9]+' "$b/claim/pan.log")"
else
	printf 'FAIL  %-28s the early commit went unnoticed\n' "broken: ltl"
	caught=0
fi
if [ "$caught" -eq 1 ]; then
	echo "      the counterexample: commit goes out, a worker accepts, nprepared < N"
	(cd "$b" && spin -t -p -DN=2 early.pml 2>&1) \
		| grep -E 'run Worker|stdin_sent\[i\] = |nprepared = \(|q_bad = \(|assert\(' \
		| awk '{$1=$1; print "      | " substr($0, 1, 110)}' || true
else
	failed=1
fi

# reload.pml's broken copies: each must fail the assertion of its
# property, or (droplost) its ltl formula, with an acceptance cycle.
for v in "early|R1|successor|the serving generation retired before the new one was ready" \
	"nowait|R4|nspawned|a reload that did not wait for a stopping generation" \
	"nocoalesce|R6|hups_since|SIGHUPs that did not coalesce" \
	"droplost|R7|acceptance cycle|a serving worker's loss dropped after a promotion" \
	"nowaitreport|R7|acceptance cycle|a stop that ends before its loss is reported"; do
	IFS='|' read -r name prop marker what <<<"$v"
	log="$work/rb-$name/pan.log"
	if grep -Eq 'errors: [1-9]' "$log" && reports "$log" '^pan:1: (assertion violated|acceptance cycle)' "$marker"; then
		printf 'ok    %-34s spin reports %s violated (%s)\n' "broken: reload $name" "$prop" \
			"$(grep -Eo -m1 'at depth [0-9]+' "$log")"
	else
		printf 'FAIL  %-34s %s went unnoticed\n' "broken: reload $name" "$what"
		sed -n '1,20s/^/    | /p' "$log"
		failed=1
	fi
done

# heal.pml's broken and as-is copies: each must fail the assertion of
# its property (the text spin prints contains the marker).
for v in "early|P1|saw_prep[w]|a commit written before the replacement's prepared" \
	"nowait|P2|(nalive<=2)|a respawn beside its lost worker, still running" \
	"nospawnmu|P3|(nalive==0)|a replacement spawned after the stop's snapshot (no spawnMu)" \
	"offbyone|P4|(losses<=1)|a respawn past the restart budget" \
	"droplost|P5|alive[cur[0]]|a loss while the slot was busy, dropped" \
	"asis-A1|P5|alive[cur[0]]|a replacement lost before its evReplaced, not replaced" \
	"asis-A2|P5|(nrepl==0)|a late loss respawning a slot whose worker serves" \
	"asis-B|P5|(nrepl==0)|a recycle begun during a respawn's backoff" \
	"asis-C|P2|(nalive<=2)|a recycle beside the previous recycle's draining worker" \
	"hungcount|P6|(failures>1)|hang kills spending the restart budget"; do
	IFS='|' read -r name prop marker what <<<"$v"
	log="$work/hb-$name/pan.log"
	if grep -Eq 'errors: [1-9]' "$log" && reports "$log" '^pan:1: assertion violated' "$marker"; then
		printf 'ok    %-34s spin reports %s violated (%s)\n' "broken: heal $name" "$prop" \
			"$(grep -Eo -m1 'at depth [0-9]+' "$log")"
	else
		printf 'FAIL  %-34s %s went unnoticed\n' "broken: heal $name" "$what"
		sed -n '1,20s/^/    | /p' "$log"
		failed=1
	fi
done

echo "heal.pml: ${heal_secs}s (build and search)"
echo "total $(($(date +%s) - start))s"
if [ "$failed" -ne 0 ]; then
	echo "model check FAILED"
	exit 1
fi
echo "model check passed"
