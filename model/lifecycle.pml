/*
 * lifecycle.pml -- a Promela model of servery's process lifecycle protocol:
 * one parent (Supervisor) and N worker processes sharing one listener.
 *
 * Source of truth: barrier.go, supervisor.go, drain.go, worker.go, service.go, command.go.
 * Each step carries a comment naming the Go function that performs it.
 * Checked by model/check.sh (spin; N = 2 and N = 3).
 *
 * Abstractions
 *  - Time is reduced to ordering. A deadline (startup timeout, drain
 *    deadline, force deadline, final grace) is a choice the waiting process
 *    may take at any moment after its wait began; what it waits for may
 *    happen before or after. Cancelling Start and Stop's hurry (a second
 *    signal) only bring a deadline forward, so they are the same choices.
 *  - Pipes never fill: a write succeeds unless its reader is gone (EPIPE).
 *    A worker's stdin carries at most config then commit, so it is a count
 *    of lines written plus a closed flag; the worker reads EOF once it has
 *    read every line written before the close.
 *  - Supervisor.events (fed by one read and one reap goroutine per worker)
 *    is a bag of pending events counted by kind; the parent may take any
 *    pending one. Go delivers each worker's events in order; the bag allows
 *    every order, so what holds here holds for Go's orders. The barrier and
 *    observe treat failed, an undecodable line and an exit alike: one kind,
 *    "bad". A done line is not an event (read keeps the counters itself).
 *  - A worker is spawned well-behaved or faulty. A faulty worker has, at
 *    every step, fault branches: crash (exit, no line), or hang -- honouring
 *    SIGTERM or ignoring it -- possibly after writing a failed or bad line.
 *    A hung worker never moves again. SIGKILL ends any worker at any step
 *    (an `unless` escape).
 *  - The parent's death (SIGKILL) ends every parent goroutine at any step:
 *    the kernel closes its pipe ends, so every worker reads EOF and its
 *    writes fail, and nothing signals the workers any more.
 *  - Scheduling: every process that can move eventually moves. The model
 *    has no cycles (check.sh checks this), so every run ends in a state
 *    where nothing can move, and spin's plain search already means this.
 *
 * Assumptions (each excludes behaviour of the Go code; see DESIGN.md)
 *  A1 Stop's look at s.startDone and its decision to stop are one step. In
 *     Go, Stop sets s.stopping under the same lock when no Start has begun,
 *     so a later Start refuses (this assumption found the race it closes).
 *  A2 SIGKILL always ends a worker, eventually (no uninterruptible sleep,
 *     no failed kill(2)).
 *  A3 After the parent has died nothing can end a hung worker, so "every
 *     worker ends" is then claimed only for the workers that did not hang.
 */

#ifndef N
#define N 2
#endif

/* ---------------------------------------------------------------- wires */

byte stdin_sent[N];     /* lines the parent wrote to the worker's stdin: 1 config, 2 commit */
bool stdin_closed[N];   /* the parent closed its write end, or died                         */
byte q_prepared;        /* Supervisor.events not yet taken: prepared lines                  */
byte q_ready;           /*   ready lines                                                    */
byte q_bad;             /*   failed or undecodable lines, exits (reap)                      */
bool termsig[N];        /* SIGTERM sent to the worker's process group                       */
bool killsig[N];        /* SIGKILL sent to the worker's process group                       */
bool parent_ln = true;  /* the parent's listener, bound by run before anything else         */

#define EOF(i, got) (stdin_closed[i] && stdin_sent[i] == got)

/* -------------------------------------------------------- parent state */

bool start_began;       /* Start took s.startDone                          */
bool stopping;          /* Supervisor.stopping: stopWith ran              */
bool lost;              /* Supervisor.cause: a worker lost after ready     */
bool in_monitor;        /* monitor reads the events                        */
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
bool reported_survivor; /* escalate returned survivorsError                */

#define all_ended    (nended == nspawned)
#define all_settled  (nsettled == nspawned)

/* A worker writes a line to stdout. It is lost (EPIPE) once the parent is
 * gone. Once monitor reads the events and the stop has begun, observe
 * drops every event, so the model does not count them (DISCARD). */
#define DISCARD      (parent_dead || (in_monitor && stopping))
#define report(q)    if :: !DISCARD -> q++ :: DISCARD -> skip fi
#define DROP_EVENTS  q_prepared = 0; q_ready = 0; q_bad = 0

