/*
 * reload.pml -- a Promela model of servery's sequence of generations: the
 * lifecycle loop (Service.run in lifecycle.go), the one process that owns
 * which generation serves, starts and retires and whether the end has
 * begun, and, under it, each generation's Supervisor and workers.
 *
 * Source of truth: lifecycle.go, command.go (runService and the signal
 * front ends), supervisor.go, barrier.go, drain.go, worker.go. Each step
 * carries a comment naming the Go function that performs it. Checked by
 * model/check.sh with spin, for N = 2 workers per generation, in the
 * configurations listed below.
 *
 * The shape is the Go code's: the Owner is one process and inbox is its
 * channel, a rendezvous like Go's unbuffered Service.inbox. Everything
 * else (a generation's Start, its Monitor, its Stopper, the SIGHUP and
 * SIGTERM front ends) is a process that sends the Owner one event and
 * goes on; the Owner handles one event at a time, and each property is
 * checked at the event that decides it.
 *
 * lifecycle.pml models one generation in full: hung workers, SIGTERM and
 * SIGKILL, survivors of the kill deadline, spawn errors. This model takes
 * that as proven and abstracts it:
 *  - Worker 0 of each generation is spawned well-behaved or faulty;
 *    worker 1 is well-behaved. A faulty worker may crash before prepared
 *    (the barrier fails), after commit (a rollback after commit) or after
 *    ready (it is lost). No worker hangs: a stop closes its stdin and it
 *    ends, as lifecycle.pml shows the drain, SIGTERM and SIGKILL deadlines
 *    make it. So there are no signals here and no survivors, and the
 *    second signal (evHurry), which only brings those deadlines forward,
 *    is not modelled.
 *  - Time is ordering only. The startup timeout is a choice the barrier
 *    may take at any moment; a spawn error or a bad certificate at a
 *    reload is the same choice before the first worker reports.
 *  - A generation's events (prepared, ready, bad: a failed or undecodable
 *    line, or an exit) form a bag, as in lifecycle.pml.
 *  - The parent's death (SIGKILL) ends every parent process at any step;
 *    every worker of every generation then reads EOF.
 *  - A section under Supervisor.mu is one atomic step.
 *  - Ticket key rotation (evRotate) changes no generation's state: it is
 *    not modelled. Nor is the reply to a Reload's caller.
 */

#define N 2             /* workers per generation (the model is written for 2) */
#define NONE 255

/* Configurations (model/check.sh runs each): how many SIGHUPs the
 * operator may send (each reload numbers one generation: G = HUPS + 1),
 * how many faulty workers a run may spawn, and whether the operator may
 * stop servery (STOP) and the parent may be killed (DEATH), each at any
 * moment. */
#ifndef HUPS
#define HUPS 2
#endif
#define G (HUPS + 1)
#ifndef FAULTY
#define FAULTY 1
#endif

/* ---------------------------------------------------------------- wires */

byte stdin_sent[G*N];   /* lines written to a worker's stdin: 1 config, 2 commit */
bool stdin_closed[G*N]; /* its write end closed (a stop), or the parent died     */
byte q_prepared[G];     /* Supervisor.events not yet taken, per generation       */
byte q_ready[G];
byte q_bad[G];

#define W(g, i)        ((g) * N + (i))
#define EOF(w, got)    (stdin_closed[w] && stdin_sent[w] == (got))

/* The Owner's channel (Service.inbox): an event and its generation. */
mtype = { STARTED, FAILED, LOST, STOPPED, RELOAD, STOP_ASKED };
chan inbox = [0] of { mtype, byte };

/* ------------------------------------------- each generation (Supervisor) */

bool g_stopping[G];     /* Supervisor.stopping: stopWith ran               */
bool g_monitor[G];      /* monitor reads the events                        */
bool g_done[G];         /* close(s.done)                                   */
bool g_cancel[G];       /* its Start's ctx cancelled (startingGen.cancel)  */
bool g_ok[G];           /* its Start returned nil                          */
bool g_reporting[G];    /* a loss taken, not yet sent (Supervisor.reporting) */

/* ------------------------------------------------- the Owner's state (life) */

