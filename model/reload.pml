/*
 * reload.pml -- a Promela model of servery's sequence of generations: the
 * Service, which owns the listener, starts the first generation, replaces
 * it on SIGHUP (reload) and ends the service; and, under it, each
 * generation's Supervisor and workers.
 *
 * Source of truth: service.go, reload.go, command.go (runSupervised and
 * the signal front ends), supervisor.go, barrier.go, drain.go, worker.go.
 * Each step carries a comment naming the Go function that performs it.
 * Checked by model/check.sh with spin, for N = 2 workers per generation,
 * in the configurations listed below.
 *
 * lifecycle.pml models one generation in full: hung workers, SIGTERM and
 * SIGKILL, survivors of the kill deadline, spawn errors. This model takes
 * that as proven and abstracts it:
 *  - Worker 0 of each generation is spawned well-behaved or faulty;
 *    worker 1 is well-behaved. A faulty worker may crash before prepared
 *    (the barrier fails) or after ready (it is lost). No worker hangs: a
 *    stop closes its stdin and it ends, as lifecycle.pml shows the drain,
 *    SIGTERM and SIGKILL deadlines make it. So there are no signals here
 *    and no survivors.
 *  - Time is ordering only. The startup timeout, and the cancellation of a
 *    Start's or a Reload's context, which only brings it forward, is a
 *    choice the barrier may take at any moment; a spawn error is the same
 *    choice just after the spawn.
 *  - A generation's events (prepared, ready, bad: a failed or undecodable
 *    line, or an exit) form a bag, as in lifecycle.pml.
 *  - The parent's death (SIGKILL) ends every parent goroutine at any
 *    step; every worker of every generation then reads EOF.
 *  - A section under Service.mu or Supervisor.mu is one atomic step.
 *  - A bad certificate at a reload (reloadTLS) fails it before any worker
 *    starts: the same, to the Service, as a generation rolled back at once.
 *  - Ticket key rotation, the one message a serving worker gets after
 *    commit, is not modelled: it is independent of reload.
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

/* ------------------------------------------- each generation (Supervisor) */

bool g_stopping[G];     /* Supervisor.stopping: beginStop ran              */
bool g_lost[G];         /* Supervisor.lost: a worker lost after ready      */
bool g_monitor[G];      /* monitor reads the events                        */
bool g_done[G];         /* close(s.done)                                   */
byte g_start[G];        /* Supervisor.Start's result: 0 running, OK, FAILED */
#define OK     1
#define FAILED 2

/* ----------------------------------------------------------- the Service */

byte serving = NONE;    /* Service.serving                                 */
byte retiring = NONE;   /* Service.retiring                                */
byte ngens;             /* Service.generations: generations numbered       */
bool svc_stopping;      /* Service.stopping: the end has begun             */
bool end_began;         /* Service.endOnce: the stop goroutine runs        */
bool start_running;     /* Service.Start has not returned (startDone open) */
bool reload_running;    /* a Reload holds cancelReload (reloadDone open)   */
bool svc_done;          /* Service.done, closed by finish                  */
bool svc_err;           /* Service.err != nil                              */
bool svc_lost;          /* Service.lostErr != nil: the serving generation lost a worker */
bool stop_signal;       /* the front end's stop channel: a SIGINT/SIGTERM  */
byte hup_pending;       /* reloader.pending: buffered SIGHUPs (capacity 1) */
bool parent_dead;
byte faulty_left = FAULTY; /* faulty workers yet to be spawned */

/* --------------------------------------------------------------- ghosts */

byte nspawned[G];
byte nprepared[G];      /* workers of g that wrote prepared                */
byte nready[G];         /* workers of g that wrote ready                   */
byte nended[G];
byte successor[G];      /* the generation that replaced g (promote), or NONE */
bool start_failed;      /* Service.Start returned an error                 */
bool lost_serving;      /* a worker was lost while its generation was the serving one */
byte hups_since;        /* SIGHUPs since the last reload began             */