/* Supervisor.stopWith: the stop path starts once (stopOnce), in its own
 * goroutine (go s.stop). Used inside an atomic step. */
inline stopWith() {
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
 * event. Used inside an atomic step. What only the dead process could use
 * (its pipe's content, signals sent to it, its fault plan) is cleared, so
 * that states differing only there are one state. */
#define EXIT \
	ended[me] = true; nended++; \
	if :: !hung -> nsettled++ :: hung -> skip fi; \
	report(q_bad); \
	hung = false; faulty = false; \
	stdin_sent[me] = 0; termsig[me] = false; killsig[me] = false

/* The worker stops moving for good. */
#define HANG  hung = true; nsettled++; faulty = false

/* The fault branches a faulty worker has at every step. (A failed line
 * followed by an exit looks to the parent like the bare exit: both are
 * "bad".) A well-behaved worker has none, so where it waits it really
 * waits, and the liveness properties see it. */
#define FAULTS \
	:: atomic { faulty -> EXIT; goto gone } \
	:: atomic { faulty -> HANG; goto end_hung_term } \
	:: atomic { faulty -> HANG; goto end_hung_deaf } \
	:: atomic { faulty -> report(q_bad); HANG; goto end_hung_deaf }

proctype Worker(byte me; bool faulty)
{
	bool hung;      /* took a hang fault */

	{
		/* prepare: in.next() reads the config line; newServer and
		 * net.FileListener build the runtime and adopt the listener,
		 * accepting nothing; runWorker: out.send(prepared). Until it
		 * serves, exitOnTermUntilServing ends it on SIGTERM at any point. */
		if
		:: atomic { stdin_sent[me] >= 1 && !parent_dead -> nprepared++; report(q_prepared) }
		:: atomic { stdin_sent[me] >= 1 -> report(q_bad); EXIT; goto gone }
		                                  /* build runtime / adopt listener failed:
		                                     runWorker sends failed, returns 1 */
		:: atomic { EOF(me, 0) -> report(q_bad); EXIT; goto gone }
		                                  /* prepare: "read config: EOF"; failed, 1 */
		:: atomic { stdin_sent[me] >= 1 && parent_dead -> EXIT; goto gone }
		                                  /* send(prepared) fails (EPIPE): returns 1 */
		:: atomic { termsig[me] -> EXIT; goto gone }
		                                  /* exitOnTermUntilServing: SIGTERM, exit 1 */
		FAULTS
		fi;

		/* runWorker: awaitCommit */
		if
		:: stdin_sent[me] == 2            /* the commit line */
		:: atomic { EOF(me, 1) -> EXIT; goto gone }
		                                  /* "stdin closed before commit": returns 0 */
		:: atomic { termsig[me] -> EXIT; goto gone }
		                                  /* exitOnTermUntilServing: SIGTERM, exit 1 */
		FAULTS
		fi;

		/* runWorker: go srv.serve(ln) begins accepting; out.send(ready),
		 * whose error is only logged.
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
		 * server.drain (Shutdown, bounded by the worker's DrainTimeout, then
		 * close what is left), out.send(done) -- not an event -- and exit.
		 * A fault during the drain is the same as one just before it. */
end_serve:
		if
		:: atomic { EOF(me, 2) -> EXIT; goto gone }
		                                  /* drainSignal: stdin ended (a stop, or the parent died) */
		:: atomic { termsig[me] -> EXIT; goto gone }
		                                  /* SIGTERM: a drain with hurry already cut */
		FAULTS                            /* serve error, crash, bad line, hang */
		fi;

end_hung_term:
		atomic { termsig[me] -> EXIT; goto gone }  /* a hang that SIGTERM still ends */
end_hung_deaf:
		false                             /* ignores SIGTERM: only SIGKILL ends it */
	} unless { atomic { killsig[me] && !ended[me] -> EXIT } }
	                                      /* SIGKILL ends the worker at any step */
gone:
	skip
}

/* ======================================= parent: Start, then monitor/Wait */

proctype Parent()
{
	byte i;
	byte pending;
	bool failed;    /* Start rolls back */

	{
		/* Start: under s.mu, refuse if a Stop came first, else take s.startDone */
		if
		:: atomic { !stopping -> start_began = true }
		:: atomic { stopping -> start_failed = true; goto finish }
		                                  /* "supervisor already started or stopped" */
		fi;

		/* Supervisor.spawnAll: listenerFile dups the listener; it fails once
		 * the listener is closed */
		if
		:: parent_ln
		:: atomic { !parent_ln -> goto rollback }
		fi;

		/* Supervisor.spawnAll: spawn -- cmd.Start, own session, listener as fd 3 */
		do
		:: i < N ->
			if
			:: atomic { run Worker(i, false); nspawned++; i++ }  /* a well-behaved worker */
			:: atomic { run Worker(i, true); nspawned++; i++ }   /* a faulty worker */
			:: atomic { i = 0; goto rollback }   /* command, pipe or cmd.Start error */
			fi
		:: i == N -> i = 0; break     /* the dup taken before spawning serves them all */
		od;

		/* barrier: s.sendBy(config) to each worker */
		do
		:: i < N ->
			if
			:: atomic { !ended[i] -> stdin_sent[i] = 1; i++ }
			:: atomic { ended[i] -> i++ }  /* EPIPE: logged; await sees the exit */
			fi
		:: else -> i = 0; break
		od;

		/* barrier: await prepared -- s.await(ctx, stagePrepared) */
		pending = N;  /* the prepared quorum: one from every worker */
		do
		:: pending == 0 -> break
		:: atomic { pending > 0 && q_prepared > 0 -> q_prepared--; pending-- }
		                                  /* advance: started -> prepared */
		:: atomic { pending > 0 && q_ready + q_bad > 0 -> pending = 0; goto rollback }
		                                  /* advance: failed, an exit, a bad line */
		:: atomic { pending > 0 -> pending = 0; goto rollback }
		                                  /* ctx.Done: startup timeout, or Start cancelled */
		od;

		/* barrier: s.sendBy(commit) to every worker */
		do
		:: i < N ->
			if
			:: atomic { !ended[i] -> stdin_sent[i] = 2; i++ }
			:: atomic { ended[i] -> i++ }  /* EPIPE: logged; await sees the exit */
			fi
		:: else -> i = 0; break
		od;

		/* barrier: await ready -- s.await(ctx, stageReady) */
		pending = N;
		do
		:: pending == 0 -> break
		:: atomic { pending > 0 && q_ready > 0 -> q_ready--; pending-- }
		                                  /* advance: prepared -> ready */
		:: atomic { pending > 0 && q_prepared + q_bad > 0 -> pending = 0; goto rollback }
		:: atomic { pending > 0 -> pending = 0; goto rollback }
		                                  /* ctx.Done: startup timeout, or Start cancelled */
		od;

		/* Start returns nil (go s.monitor() first).
		 * PROPERTY 2a: Start succeeds only if every worker reported ready. */
		atomic { assert(nready == N); start_ok = true; goto monitor };

rollback:
		/* Start: stopWith(err, drain) -- the stop path, with a zero drain
		 * budget before commit and DrainTimeout after it (committed workers
		 * may be answering). Time is ordering here, so both are the same
		 * choices: the drain deadline may come at any moment. */
		atomic { failed = true; stopWith() };

monitor:
		/* Supervisor.monitor (go s.monitor()), while this goroutine waits on
		 * s.done: Start's <-s.done after a rollback, or runService's
		 * sup.Wait(). Once the stop has begun, observe drops every event. */
		atomic {
			in_monitor = true;
			if
			:: stopping -> DROP_EVENTS
			:: else -> skip
			fi
		};
end_monitor:
		do
		:: atomic { q_prepared + q_ready + q_bad > 0 ->
			lost = true; stopWith() }        /* observe: a worker lost after ready;
			                                     stopWith(lost, DrainTimeout) */
		:: stop_finished -> break             /* <-s.done */
		od;

		if
		:: failed ->
			/* Start returns its error; runService returns exitFailure.
			 * PROPERTY 2b: a failed Start leaves no worker behind, except a
			 * survivor of the kill deadline, which s.err names. (Start
			 * returns its own error, not s.err: see DESIGN.md.) */
			atomic { assert(all_ended || reported_survivor); start_failed = true }
		:: else ->
			/* sup.Wait returns s.err; runService exits 1 on it. A lost
			 * worker always makes the generation's result an error. */
			assert(!lost || stop_err)
		fi;
finish:
		parent_exited = true                  /* main returns */
	} unless { atomic { parent_dead -> i = 0; pending = 0; failed = false } }
}

/* ========================= parent: the stop path (the Supervisor.stop goroutine) */

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
		 * rollback before commit; a closed s.hurry ends it early); then
		 * SIGTERM at drain deadline */
		if
		:: all_ended -> goto escalated
		:: d_step { SIGNAL_SURVIVORS(termsig) }
		fi;

		/* escalate: waitReaped until the force deadline; then SIGKILL at
		 * force deadline */
		if
		:: all_ended -> goto escalated
		:: d_step { SIGNAL_SURVIVORS(killsig) }
		fi;

		/* escalate: waitReaped for finalGrace; survivorsError names every
		 * worker still alive. (The deadline may also win the race against
		 * the last exit; see DESIGN.md.) */
		if
		:: all_ended
		:: reported_survivor = true
		fi;

escalated:
		/* escalate returns (sweep, when every worker was reaped).
		 * release: close the pipes and wait for the readers -- a reader ends
		 * at EOF, or when its pipe is closed after at most a second; reap is
		 * not waited for. stop: s.err = errors.Join(s.lost, err);
		 * close(s.done).
		 * PROPERTY 3b: a worker alive when the stop finishes is reported in
		 * s.err. */
		atomic {
			stop_err = lost || reported_survivor;
			assert(all_ended || (reported_survivor && stop_err));
			stop_finished = true
		}
	} unless { atomic { parent_dead -> i = 0 } }
}