byte serving = NONE;    /* life.serving                                    */
byte starting = NONE;   /* life.starting                                   */
byte retiring = NONE;   /* life.retiring                                   */
bool lost_before[G];    /* Supervisor.lostUnserved: lost before it served, so serve fails */
byte nstopping;         /* len(life.stopping): stops run is waiting for    */
byte ngens;             /* life.numbered                                   */
bool ending;            /* life.ending                                     */
byte reload_due;        /* life.reload: one more reload is due (0 or 1)    */
bool svc_done;          /* close(v.done)                                   */
bool svc_err;           /* v.err != nil                                    */
bool parent_dead;
byte faulty_left = FAULTY; /* faulty workers yet to be spawned */

/* --------------------------------------------------------------- ghosts */

byte nspawned[G];
byte nprepared[G];      /* workers of g that wrote prepared                */
byte nready[G];         /* workers of g that wrote ready                   */
byte nended[G];
byte successor[G];      /* the generation that replaced g (promote), or NONE */
bool start_failed;      /* the first generation's Start failed             */
bool lost_heard;        /* run took a loss from the serving or the retiring generation */
bool lost_serving;      /* a worker was lost while its generation served   */
byte hups_since;        /* SIGHUPs run took since the last reload began    */

#if G == 2
#define LIVE_GENS      (LIVE(0) + LIVE(1))
#define ALL_ENDED      (nended[0] == nspawned[0] && nended[1] == nspawned[1])
#elif G == 3
#define LIVE_GENS      (LIVE(0) + LIVE(1) + LIVE(2))
#define ALL_ENDED      (nended[0] == nspawned[0] && nended[1] == nspawned[1] && nended[2] == nspawned[2])
#else
#define LIVE_GENS      (LIVE(0) + LIVE(1) + LIVE(2) + LIVE(3))
#define ALL_ENDED      (nended[0] == nspawned[0] && nended[1] == nspawned[1] && nended[2] == nspawned[2] && nended[3] == nspawned[3])
#endif
#define LIVE(g)        (nspawned[g] > nended[g])

/* A worker's line is lost once the parent is gone; once the generation's
 * monitor runs and its stop has begun, observe drops every event. */
#define DISCARD(s)     (parent_dead || (g_monitor[s] && g_stopping[s]))
#define report(q, s)   if :: !DISCARD(s) -> q[s]++ :: else -> skip fi
#define DROP_EVENTS(s) q_prepared[s] = 0; q_ready[s] = 0; q_bad[s] = 0

/* Supervisor.stopWith: the stop path runs once, in its own goroutine;
 * tell says whether its end is reported to the Owner (evStopped: a stop
 * run asked for) or waited for by Start (a rollback). Inside an atomic
 * step. */
inline stopWith(s, tell) {
	if
	:: !g_stopping[s] ->
		g_stopping[s] = true;
		if
		:: g_monitor[s] -> DROP_EVENTS(s)
		:: else -> skip
		fi;
		run Stopper(s, tell)
	:: else -> skip
	fi
}

/* ============================================================== worker */

/* The worker exits; reap delivers the exit event. */
#define EXIT(s, w) \
	nended[s]++; report(q_bad, s); stdin_sent[w] = 0; faulty = false

