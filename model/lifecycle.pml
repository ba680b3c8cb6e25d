/*
 * lifecycle.pml -- a Promela model of servery's process lifecycle protocol:
 * one parent (Supervisor) and N worker processes sharing one listener.
 *
 * Source of truth: barrier.go, supervisor.go, drain.go, worker.go, main.go.
 * Every step below carries a comment naming the Go function that performs
 * it. Check it with model/check.sh (spin, N = 2 and N = 3).
 *
 * Abstractions
 *  - Time is reduced to ordering. A deadline (startup timeout, drain
 *    deadline, force deadline, final grace) is a choice the waiting process
 *    may take at any moment after the wait began; the processes it waits
 *    for may move before or after it. Cancelling Start and the second
 *    signal (Stop's hurry) only bring a deadline forward, so they are the
 *    same choices.
 *  - Pipes never fill: a write succeeds unless the reader is gone (EPIPE).
 *    A worker's stdin carries at most config then commit, so it is a count
 *    of lines written plus a closed flag; a worker reads EOF once it has
 *    read every line written before the close.
 *  - Supervisor.events (fed by one read and one reap goroutine per worker)
 *    is a bag of pending events counted by kind; the parent may take any
 *    pending one. Go delivers each worker's events in order; the bag allows
 *    every order, so what holds here holds for Go's orders. The barrier and
 *    observe treat failed, a bad line and an exit alike, so they are one
 *    kind, "bad".
 *  - Each worker step has a fault branch: crash (exit, no line), a bad
 *    line or failed (then exit or hang), or hang. A hung worker never moves
 *    again; SIGKILL always ends it; SIGTERM ends it or is ignored (both are
 *    explored). SIGKILL is an `unless` escape: it ends a worker at any step.
 *  - The parent's death (SIGKILL) escapes every parent goroutine at any
 *    step: its pipe ends close, so every worker reads EOF, its writes fail,
 *    and nothing signals the workers any more.
 *
 * Assumptions (each excludes behaviour of the Go code; see README)
 *  A1 The operator's stop request is taken only once spawnAll has returned
 *     (spawn_done). In Go, Stop may run while spawnAll is still appending to
 *     s.procs (unsynchronised); the model does not cover that interleaving.
 *  A2 SIGKILL always ends a worker (no uninterruptible sleep, no failed
 *     kill(2)), so Supervisor.release, which waits for every reap, returns.
 *  A3 After the parent has died nothing can end a hung worker; "every
 *     worker ends" is then claimed only for the workers that did not hang.
 *  Scheduling: every process that can move eventually moves. The model has
 *  no loop that runs without progress, so every run ends in a state where
 *  no process can move, and spin's default search already assumes this.
 */

#ifndef N
#define N 2
#endif

/* ---------------------------------------------------------------- wires */

byte stdin_sent[N];     /* lines the parent wrote to worker's stdin: 1 config, 2 commit */
bool stdin_closed[N];   /* the parent closed its write end, or died                     */
byte q_prepared;        /* Supervisor.events not yet taken: prepared lines              */
byte q_ready;           /*   ready lines                                                */
byte q_done;            /*   done lines                                                 */
byte q_bad;             /*   failed or undecodable lines, exit events (reap)            */
bool termsig[N];        /* SIGTERM sent to worker's process group                       */
bool killsig[N];        /* SIGKILL sent to worker's process group                       */
bool parent_ln = true;  /* the parent's listener (run: net.Listen)                      */

#define EOF(i, got) (stdin_closed[i] && stdin_sent[i] == got)

/* -------------------------------------------------------- parent state */

bool spawn_done;        /* spawnAll returned without error                 */
bool stopping;          /* Supervisor.stopping: beginStop ran              */
bool lost;              /* Supervisor.lost: a worker was lost after ready  */
bool stop_finished;     /* close(s.done)                                   */
bool stop_err;          /* s.err != nil                                    */
bool parent_dead;       /* the parent was killed                           */
bool parent_exited;     /* the parent's main returned                      */

/* --------------------------------------------------------------- ghosts */

byte nspawned;          /* workers started                                 */
byte nprepared;         /* workers that wrote prepared                     */
byte nready;            /* workers that wrote ready                        */
byte nended;            /* workers that exited or were killed              */
byte nsettled;          /* workers that exited or hung                     */
bool ended[N];
bool any_accepting;     /* some worker has begun to accept                 */
bool start_ok;          /* Start returned nil                              */
bool start_failed;      /* Start returned an error                         */
bool rolling_back;      /* Start began its rollback                        */
bool reported_survivor; /* escalate returned survivorsError                */

