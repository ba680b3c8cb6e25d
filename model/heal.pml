/*
 * heal.pml -- a Promela model of a generation that heals: the serving
 * generation's slots, each with its current worker, and how servery
 * replaces a worker that is lost (a respawn) or that asks to be recycled,
 * backs a failing slot off, gives up past its restart budget, and stops.
 *
 * Source of truth: heal.go (onWorkerLost, overBudget, respawnAfter,
 * respawn, onRespawn, onRecycle, nextRecycle, onReplaced, replaceFailed,
 * servingSlots.end), slot.go (Supervisor.replace, spawnInto, install, abandon,
 * retire), lifecycle.go (Service.run, onLost, end, stop, onStopped) and
 * supervisor.go (follow, observe, stopWith, stop, escalate, release). Each
 * step carries a comment naming the Go function that performs it. Checked
 * by model/check.sh with spin, for N = 2 slots, in the configurations
 * listed there.
 *
 * The shape is reload.pml's: the Owner is the lifecycle loop (Service.run),
 * one process, and inbox is its channel, a rendezvous like Go's unbuffered
 * Service.inbox. Everything else (each worker's follow, each replacement,
 * each slot's timers, the generation's stop, the operator) is a process
 * that sends the Owner one event and goes on; the Owner handles one event
 * at a time, in one atomic step, as each on... method runs without
 * blocking.
 *
 * What this model leaves out, and where it is covered:
 *  - One generation only. It serves from the start (its Start, the barrier
 *    of N workers, is lifecycle.pml's), and no reload begins. "At most two
 *    generations live", a loss reported after a promotion, and a reload
 *    that cancels the old generation's respawns (promote: servingSlots.end) are
 *    reload.pml's to check or the tests'.
 *  - A worker told to leave (its stdin closed by retire, escalate or
 *    release) exits at some later step, as lifecycle.pml shows the drain,
 *    SIGTERM and SIGKILL deadlines make it. So there are no signals, no
 *    survivors and no second signal (evHurry) here. A worker told to
 *    leave still counts as live until it exits. A worker the parent finds
 *    hung (hang.go) is a loss like a crash, reported with ok set (its
 *    kill named errHung): HANGS of them, which the Owner does not count
 *    against the budget (FIX H). One stuck in the kernel past its kill
 *    (leftBehind) is the tests'.
 *  - Time is ordering only. The restart window is longer than any run
 *    (every loss counts against the budget); whether a loss came within
 *    Steady of the worker's ready is a choice (respawn at once, or after a
 *    backoff); a timer fires at any later step; no replacement's barrier
 *    times out (it fails only by a fault, below, or by the stop).
 *  - Faults, each bounded by a configuration: LOSSES workers lost after
 *    ready, by a bad line or by their exit: a lost worker may still run
 *    when its loss is seen, and leaves once observe's retire has told it
 *    to (a crash is the run in which it leaves at once); FAILS
 *    replacements whose App's start fails before prepared; RECYCLES
 *    requests to be recycled, at most one per worker.
 *  - A worker's event is seen (observe decides, under mu, by stopping and
 *    gone) in the step that makes it, and reported to the Owner in a step
 *    of its own: the Owner may take other events between, and a lost
 *    worker may exit before or after its report is taken. Seeing an event
 *    later, as Go may, is to observe the same as making it later. While
 *    its recycle request is on its way to the Owner a worker does
 *    nothing; in Go it may die meanwhile, but its follow sees that only
 *    after the request, as here. Start's workers share one monitor in Go,
 *    so their reports cannot overlap; here each worker has its own follow,
 *    which allows more orders.
 *  - Ticket keys (install's sendKeys) and the logs are not modelled.
 *
 * FIX A1, A2, B and C mark four defects this model found in the first
 * Go code (commit 5095b38), fixed since in heal.go and slot.go (commit
 * 3acd353): without each, properties 5 or 2 break. check.sh's "as-is"
 * copies each put one back as that first code had it, and spin must
 * report the property it breaks:
 *  A1 a replacement lost before the Owner took its evReplaced is
 *     replaced: the Owner keeps the workers (pids) lost while the slot
 *     was busy, and respawns if the new one is among them (Go:
 *     slotState.lostPIDs, onReplaced; it was one flag, ignored by a
 *     successful respawn);
 *  A2 a loss reported after its worker left its slot (a recycled worker
 *     whose report came after the recycle's evReplaced) respawns nothing,
 *     and a failed recycle respawns only if the slot's own worker was lost
 *     (Go: slotState.pid, onWorkerLost, replaceFailed);
 *  B  a slot whose respawn waits for its backoff is busy (Go:
 *     respawnAfter; before, nextRecycle could start a recycle there);
 *  C  a recycle ends only once its old worker has exited, as abandon
 *     waits for a failed replacement (Go: awaitRetired, onRetired; before,
 *     the next recycle spawned while the old worker still drained: N+2
 *     live). Its slot, though, is its new worker's from the install on
 *     (evReplaced), so a loss of the new worker while the old one drains
 *     is respawned at once; the recycle itself ends at evRetired.
 *  H  a hang kill, servery's own verdict, spends no budget (Go:
 *     onWorkerLost): property 6, the service ends in error only once the
 *     program's own failures (crashes, failed replacements) exceed it.
 */