proctype Worker(byte s; byte w; bool faulty)
{
	/* prepare: read config, starting, the App's start, newServer, adopt
	 * the listener, accepting nothing; runWorker: send prepared */
	if
	:: atomic { stdin_sent[w] >= 1 && !parent_dead -> nprepared[s]++; report(q_prepared, s) }
	:: atomic { stdin_sent[w] >= 1 && parent_dead -> EXIT(s, w); goto gone }
	                                  /* send(prepared) fails (EPIPE) */
	:: atomic { EOF(w, 0) -> EXIT(s, w); goto gone }
	                                  /* "read config: EOF": failed, exit */
	:: atomic { faulty -> EXIT(s, w); goto gone }
	                                  /* the App's start fails or panics; a crash */
	fi;

	/* runWorker: awaitCommit */
	if
	:: stdin_sent[w] == 2
	:: atomic { EOF(w, 1) -> EXIT(s, w); goto gone }  /* "stdin closed before commit" */
	fi;

	/* runWorker: go srv.serve(ln) begins accepting; send ready.
	 * PROPERTY R3: no worker of a generation accepts before every worker
	 * of that generation reported prepared. */
	if
	:: atomic {
		assert(nprepared[s] == N);
		if
		:: !parent_dead -> nready[s]++; report(q_ready, s)
		:: else -> skip
		fi }
	:: atomic { faulty -> assert(nprepared[s] == N); EXIT(s, w); goto gone }
	                                  /* crashes once it accepts: a rollback after commit */
	fi;

	/* serveUntilDrain: serve until stdin ends (drainSignal), then
	 * server.drain, the App's stop, done, exit. */
end_serve:
	if
	:: atomic { EOF(w, 2) ->
		/* PROPERTY R1: a generation that started stops accepting only if
		 * it lost a worker, the service is ending, or the generation that
		 * replaced it has every worker ready. */
		assert(!g_ok[s] || lost_before[s] || ending || parent_dead
		       || (successor[s] != NONE && nready[successor[s]] == N));
		EXIT(s, w); goto gone }
	:: atomic { faulty -> EXIT(s, w); goto gone }      /* lost after ready */
	fi;
gone:
	skip
}

/* ============================== one generation: Supervisor.Start, run by
 * the goroutine Service.begin starts; it reports evStarted to the Owner. */

proctype Starter(byte s)
{
	byte pend;

	{
		/* spawnAll spawns every worker with the listener as its fd 3, and
		 * the barrier sends each its config (sendBy).
		 * PROPERTY R4: at most two generations have live workers. */
		if
		:: atomic {
			assert(LIVE_GENS - LIVE(s) <= 1);
			nspawned[s] = N;
			stdin_sent[W(s, 0)] = 1; stdin_sent[W(s, 1)] = 1;
			if
			:: run Worker(s, W(s, 0), false)
			:: faulty_left > 0 -> faulty_left--; run Worker(s, W(s, 0), true)
			fi;
			run Worker(s, W(s, 1), false) }
		:: s > 0 -> goto failed          /* readTLS: a bad certificate */
		fi;

		/* barrier: await prepared (a starting line advances nothing) */
		pend = N;
		do
		:: pend == 0 -> break
		:: atomic { pend > 0 && q_prepared[s] > 0 -> q_prepared[s]--; pend-- }
		:: atomic { pend > 0 && q_ready[s] + q_bad[s] > 0 -> pend = 0; goto rollback }
		:: atomic { pend > 0 && g_cancel[s] -> pend = 0; goto rollback }
		                                  /* ctx.Done: cancelled by the end */
		od;

		/* barrier: sendBy(commit) to every worker */
		atomic { stdin_sent[W(s, 0)] = 2 * stdin_sent[W(s, 0)];
		         stdin_sent[W(s, 1)] = 2 * stdin_sent[W(s, 1)] };

		/* barrier: await ready */
		pend = N;
		do
		:: pend == 0 -> break
		:: atomic { pend > 0 && q_ready[s] > 0 -> q_ready[s]--; pend-- }
		:: atomic { pend > 0 && q_prepared[s] + q_bad[s] > 0 -> pend = 0; goto rollback }
		:: atomic { pend > 0 && g_cancel[s] -> pend = 0; goto rollback }
		od;

		/* Start returns nil, after go s.monitor(); begin's goroutine
		 * sends evStarted */
		atomic { assert(nready[s] == N); g_ok[s] = true; run Monitor(s) };
		inbox ! STARTED, s;
		goto out;

rollback:
		/* Start: stopWith(err, drain), go s.monitor(), <-s.done */
		atomic { stopWith(s, false); run Monitor(s) };
		g_done[s];
failed:
		inbox ! FAILED, s;
out:
		skip
	} unless { parent_dead }
}

/* Supervisor.monitor and observe: the first worker lost after ready,
 * before the generation's stop began, is reported to the Owner
 * (onLost: evLost). Taking the event and reporting it are two steps: the
 * Owner may promote, retire or end meanwhile. */