#if G == 2
#define LIVE_GENS      (LIVE(0) + LIVE(1))
#define ALL_ENDED      (nended[0] == nspawned[0] && nended[1] == nspawned[1])
#else
#define LIVE_GENS      (LIVE(0) + LIVE(1) + LIVE(2))
#define ALL_ENDED      (nended[0] == nspawned[0] && nended[1] == nspawned[1] && nended[2] == nspawned[2])
#endif
#define LIVE(g)        (nspawned[g] > nended[g])

/* A worker's line is lost once the parent is gone; once the generation's
 * monitor runs and its stop has begun, observe drops every event. */
#define DISCARD(s)     (parent_dead || (g_monitor[s] && g_stopping[s]))
#define report(q, s)   if :: !DISCARD(s) -> q[s]++ :: else -> skip fi
#define DROP_EVENTS(s) q_prepared[s] = 0; q_ready[s] = 0; q_bad[s] = 0

/* Supervisor.beginStop: the stop path runs once, in its own goroutine.
 * Used inside an atomic step. */
inline beginStop(s) {
	if
	:: !g_stopping[s] ->
		g_stopping[s] = true;
		if
		:: g_monitor[s] -> DROP_EVENTS(s)
		:: else -> skip
		fi;
		run Stopper(s)
	:: else -> skip
	fi
}

/* Service.end: the end begins once (STOPPING=1), and its own goroutine,
 * Service.stop, carries it out. Used inside an atomic step. */
inline end() {
	svc_stopping = true;
	if
	:: !end_began -> end_began = true; run ServiceStop()
	:: else -> skip
	fi
}

/* Service.finish: the first call records how the service ended and closes
 * the listener. Used inside an atomic step. */
inline finish(err) {
	if
	:: !svc_done ->
		/* PROPERTY R5a: the service ends only once every worker of
		 * every generation has ended. */
		assert(ALL_ENDED);
		/* PROPERTY R7: it ends in error only if its first generation
		 * failed to start, or a worker was lost while its generation
		 * served; a retiring generation's lost worker is not an error. */
		assert(!(err) || start_failed || lost_serving);
		svc_done = true; svc_err = (err)
	:: else -> skip
	fi
}

/* ============================================================== worker */

/* The worker exits; reap delivers the exit event. */
#define EXIT(s, w) \
	nended[s]++; report(q_bad, s); stdin_sent[w] = 0; faulty = false

proctype Worker(byte s; byte w; bool faulty)
{
	/* prepare: read config, the App's start, newServer, adopt the
	 * listener, accepting nothing; runWorker: send prepared */
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
		assert(g_start[s] != OK || g_lost[s] || svc_stopping || parent_dead
		       || (successor[s] != NONE && nready[successor[s]] == N));
		EXIT(s, w); goto gone }
	:: atomic { faulty -> EXIT(s, w); goto gone }      /* lost after ready */
	fi;
gone:
	skip
}

/* ================================= one generation: Supervisor.Start */

/* Supervisor.Start of generation s, run by its caller's goroutine
 * (Service.Start or Reload): spawnAll, the barrier, and on failure the
 * rollback, which waits until the generation is done. Sets g_start[s];
 * pend is the caller's local. */
inline genStart(s) {
	/* spawnAll spawns every worker with the listener as its fd 3, and the
	 * barrier sends each its config (sendBy).
	 * PROPERTY R4: at most two generations have live workers. */
	atomic {
		assert(LIVE_GENS - LIVE(s) <= 1);
		nspawned[s] = N;
		stdin_sent[W(s, 0)] = 1; stdin_sent[W(s, 1)] = 1;
		if
		:: run Worker(s, W(s, 0), false)
		:: faulty_left > 0 -> faulty_left--; run Worker(s, W(s, 0), true)
		fi;
		run Worker(s, W(s, 1), false)
	};

	/* barrier: await prepared */
	pend = N;
	do
	:: pend == 0 -> break
	:: atomic { pend > 0 && q_prepared[s] > 0 -> q_prepared[s]--; pend-- }
	:: atomic { pend > 0 && q_ready[s] + q_bad[s] > 0 -> pend = 0; goto rollback }
	:: atomic { pend > 0 && svc_stopping -> pend = 0; goto rollback }
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
	:: atomic { pend > 0 && svc_stopping -> pend = 0; goto rollback }
	od;

	/* Start returns nil, after go s.monitor() */
	atomic { assert(nready[s] == N); g_start[s] = OK; run Monitor(s) };
	goto started;

rollback:
	/* Start: beginStop(err, drain), go s.monitor(), <-s.done */
	atomic { beginStop(s); run Monitor(s) };
	g_done[s];
	g_start[s] = FAILED;
started:
	skip
}