#define all_ended    (nended == nspawned)
#define all_settled  (nsettled == nspawned)

/* A worker writes a line to stdout: lost (EPIPE) once the parent is gone.
 * Events that monitor would only drop (observe while stopping) are not
 * counted once the parent's goroutine is in monitor and the stop began. */
bool in_monitor;
#define DISCARD    (parent_dead || (in_monitor && stopping))
#define report(q)  if :: !DISCARD -> q++ :: DISCARD -> skip fi
#define DROP_EVENTS  q_prepared = 0; q_ready = 0; q_done = 0; q_bad = 0

/* Supervisor.beginStop: start the stop path once (stopOnce), in its own
 * goroutine (go s.stop). Used inside an atomic step. */
inline beginStop() {
	if
	:: !stopping ->
		stopping = true;
		if
		:: in_monitor -> DROP_EVENTS
		:: else -> skip
		fi;
		run Stopper()
	:: else -> skip
	fi
}


/* ============================================================== worker */

/* The worker process exits; reap's cmd.Wait returns and delivers the exit
 * event. Used inside an atomic step. */
#define EXIT \
	ended[me] = true; nended++; \
	if :: !hung -> nsettled++ :: hung -> skip fi; \
	report(q_bad); \
	hung = false

/* The fault branches a faulty worker has at every step: crash (exit, no
 * line), or hang -- honouring SIGTERM or ignoring it -- possibly after
 * writing a failed or undecodable line. (A failed line followed by an exit
 * looks to the parent like the bare exit: both are "bad" events.) A
 * well-behaved worker has none of them, so where it waits it really waits,
 * and the liveness properties see it. */
#define FAULTS \
	:: atomic { faulty -> EXIT; goto gone } \
	:: atomic { faulty -> hung = true; nsettled++; goto end_hung_term } \
	:: atomic { faulty -> hung = true; nsettled++; goto end_hung_deaf } \
	:: atomic { faulty -> report(q_bad); hung = true; nsettled++; goto end_hung_deaf }

/* faulty: chosen when the worker is spawned */
proctype Worker(byte me; bool faulty)
{
	bool hung;      /* took a hang fault */

	{
		/* prepare: in.next() reads the config line; newServer and
		 * net.FileListener build the runtime and adopt the listener,
		 * accepting nothing; runWorker: out.send(prepared). A SIGTERM in
		 * this stretch is only buffered; awaitCommit sees it. */
		if
		:: atomic { stdin_sent[me] >= 1 && !parent_dead -> nprepared++; report(q_prepared) }
		:: atomic { stdin_sent[me] >= 1 -> report(q_bad); EXIT; goto gone }
		                                  /* build runtime / adopt listener failed:
		                                     runWorker sends failed, returns 1 */
		:: atomic { EOF(me, 0) -> report(q_bad); EXIT; goto gone }
		                                  /* "read config: EOF": failed, return 1 */
		:: atomic { stdin_sent[me] >= 1 && parent_dead -> EXIT; goto gone }
		                                  /* send(prepared) fails (EPIPE): return 1 */
		FAULTS
		fi;

		/* runWorker: awaitCommit */
		if
		:: stdin_sent[me] == 2            /* the commit line */
		:: atomic { EOF(me, 1) -> EXIT; goto gone }
		                                  /* "stdin closed before commit": return 0 */
		:: atomic { termsig[me] -> EXIT; goto gone }
		                                  /* "terminated before commit": return 0 */
		FAULTS
		fi;

		/* runWorker: go srv.serve(ln) begins accepting, then
		 * out.send(ready), whose error is only logged.
		 * PROPERTY 1: no worker accepts before every worker reported prepared. */
		atomic {
			assert(nprepared == N);
			any_accepting = true;
			if
			:: !parent_dead -> nready++; report(q_ready)
			:: parent_dead -> skip
			fi
		};

		/* serveUntilDrain: serve until stdin ends or SIGTERM; then
		 * server.drain (Shutdown bounded by the worker's DrainTimeout, then
		 * close what is left), out.send(done), exit. A fault during the
		 * drain is the same as one just before it. */
end_serve:
		if
		:: atomic { EOF(me, 2) -> report(q_done); EXIT; goto gone }
		                                  /* drainSignal: stdin ended (a stop, or the parent died) */
		:: atomic { termsig[me] -> report(q_done); EXIT; goto gone }
		                                  /* SIGTERM: a drain with hurry already cut */
		FAULTS                            /* serve error, crash, bad line, hang */
		fi;

end_hung_term:
		atomic { termsig[me] -> EXIT; goto gone }   /* a hang that SIGTERM still ends */
end_hung_deaf:
		false                             /* ignores SIGTERM: only SIGKILL ends it */
	} unless { atomic { killsig[me] && !ended[me] -> EXIT } }
	                                      /* SIGKILL ends the worker at any step */
gone:
	skip
}