proctype Monitor(byte s)
{
	{
		atomic {
			g_monitor[s] = true;
			if
			:: g_stopping[s] -> DROP_EVENTS(s)
			:: else -> skip
			fi
		};
end_monitor:
		do
		:: atomic { q_prepared[s] + q_ready[s] + q_bad[s] > 0 ->
			DROP_EVENTS(s); g_reporting[s] = true;
			/* the ghost of R7, set where the loss is seen */
			lost_serving = lost_serving || s == serving };
			if
			:: inbox ! LOST, s
			:: svc_done -> skip           /* send: the service has ended */
			fi;
			g_reporting[s] = false;       /* reporting.Done */
			break
		:: g_done[s] -> break
		od
	} unless { parent_dead }
}

/* Supervisor.stop: escalate closes every worker's stdin; every worker then
 * ends (see above); release; s.err; close(s.done). A stop the Owner began
 * reports its end (Service.stop's goroutine: evStopped). */
proctype Stopper(byte s; bool tell)
{
	{
		atomic { stdin_closed[W(s, 0)] = true; stdin_closed[W(s, 1)] = true };
		/* reporting.Wait: a loss taken before the stop is sent first */
		atomic { nended[s] == nspawned[s] && !g_reporting[s] -> g_done[s] = true };
		if
		:: tell -> inbox ! STOPPED, s
		:: else -> skip
		fi
	} unless { parent_dead }
}

/* ============================================== the Owner: Service.run */

/* Service.stop: begin gen's stop; its end comes back as evStopped. */
inline stop(g) {
	if
	:: !g_stopping[g] -> nstopping++; stopWith(g, true)
	:: else -> skip
	fi
}

/* Service.next: begin the queued reload once nothing starts or retires.
 * PROPERTY R6: a reload begins only for a SIGHUP that came after the
 * previous reload began: SIGHUPs during a reload coalesce into at most
 * one more. */
inline next() {
	if
	:: reload_due > 0 && !ending && starting == NONE && nstopping == 0 ->
		assert(hups_since > 0); hups_since = 0;
		reload_due--;                             /* RELOADING=1 */
		starting = ngens; ngens++;                /* begin */
		run Starter(starting)
	:: else -> skip
	fi
}

/* Service.end: once, STOPPING=1; cancel a Start in progress (it rolls
 * back); stop the serving generation (a retiring one stops already). */
inline end() {
	if
	:: !ending ->
		ending = true;
		if
		:: starting != NONE -> g_cancel[starting] = true
		:: else -> skip
		fi;
		if
		:: serving != NONE -> stop(serving)
		:: else -> skip
		fi;
		reload_due = 0
	:: else -> skip
	fi
}

proctype Owner()
{
	mtype ev;
	byte g, old;

	{
		atomic { ngens = 1; starting = 0; run Starter(0) };   /* Start: begin */
end_owner:
		do
		:: atomic { ending && starting == NONE && retiring == NONE && nstopping == 0 ->
			/* PROPERTY R5a: the service ends only once every worker of
			 * every generation has ended. */
			assert(ALL_ENDED);
			/* PROPERTY R7a: it ends in error only if its first generation
			 * failed to start, or a worker was lost while its generation
			 * served; a retiring generation's lost worker is not an error. */
			assert(!svc_err || start_failed || lost_heard);
			svc_done = true;                      /* close(v.done) */
			break }
		:: inbox ? ev, g ->
			atomic {
				if
				/* onStarted, nil: promote, unless it lost a worker before
				 * run saw it ready, or the end began meanwhile */
				:: ev == STARTED && lost_before[g] ->
					starting = NONE; stop(g);
					if
					:: serving == NONE -> start_failed = true; svc_err = true; ending = true
					:: else -> assert(!g_stopping[serving] || ending)   /* R2 */
					fi
				:: ev == STARTED && !lost_before[g] && ending ->
					starting = NONE; stop(g);
					if
					:: serving == NONE -> serving = g
					:: else -> skip
					fi
				:: ev == STARTED && !lost_before[g] && !ending && serving == NONE ->
					starting = NONE; serving = g          /* READY=1 */
				:: ev == STARTED && !lost_before[g] && !ending && serving != NONE ->
					starting = NONE;
					/* PROPERTY R1 (at the event): the serving generation
					 * retires only once every new worker is ready. */
					assert(nready[g] == N);
					old = serving; serving = g;           /* promote */
					retiring = old; successor[old] = g;
					stop(old)
				/* onStarted, an error: the first generation's ends the
				 * service; a reload's leaves the serving one as it was.
				 * PROPERTY R2: a failed reload sent the serving generation
				 * nothing: it was not told to stop, unless the end began. */
				:: ev == FAILED ->
					starting = NONE;
					if
					:: serving == NONE -> start_failed = true; svc_err = true; ending = true
					:: else -> assert(!g_stopping[serving] || ending)
					fi
				/* onLost: by the generation's role when run learns of it */
				:: ev == LOST && g == starting -> lost_before[g] = true
				:: ev == LOST && g != starting ->
					/* the ghost, apart from the decision it checks */
					lost_heard = lost_heard || g == serving || g == retiring;
					if
					:: g == serving || g == retiring -> svc_err = true; end()
					:: else -> skip           /* a generation already stopping */
					fi
				/* onStopped */
				:: ev == STOPPED ->
					nstopping--;
					if
					:: g == retiring -> retiring = NONE
					:: else -> skip
					fi
				/* onReload: ignored before the first generation serves and
				 * once the end began; otherwise due, coalesced */
				:: ev == RELOAD && (ending || serving == NONE) -> skip
				:: ev == RELOAD && !ending && serving != NONE ->
					reload_due = 1;                        /* coalesced */
					hups_since++
				:: ev == STOP_ASKED -> end()
				fi;
				next()
			}
		od
	} unless { parent_dead }
}