#define N 2             /* slots (the model is written for 2)         */
#define MAXW 8          /* worker ids: Start's 0 and 1, then spawns   */
#define NONE 255

/* Configurations (model/check.sh runs each): the faults a run may have,
 * the restart budget, and whether the operator may stop servery (OPSTOP)
 * at any moment. */
#ifndef LOSSES
#define LOSSES 2        /* workers lost after ready                    */
#endif
#ifndef FAILS
#define FAILS 1         /* replacements failing before prepared        */
#endif
#ifndef RECYCLES
#define RECYCLES 0      /* recycle requests                            */
#endif
#ifndef MAXR
#define MAXR 2          /* healPolicy.MaxRestarts                      */
#endif
#ifndef HANGS
#define HANGS 0         /* workers found hung after ready, and killed  */
#endif

/* The Owner's channel (Service.inbox): event, slot, worker, ok, recycle.
 * The worker is its pid in Go: the workerError's of a loss, the
 * replacement's NewPID of evReplaced. */
mtype = { LOST, REPLACED, RETIRED, RECYCLE, RESPAWN, STOP_ASKED, STOPPED };
chan inbox = [0] of { mtype, byte, byte, bool, bool };

/* ------------------------------------------------------------ workers */

bool alive[MAXW];       /* spawned and not yet exited (reaped)                  */
bool spawned[MAXW];     /* in Supervisor.all                                     */
byte slot[MAXW];        /* workerProc.index: its slot                            */
byte stage[MAXW];       /* the lines it wrote: 1 prepared, 2 ready               */
bool told[MAXW];        /* its stdin closed: retire, escalate or release         */
bool commit[MAXW];      /* the commit line written to it                         */
byte nw = N;            /* worker ids used                                       */
byte nalive = N;        /* live workers of the generation                        */

byte losses_left = LOSSES;
byte hangs_left = HANGS;
byte fails_left = FAILS;
byte recycles_left = RECYCLES;

/* ---------------------------------------------- the Supervisor's state */

byte cur[N];            /* s.procs: the worker in each slot                      */
bool gone[MAXW];        /* workerProc.gone: it left its slot                     */
bool watched[MAXW];     /* a watch reads its events (monitor, or replace's)      */
bool g_stopping;        /* s.stopping (and s.joins cancelled: the stop began)    */
bool spawn_mu;          /* s.spawnMu held                                        */
byte replacing;         /* s.replacing: replace calls past their spawn           */
byte reporting;         /* s.reporting: losses seen, not yet reported            */
bool g_done;            /* close(s.done)                                         */
byte snap;              /* the workers the stop's escalate saw: ids below snap   */

/* ------------------------------------------ the Owner's state (life) */

bool ending;            /* life.ending                                           */
bool h_cancel;          /* servingSlots.ctx cancelled (servingSlots.end)                   */
byte losses;            /* len(life.losses): within the window, all of them      */
byte nstopping;         /* len(life.stopping)                                    */
bool svc_done;          /* close(v.done)                                         */
bool svc_err;           /* v.err != nil                                          */
bool busy[N];           /* slotState.busy                                        */
byte lost[N];           /* slotState.lost, as the set of workers (pids) lost     */
                        /* while the slot was busy (FIX A1)                      */
byte known[N];          /* the slot's worker as the Owner knows it (FIX A2)      */
bool t_respawn[N];      /* a respawn's backoff timer runs (slotState.timer)      */
bool t_recycle[N];      /* a failed recycle's retry timer runs                   */
bool recycling;         /* servingSlots.recycling                                     */
byte q[N];              /* servingSlots.queued, in order                              */
byte nq;