/* Supervisor.monitor and observe: a worker lost after ready begins the
 * generation's stop, with the loss as its result, then tells the Service
 * (onLost: Service.lost). */
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
			/* beginStop(lost, DrainTimeout), which begins the stop here:
			 * events are only taken before any stop */
			g_lost[s] = true; beginStop(s);
			if
			:: s == serving -> lost_serving = true
			:: else -> skip
			fi }
			/* onLost: Service.lost, under v.mu: only the serving
			 * generation's loss ends the service; a retiring generation's
			 * is not one, and a starting one's is its Start's or Reload's
			 * failure (they look before they serve it). */
			atomic {
				if
				:: s == serving -> svc_lost = true; end()
				:: else -> skip
				fi
			}
		:: g_done[s] -> break
		od
	} unless { parent_dead }
}

/* Supervisor.stop: escalate closes every worker's stdin; every worker then
 * ends (see above); release; s.err; close(s.done). */
proctype Stopper(byte s)
{
	{
		atomic { stdin_closed[W(s, 0)] = true; stdin_closed[W(s, 1)] = true };
		atomic { nended[s] == nspawned[s] -> g_done[s] = true }
	} unless { parent_dead }
}

/* ==================================================== the Service layer */

/* Service.Start, called by runSupervised. */
proctype ServiceStart()
{
	byte pend;

	{
		atomic {
			if
			:: !svc_stopping -> start_running = true; ngens = 1
			:: else -> goto out           /* refused: the service is stopping */
			fi
		};
		genStart(0);
		if
		:: atomic { g_start[0] == FAILED ->
			start_failed = true; finish(true); start_running = false }
		/* serve, under v.mu: a generation that lost a worker since its
		 * ready never serves; Start waits for it and fails */
		:: atomic { g_start[0] == OK && g_lost[0] -> skip };
			g_done[0];
			atomic { start_failed = true; finish(true); start_running = false }
		:: atomic { g_start[0] == OK && !g_lost[0] ->
			serving = 0; start_running = false }  /* READY=1, unless stopping */
		fi;
out:
		skip
	} unless { parent_dead }
}

/* Service.retire: the replaced generation drains and is reaped; then the
 * Service forgets it. */
proctype Retire(byte old)
{
	{
		atomic { beginStop(old) };        /* old.Stop(context.Background()) */
		atomic {
			g_done[old] ->
			if
			:: retiring == old -> retiring = NONE
			:: else -> skip
			fi
		}
	} unless { parent_dead }
}

/* The SIGHUP front end (watchHangups, reloader.request): a SIGHUP while
 * one is pending coalesces into it. */
proctype Hangups()
{
	byte n;

	do
	:: atomic { n < HUPS && !parent_dead ->
		n++; hups_since++;
		if
		:: hup_pending == 0 -> hup_pending = 1
		:: else -> skip                   /* coalesced */
		fi }
	:: n == HUPS || parent_dead -> break
	od
}

/* reloader.run, calling Service.Reload for each pending request until the
 * stop signal. */