/* ========================================= parent: Start, monitor, Wait */

proctype Parent()
{
	byte i;
	byte pending;
	bool failed;    /* Start is rolling back */

	{
		/* Supervisor.spawnAll: spawn -- cmd.Start, own session, listener as fd 3 */
		do
		:: i < N ->
			if
			:: atomic { run Worker(i, false); nspawned++; i++ }  /* a well-behaved worker */
			:: atomic { run Worker(i, true); nspawned++; i++ }   /* a faulty worker */
			:: atomic { i = 0; goto rollback }       /* command, pipe or cmd.Start error */
			fi
		:: else -> i = 0; break
		od;

		/* Supervisor.spawnAll: p.send(config) to each worker */
		do
		:: i < N ->
			if
			:: atomic { !ended[i] -> stdin_sent[i] = 1; i++ }
			:: atomic { ended[i] -> i = 0; goto rollback }  /* EPIPE: the worker is gone */
			fi
		:: else -> i = 0; spawn_done = true; break
		od;

		/* barrier: await prepared -- s.await(ctx, stagePrepared) */
		pending = N;  /* the prepared quorum: one from every worker */
		do
		:: pending == 0 -> break
		:: atomic { pending > 0 && q_prepared > 0 -> q_prepared--; pending-- }
		                                  /* advance: started -> prepared */
		:: atomic { pending > 0 && q_ready + q_done + q_bad > 0 -> pending = 0; goto rollback }
		                                  /* advance: failed, exit, bad line */
		:: atomic { pending > 0 -> pending = 0; goto rollback }
		                                  /* ctx.Done: startup timeout, or Start cancelled */
		od;

		/* barrier: p.send(commit) to every worker */
		do
		:: i < N ->
			if
			:: atomic { !ended[i] && !stdin_closed[i] -> stdin_sent[i] = 2; i++ }
			:: atomic { ended[i] || stdin_closed[i] -> i = 0; goto rollback }
			                                  /* EPIPE, or stdin closed by a concurrent Stop */
			fi
		:: else -> i = 0; break
		od;

		/* barrier: await ready -- s.await(ctx, stageReady) */
		pending = N;
		do
		:: pending == 0 -> break
		:: atomic { pending > 0 && q_ready > 0 -> q_ready--; pending-- }
		                                  /* advance: prepared -> ready */
		:: atomic { pending > 0 && q_prepared + q_done + q_bad > 0 -> pending = 0; goto rollback }
		:: atomic { pending > 0 -> pending = 0; goto rollback }
		                                  /* ctx.Done: startup timeout, or Start cancelled */
		od;

		/* Start returns nil.
		 * PROPERTY 2a: Start succeeds only if every worker reported ready. */
		atomic { assert(nready == N); start_ok = true; goto monitor };

rollback:
		/* Start: beginStop(err, 0) -- the stop path with a zero drain budget */
		atomic { failed = true; rolling_back = true; beginStop() };

monitor:
		/* Supervisor.monitor (go s.monitor()), while this goroutine waits on
		 * s.done: Start's <-s.done after a rollback, or runSupervised's Wait.
		 * Once the stop has begun observe drops every event (it keeps done's
		 * counters, which the model does not track), so the model drops them
		 * all at once (DISCARD). */
		atomic {
			in_monitor = true;
			if
			:: stopping -> DROP_EVENTS
			:: else -> skip
			fi
		};
end_monitor:
		do
		:: atomic { q_done > 0 -> q_done-- }  /* observe: setStats */
		:: atomic { q_prepared + q_ready + q_bad > 0 ->
			lost = true; beginStop() }        /* observe: a worker lost after ready;
			                                     beginStop(lost, DrainTimeout) */
		:: stop_finished -> break             /* <-s.done */
		od;

		if
		:: failed ->
			/* Start returns its error; run exits 1.
			 * PROPERTY 2b: a failed Start leaves no worker behind. */
			atomic { assert(all_ended); start_failed = true; parent_exited = true }
		:: else ->
			/* Wait returns s.err; runSupervised exits 1 on it. A lost worker
			 * always makes the generation's result an error. */
			atomic { assert(!lost || stop_err); parent_exited = true }
		fi                                    /* main returns */
	} unless { atomic { parent_dead -> i = 0; pending = 0; failed = false } }
}