/* --------------------------------------------------------------- ghosts */

bool saw_prep[MAXW];    /* its barrier took its prepared                         */
bool in_repl[N];        /* a replace runs for the slot                           */
byte nrepl;             /* replace calls running                                 */
byte failures;          /* the program's own failures seen: crashes, failed      */
                        /* replacements; not hang kills (property 6)             */

#define CANCELLED      (h_cancel || g_stopping)   /* replace's ctx: servingSlots.ctx, s.joins */
/* The worker exits (reap sends its exit event). What the model keeps of a
 * worker is cleared once it has exited, and nothing writes it after, so
 * runs that differ only in the past of exited workers meet again. */
#define EXIT(w)        alive[w] = false; nalive--; told[w] = false; gone[w] = false; \
                       stage[w] = 0; commit[w] = false; saw_prep[w] = false; watched[w] = false
#define SD(i)          ((i) >= snap || !alive[i])
#define SNAP_EXITED    (SD(0) && SD(1) && SD(2) && SD(3) && SD(4) && SD(5) && SD(6) && SD(7))
#define SERVES(s)      (alive[cur[s]] && !gone[cur[s]] && !told[cur[s]])
#define WAS_LOST(s, w) ((lost[s] >> (w)) & 1)

/* Supervisor.observe, of a loss (a bad line or the exit), where it is
 * seen, under mu: reported unless the stop began or the worker left its
 * slot; then retire(p), since it may still run; reporting.Add. */
#define OBSERVE_LOSS(w) \
	pass = !g_stopping && !gone[w]; \
	if \
	:: pass -> gone[w] = true; reporting++; told[w] = true \
	:: else -> skip \
	fi

/* observe: onLost, once; reporting.Done */
inline reportLoss(w) {
	if
	:: pass ->
		pass = false;
		if
		:: inbox ! LOST, slot[w], w, hung, false
		:: svc_done -> skip               /* send: the service has ended */
		fi;
		reporting--
	:: else -> skip
	fi
}

/* ============================================================== worker */

/* A worker, and (once it is ready and watched) the watch that observes
 * it: Supervisor.watch and observe for its events. A worker's event is
 * seen in the step that makes it; reporting it to the Owner (onLost:
 * evLost, onRecycle: evRecycle) is a step of its own, and the Owner may
 * take other events between. */
proctype Worker(byte w)
{
	bool ask, pass, hung;

	if
	:: stage[w] == 2 -> goto serve    /* one of Start's: ready as the model begins */
	:: else -> skip
	fi;
	/* prepare: read config, the App's start; runWorker: send prepared */
	if
	:: atomic { !told[w] -> stage[w] = 1 }
	:: atomic { fails_left > 0 -> fails_left--; EXIT(w); goto exited }
	                                  /* the App's start fails: failed, exit */
	:: atomic { told[w] -> EXIT(w); goto exited }      /* read config: EOF */
	fi;
	/* runWorker: awaitCommit; go srv.serve(ln) accepts; send ready.
	 * PROPERTY 1: a replacement accepts only after its commit, and the
	 * parent wrote that commit only after its barrier took this worker's
	 * prepared. */
	if
	:: atomic { commit[w] -> assert(commit[w] && saw_prep[w]); stage[w] = 2 }
	:: atomic { told[w] && !commit[w] -> EXIT(w); goto exited }
	                                  /* "stdin closed before commit" */
	fi;
serve:
	/* serveUntilDrain: serve until stdin ends, then drain, done, exit.
	 * Its faults and its recycle request are seen once it is watched. */
end_serve:
	do
	:: atomic { watched[w] && !ask && recycles_left > 0 ->
		recycles_left--; ask = true;      /* at its limit: send recycle */
		pass = !g_stopping && !gone[w] };  /* observe: the first recycle */
		if
		:: pass ->
			pass = false;
			if
			:: inbox ! RECYCLE, slot[w], w, true, false
			:: svc_done -> skip           /* send: the service has ended */
			fi
		:: else -> skip
		fi
	:: atomic { watched[w] && losses_left > 0 ->
		losses_left--; OBSERVE_LOSS(w) };  /* lost: a bad line, or its exit */
		goto seen_lost
	:: atomic { watched[w] && hangs_left > 0 ->
		hangs_left--; hung = true; OBSERVE_LOSS(w) };  /* found hung: SIGQUIT, SIGKILL, its exit */
		goto seen_lost
	:: atomic { told[w] -> EXIT(w); goto exited }      /* drainSignal: EOF */
	od;
seen_lost:
	/* It leaves once retired (a crash: at once), and observe's report
	 * reaches the Owner before or after that. */
	if
	:: atomic { told[w] -> EXIT(w) }; reportLoss(w)
	:: reportLoss(w); atomic { told[w] -> EXIT(w) }
	fi;
exited:
	ask = false; hung = false
}