proctype Reloader()
{
	byte pend, gen, old;

	{
		skip;
end_reloader:
		do
		:: atomic { hup_pending > 0 && !stop_signal -> hup_pending--;
			/* PROPERTY R6: a reload begins only for a SIGHUP that came
			 * after the previous reload began: SIGHUPs during a reload
			 * coalesce into at most one more. */
			assert(hups_since > 0); hups_since = 0 };

			/* Reload: under reloadMu, then v.mu */
			atomic {
				if
				:: svc_stopping || serving == NONE -> goto next  /* errNotServing */
				:: else -> reload_running = true; old = retiring
				fi
			};
			/* wait for a retiring generation, or the end of the reload's ctx */
			if
			:: old != NONE -> g_done[old]
			:: old != NONE && svc_stopping -> goto ended   /* cancelled */
			:: else -> skip
			fi;
			/* reloadGeneration, under v.mu: errNotServing once the end has
			 * begun, else RELOADING=1; reloadTLS; nextGeneration */
			if
			:: atomic { svc_stopping -> goto ended }
			:: atomic { !svc_stopping -> gen = ngens; ngens++ }
			:: atomic { !svc_stopping -> goto failed }     /* reloadTLS: a bad certificate */
			fi;
			genStart(gen);
			if
			:: g_start[gen] == FAILED -> goto failed
			:: else -> skip
			fi;
			/* promote, under v.mu */
			if
			:: atomic { g_lost[gen] -> skip };    /* lost since its ready: the reload
			                                         failed; wait until it is gone */
				g_done[gen];
				goto failed
			:: atomic { !g_lost[gen] ->
				old = serving;
				serving = gen; retiring = old;
				successor[old] = gen;
				if
				:: svc_stopping -> skip           /* errNotServing: the stop stops both */
				:: else -> run Retire(old)        /* READY=1 */
				fi }
				goto ended
			fi;
failed:
			/* reloadFailed.
			 * PROPERTY R2: a failed reload sends nothing to the serving
			 * generation: it was not told to stop, unless it lost a worker
			 * itself. */
			atomic { assert(!g_stopping[serving] || g_lost[serving] || parent_dead) };
ended:
			atomic { reload_running = false };   /* endReload */
next:
			skip
		:: stop_signal -> break
		od
	} unless { parent_dead }
}

/* Service.stop, the end's goroutine: cancel a Start and a Reload in
 * progress and wait for them; close the listener; stop the serving and
 * the retiring generation together; finish with the serving generation's
 * result and the loss that ended the service, if one did. (A survivor of
 * either generation's kill deadline would be added too; lifecycle.pml
 * has those. A retiring generation's lost worker is not added.) */
proctype ServiceStop()
{
	byte gen, old;
	bool st, rl;

	{
		atomic { st = start_running; rl = reload_running };
		if
		:: st -> !start_running                  /* cancelStart(); <-startDone */
		:: else -> skip
		fi;
		if
		:: rl -> !reload_running                 /* cancelReload(); <-reloadDone */
		:: else -> skip
		fi;
		atomic {
			gen = serving; old = retiring;
			if
			:: gen != NONE -> beginStop(gen)
			:: else -> skip
			fi;
			if
			:: old != NONE -> beginStop(old)
			:: else -> skip
			fi
		};
		if
		:: gen != NONE -> g_done[gen]
		:: else -> skip
		fi;
		if
		:: old != NONE -> g_done[old]
		:: else -> skip
		fi;
		atomic { finish(svc_lost || (gen != NONE && g_lost[gen])) }
	} unless { parent_dead }
}

/* The first SIGINT or SIGTERM (watchSignals) closes stop; runSupervised's
 * goroutine then calls Service.Stop, which begins the end. */
proctype Operator()
{
#ifdef STOP
	if
	:: atomic { !parent_dead -> stop_signal = true; end() }
	:: skip                                      /* never asked to stop */
	fi
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
		run ServiceStart(); run Reloader(); run Hangups(); run Operator(); run ParentDeath()
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
ltl stop_ends { [] (end_began -> <> ((svc_done && ALL_ENDED) || parent_dead)) }
ltl orphans_end { [] (parent_dead -> <> ALL_ENDED) }
/* R7: a worker lost from the serving generation ends the service with an
 * error (exit 1), reload or not. */
ltl lost_ends { [] (svc_lost -> <> ((svc_done && svc_err) || parent_dead)) }