/* ====================== parent: the stop path (the Supervisor.stop goroutine) */

/* escalate: signalSurvivors -- sig to every worker not yet reaped */
#define SIGNAL_SURVIVORS(sig) \
	do \
	:: i < nspawned -> sig[i] = !ended[i]; i++ \
	:: else -> i = 0; break \
	od

proctype Stopper()
{
	byte i;

	{
		/* escalate: s.ln.Close(), then p.stdin.Close() for every worker */
		d_step {
			parent_ln = false;
			do
			:: i < N -> stdin_closed[i] = true; i++
			:: else -> i = 0; break
			od
		};

		/* escalate: waitReaped until the drain deadline (at once for a
		 * rollback's zero budget; a closed s.hurry ends it early), then
		 * SIGTERM at drain deadline */
		if
		:: all_ended -> goto swept
		:: d_step { SIGNAL_SURVIVORS(termsig) }
		fi;

		/* escalate: waitReaped until the force deadline, then SIGKILL at
		 * force deadline */
		if
		:: all_ended -> goto swept
		:: d_step { SIGNAL_SURVIVORS(killsig) }
		fi;

		/* escalate: waitReaped for finalGrace; then survivorsError names
		 * every worker still alive */
		if
		:: all_ended
		:: reported_survivor = true
		fi;

swept:
		/* escalate returns (after sweep when every worker was reaped).
		 * PROPERTY 3b: a worker alive when escalate returns is reported. */
		assert(all_ended || reported_survivor);

		/* release: close the pipes, readers.Wait waits for every reap;
		 * stop: s.err = errors.Join(s.lost, err); close(s.done) */
		atomic {
			all_ended ->
			stop_err = lost || reported_survivor;
			assert(!reported_survivor || stop_err);
			stop_finished = true
		}
	} unless { atomic { parent_dead -> i = 0 } }
}

/* =================================================== the environment */

/* main.watchSignals and runSupervised: the first SIGINT or SIGTERM calls
 * cancelStart() and sup.Stop(hurry), that is beginStop(nil, DrainTimeout).
 * Assumption A1: taken only once spawnAll has returned. */
proctype Operator()
{
	if
	:: atomic { spawn_done && !parent_dead && !parent_exited -> beginStop() }
	:: skip                                   /* never asked to stop */
	fi
}

/* SIGKILL to the parent: the kernel closes its pipe ends; workers read
 * EOF, their writes fail, and nothing signals them any more. */
proctype ParentDeath()
{
	byte i;

	if
	:: d_step {
		!parent_exited ->
		parent_dead = true;
		parent_ln = false;
		do
		:: i < N -> stdin_closed[i] = true; i++
		:: else -> i = 0; break
		od;
		DROP_EVENTS;
		/* what only the dead parent knew is gone with it */
		spawn_done = false; stopping = false; lost = false;
		stop_finished = false; stop_err = false; in_monitor = false;
		start_ok = false; start_failed = false; rolling_back = false;
		reported_survivor = false
	   }
	:: skip
	fi
}

init {
	atomic { run Parent(); run Operator(); run ParentDeath() }
}

/* ============================================================ properties
 * Each ltl formula is checked on its own (pan -a -N name); the assertions
 * above and the absence of invalid end states (deadlocks) are checked by a
 * plain safety search.                                                    */

/* 1. No worker accepts a connection before every worker has reported
 *    prepared. */
ltl no_early_accept { [] (any_accepting -> nprepared == N) }

/* 2. Start reports success only if every worker reported ready; */
ltl start_ok_all_ready { [] (start_ok -> nready == N) }

/*    Start always comes to a decision, unless the parent dies; */
ltl start_decides { <> (start_ok || start_failed || parent_dead) }

/*    a rollback always finishes, unless the parent dies, and Start then
 *    returns only once every worker has ended (assertion 2b). */
ltl rollback_ends { [] (rolling_back -> <> (start_failed || parent_dead)) }

/* 3. After a stop every worker eventually ends, unless the parent dies
 *    first; after the parent dies every worker that did not hang ends
 *    (assumption A3). A worker alive past the final deadline is reported
 *    (assertion 3b, and the assertion in stop). */
ltl stop_ends   { [] (stopping -> <> (all_ended || parent_dead)) }
ltl orphans_end { [] (parent_dead -> <> all_settled) }