/* ========================================= the generation's side (Go) */

/* Supervisor.replace, run by replaceIn's goroutine, which reports
 * evReplaced. */
proctype Replace(byte s; bool recycle)
{
	byte old, w = NONE;
	bool stop_seen, ok;

	atomic {
		/* PROPERTY 2, per slot: one replacement at a time in a slot. */
		assert(!in_repl[s]); in_repl[s] = true; nrepl++;
		old = cur[s]                      /* s.procs[slot], under mu */
	};
	/* a respawn first waits until the lost worker has been reaped */
	if
	:: recycle -> skip
	:: else ->
		if
		:: !alive[old] -> skip                       /* <-old.exited */
		:: CANCELLED -> goto failed                  /* <-ctx.Done() */
		fi
	fi;
	/* spawnInto: under spawnMu, refused once the stop began */
	atomic { !spawn_mu -> spawn_mu = true; stop_seen = g_stopping };
	if
	:: stop_seen -> spawn_mu = false; goto failed    /* errGenerationStopping */
	:: else -> skip
	fi;
	atomic {
		/* PROPERTY 2: at most N+1 live workers in the generation. */
		assert(nalive <= N);
		assert(nw < MAXW);                /* the model's bound, not a property */
		w = nw; nw++;
		alive[w] = true; spawned[w] = true; slot[w] = s; nalive++;  /* s.spawn; s.all = append */
		run Worker(w);
		replacing++;                      /* s.replacing.Add(1) */
		spawn_mu = false
	};
	/* barrier, for this one worker: sendBy(config) (at its spawn); await
	 * prepared, then sendBy(commit) */
	if
	:: atomic { stage[w] >= 1 -> saw_prep[w] = true; commit[w] = true }
	:: atomic { stage[w] == 0 && !alive[w] -> goto abandon }   /* failed, exit */
	:: CANCELLED -> goto abandon
	fi;
	/* barrier: await ready */
	if
	:: stage[w] == 2
	:: atomic { stage[w] < 2 && !alive[w] -> goto abandon }
	:: CANCELLED -> goto abandon
	fi;
	/* install, under mu: the slot's worker, unless the stop began; then
	 * go s.watch(p.events); a recycle then retires the old worker */
	atomic {
		if
		:: g_stopping -> goto abandon
		:: else ->
			gone[old] = alive[old]; cur[s] = w; watched[w] = true;
			if
			:: recycle -> told[old] = alive[old]   /* retire(old) */
			:: else -> skip
			fi
		fi
	};
	ok = true;
	goto done;
abandon:
	/* abandon: gone; unless the stop has it, retired and waited for */
	atomic {
		stop_seen = g_stopping;
		gone[w] = alive[w];
		told[w] = alive[w] && (told[w] || !stop_seen)   /* retire(p) */
	};
	if
	:: !stop_seen -> (!alive[w] || g_stopping)    /* <-p.exited, <-s.joins.Done() */
	:: else -> skip
	fi;
done:
	replacing--;                          /* defer s.replacing.Done() */
failed:
	atomic { in_repl[s] = false; nrepl--; stop_seen = false };
	if
	:: inbox ! REPLACED, s, w, ok, recycle
	:: svc_done -> skip                   /* send: the service has ended */
	fi;
	/* a recycle's old worker drains after replace returned: gone(old),
	 * then awaitRetired's evRetired, unless the healing ended */
	if
	:: ok && recycle ->
		(!alive[old] || g_stopping);      /* FIX C: wait for it, as abandon does */
		if
		:: inbox ! RETIRED, s, 0, true, true
		:: svc_done -> skip
		fi
	:: else -> skip
	fi;
	s = 0; w = 0; ok = false; recycle = false; old = 0
}