/* =================================================== the environment */

/* main.watchSignals and runService: the first SIGINT or SIGTERM calls
 * cancelStart() -- a deadline of the barrier, see above -- and then
 * sup.Stop(hurry): Stop waits until a Start in progress has returned, then
 * stopWith(nil, DrainTimeout). Assumption A1: Stop's look at s.startDone
 * and its stopWith are one step when no Start has begun. */
proctype Operator()
{
	if
	:: atomic { !parent_dead && !parent_exited && !start_began -> stopWith() }
	:: atomic { !parent_dead && !parent_exited && start_began ->
		/* Stop: <-startDone, then stopWith */
		(start_ok || start_failed || parent_dead) ->
		if
		:: !parent_dead && !parent_exited -> stopWith()
		:: else -> skip
		fi }
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
		start_began = false; stopping = false; lost = false;
		in_monitor = false; stop_finished = false; stop_err = false;
		start_ok = false; start_failed = false; reported_survivor = false
	   }
	:: skip
	fi
}

init {
	atomic { run Parent(); run Operator(); run ParentDeath() }
}

/* ============================================================ properties
 * Each ltl formula is checked on its own (pan -N name); the assertions
 * above and the absence of invalid end states (deadlocks) are checked by a
 * plain safety search.                                                    */

/* 1. No worker accepts a connection before every worker has reported
 *    prepared. */
ltl no_early_accept { [] (any_accepting -> nprepared == N) }

/* 2. Start reports success only if every worker reported ready; */
ltl start_ok_all_ready { [] (start_ok -> nready == N) }

/*    Start always returns, unless the parent dies (and a failed Start has
 *    ended every worker, or reports the survivor: assertion 2b). */
ltl start_returns { <> (start_ok || start_failed || parent_dead) }

/* 3. After a stop every worker eventually ends, unless the parent dies
 *    first; after the parent dies every worker that did not hang ends
 *    (assumption A3). A worker still alive when the stop finishes is
 *    reported (assertion 3b). */
ltl stop_ends   { [] (stopping -> <> (all_ended || parent_dead)) }
ltl orphans_end { [] (parent_dead -> <> all_settled) }

/* 4. No deadlock: the safety search reports any state where nothing can
 *    move unless every process is done or resting at an end_ label
 *    (a worker serving or hung, the parent monitoring). */

/* 5. A worker lost after ready (it exited, or wrote failed or a bad line)
 *    makes the parent stop the generation, unless the parent dies first;
 *    Wait then returns an error (assertion in Parent). */
ltl lost_worker_stops { [] ((start_ok && q_bad > 0) -> <> (stopping || parent_dead)) }