/* ===================================================== the front ends */

/* watchHangups: each SIGHUP is one evReload. */
proctype Hangups()
{
	byte n;

	{
		do
		:: n < HUPS ->
			n++;
			if
			:: inbox ! RELOAD, 0
			:: svc_done -> break          /* send: the service has ended */
			fi
		:: n == HUPS -> break
		od
	} unless { parent_dead }
}

/* The first SIGINT or SIGTERM (watchSignals): Service.Stop sends evStop. */
proctype Operator()
{
#ifdef STOP
	{
		if
		:: inbox ! STOP_ASKED, 0
		:: svc_done -> skip                      /* send: the service has ended */
		:: skip                                  /* never asked to stop */
		fi
	} unless { parent_dead }
#else
	skip                                         /* this configuration never stops */
#endif
}

/* SIGKILL to the parent: every pipe end it held closes. */
proctype ParentDeath()
{
	byte i;

#ifndef DEATH
	skip                                         /* this configuration: never */
#else
	if
	:: d_step {
		parent_dead = true;
		for (i : 0 .. G*N - 1) { stdin_closed[i] = true };
		for (i : 0 .. G - 1) { DROP_EVENTS(i) }
	   }
	:: skip
	fi
#endif
}

init {
	byte g;
	atomic {
		for (g : 0 .. G - 1) { successor[g] = NONE };
		run Owner(); run Hangups(); run Operator(); run ParentDeath()
	}
}

/* ============================================================ properties
 * Each ltl formula is checked on its own (pan -N name); the assertions
 * above and the absence of invalid end states by a plain safety search.  */

/* R3: no worker of a generation accepts before all of it are prepared. */
#define ACCEPT_OK(g) (nready[g] > 0 -> nprepared[g] == N)
ltl no_early_accept {
#if G == 2
	[] (ACCEPT_OK(0) && ACCEPT_OK(1))
#else
	[] (ACCEPT_OK(0) && ACCEPT_OK(1) && ACCEPT_OK(2))
#endif
}
/* R4 (at most two generations have live workers) is the assertion at
 * spawnAll: the only step that makes a generation live. */
/* R5: after a stop, every worker of every generation ends and then the
 * service ends, unless the parent dies first; after the parent dies,
 * every worker ends on its own (EOF). */
ltl stop_ends { [] (ending -> <> ((svc_done && ALL_ENDED) || parent_dead)) }
ltl orphans_end { [] (parent_dead -> <> ALL_ENDED) }
/* R7: a worker lost while its generation served ends the service with an
 * error (exit 1), reload or not: the loss is never dropped, even when
 * its report reaches the Owner after a promotion retired its generation. */
ltl lost_ends { [] (lost_serving -> <> ((svc_done && svc_err) || parent_dead)) }