/* Supervisor.stop, begun by stopWith (g_stopping), then Service.stop's
 * goroutine: evStopped. */
proctype Stopper()
{
	byte i;

	/* cancelJoins (CANCELLED); spawnMu.Lock(); spawnMu.Unlock() */
	atomic { !spawn_mu -> skip };
	/* escalate: close every stdin in s.all (those that live) */
	d_step {
		snap = nw;
		for (i : 0 .. MAXW - 1) {
			if
			:: spawned[i] && alive[i] -> told[i] = true
			:: else -> skip
			fi
		}
	};
	SNAP_EXITED;                          /* waitReaped: every one of them */
	/* release: every stdin in s.all closed again */
	d_step {
		for (i : 0 .. MAXW - 1) {
			if
			:: spawned[i] && alive[i] -> told[i] = true
			:: else -> skip
			fi
		}
	};
	replacing == 0;                       /* s.replacing.Wait() */
	reporting == 0;                       /* s.reporting.Wait() */
	g_done = true;                        /* close(s.done) */
	if
	:: inbox ! STOPPED, 0, 0, true, false
	:: svc_done -> skip
	fi
}

/* Each slot's timers: time.AfterFunc(delay, send evRespawn / evRecycle).
 * A timer that fired sends even if stopped after (a stale event). */
proctype Timer(byte s)
{
end_timer:
	do
	:: atomic { t_respawn[s] -> t_respawn[s] = false };
		if
		:: inbox ! RESPAWN, s, 0, true, false
		:: svc_done -> skip
		fi
	:: atomic { t_recycle[s] -> t_recycle[s] = false };
		if
		:: inbox ! RECYCLE, s, 0, true, false
		:: svc_done -> skip
		fi
	od
}

/* ============================================== the Owner: Service.run */

/* Service.end: once; servingSlots.end (cancel replacements, stop timers, drop
 * the queue); stop the serving generation (beginStop: stopWith). Go
 * stops only each slot's latest timer (s.timer); one it overwrote fires
 * into a loop that has begun to end, and is ignored, as here. */
inline end() {
	if
	:: !ending ->
		ending = true;
		h_cancel = true;
		t_respawn[0] = false; t_respawn[1] = false;
		t_recycle[0] = false; t_recycle[1] = false;
		q[0] = 0; q[1] = 0; nq = 0;
		g_stopping = true; nstopping = 1;
		run Stopper()
	:: else -> skip
	fi
}

/* respawn: s.timer = nil; unless the end began, busy, replaceIn.
 * PROPERTY 4: no respawn begins once the budget is spent. */
inline respawn(s) {
	if
	:: ending -> skip
	:: else ->
		assert(losses <= MAXR);
		busy[s] = true;
		run Replace(s, false)
	fi
}

/* respawnAfter: at once after a steady worker's loss (failures 0), else
 * after the slot's backoff. mayNow: a loss, which may have come after
 * Steady; a failed replacement always backs off. */
inline respawnAfter(s, mayNow) {
	if
	:: mayNow -> respawn(s)
	:: true -> busy[s] = true; t_respawn[s] = true  /* FIX B: busy while it backs off */
	fi
}

/* overBudget: count a loss or failed replacement; past MaxRestarts, end
 * the service with its error. */
#define OVER_BUDGET    (losses > MAXR)

/* nextRecycle: the next queued slot that is not busy, unless a recycle
 * runs or the end began */
inline nextRecycle() {
	if
	:: !recycling && !ending ->
		do
		:: nq == 0 -> break
		:: nq > 0 ->
			i = q[0]; q[0] = q[1]; q[1] = 0; nq--;
			if
			:: busy[i] -> skip                    /* respawned: needs no recycle */
			:: else -> busy[i] = true; recycling = true; run Replace(i, true); break
			fi
		od
	:: else -> skip
	fi
}

proctype Owner()
{
	mtype ev;
	byte s, w, i;
	bool ok, rec;

end_owner:
	do
	:: atomic { ending && nstopping == 0 ->
		/* PROPERTY 3: when the service has ended, no worker of the
		 * generation is alive. */
		assert(nalive == 0);
		/* PROPERTY 4: past the budget, the service ends with an error. */
		assert(losses <= MAXR || svc_err);
		/* PROPERTY 6: it ends in error only once the program's own
		 * failures exceed the budget; hang kills spend none. */
		assert(!svc_err || failures > MAXR);
		svc_done = true;                  /* close(v.done) */
		break }
	:: inbox ? ev, s, w, ok, rec ->
		atomic {
			if
			/* onLost (the serving generation heals: heals) ->
			 * onWorkerLost: nothing once the end began; count it; a busy
			 * slot is left to its replacement */
			:: ev == LOST && ending -> skip
			:: ev == LOST && !ending ->
				if
				:: ok -> skip                     /* FIX H: a hang kill spends no budget */
				:: else -> losses++; failures++
				fi;
				if
				:: OVER_BUDGET -> svc_err = true; end()   /* overBudget */
				:: else ->
					if
					:: busy[s] -> lost[s] = lost[s] | (1 << w)        /* s.lost */
					:: !busy[s] && w != known[s] -> skip  /* FIX A2: it had left its slot */
					:: !busy[s] && w == known[s] -> respawnAfter(s, true)
					fi
				fi
			/* onRespawn: its backoff ended */
			:: ev == RESPAWN -> respawn(s)
			/* onRecycle: queue it, unless queued or the end began */
			:: ev == RECYCLE && ending -> skip
			:: ev == RECYCLE && !ending ->
				if
				:: (nq > 0 && q[0] == s) || (nq > 1 && q[1] == s) -> skip
				:: else -> q[nq] = s; nq++
				fi;
				nextRecycle()
			/* onReplaced */
			:: ev == REPLACED ->
				busy[s] = false;
				if
				:: rec && !ok -> recycling = false   /* a recycle that succeeded ends at evRetired */
				:: else -> skip
				fi;
				if
				:: !ok && ending -> skip
				:: !ok && !ending ->                         /* replaceFailed */
					losses++; failures++;
					if
					:: OVER_BUDGET -> svc_err = true; end()
					:: else ->
						if
						:: !rec || WAS_LOST(s, known[s]) -> lost[s] = 0; respawnAfter(s, false)  /* FIX A2 */
						:: else -> lost[s] = 0; t_recycle[s] = true  /* retried after the backoff */
						fi
					fi
				:: ok ->
					known[s] = w;
					if
					:: WAS_LOST(s, w) -> lost[s] = 0; respawnAfter(s, true)  /* FIX A1 */
					:: else -> lost[s] = 0
					fi
				fi;
				nextRecycle()
			/* onRetired: the recycle's old worker has gone */
			:: ev == RETIRED && ending -> skip
			:: ev == RETIRED && !ending -> recycling = false; nextRecycle()
			/* evStop: end */
			:: ev == STOP_ASKED -> end()
			/* onStopped */
			:: ev == STOPPED -> nstopping--
			fi;
			ev = 0; s = 0; w = 0; ok = false; rec = false; i = 0
		}
	od
}

/* The operator's SIGTERM (watchSignals, Service.Stop: evStop), at any
 * moment, or never. */
proctype Operator()
{
#ifdef OPSTOP
	if
	:: inbox ! STOP_ASKED, 0, 0, true, false
	:: svc_done -> skip
	:: skip
	fi
#else
	skip
#endif
}

/* Once nothing can move (no event to take, no timer to fire, no worker
 * with a fault left), the run is over: every run gets here, since the
 * model has no cycles (check.sh checks this). */
proctype Quiescence()
{
	timeout ->
	if
	:: svc_done -> skip
	:: else ->
		/* PROPERTY 3: a stop that began ends. */
		assert(!ending);
		/* PROPERTY 5: a loss is never dropped: no replacement is stuck,
		 * every slot has a live worker that serves, and it is the one the
		 * Owner knows. */
		assert(nrepl == 0);
		assert(SERVES(0) && SERVES(1));
		assert(known[0] == cur[0] && known[1] == cur[1])
	fi
}

init {
	atomic {
		cur[0] = 0; cur[1] = 1; known[0] = 0; known[1] = 1; slot[1] = 1;
		alive[0] = true; alive[1] = true; spawned[0] = true; spawned[1] = true;
		stage[0] = 2; stage[1] = 2; commit[0] = true; commit[1] = true;
		saw_prep[0] = true; saw_prep[1] = true;
		watched[0] = true; watched[1] = true;    /* go s.monitor() */
		run Worker(0); run Worker(1);
		run Timer(0); run Timer(1);
		run Owner(); run Operator(); run Quiescence()
	}
}
