package main

// service.go is the Service's outside: what the front end and a program's
// Control call, each of which sends one event to the lifecycle loop
// (lifecycle.go) and, where it must, waits for its answer; and how a
// generation of worker processes is built for it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
)

// Service runs servery's sequence of generations on one listener: the
// serving one, and during a reload the next one starting or the previous
// one retiring, never more than two with live processes. Its methods only
// send events to run, the goroutine that owns the sequence (lifecycle.go),
// so they are safe for concurrent use and hold no lock.
//
// The Service owns the listener and closes it when the end begins. It
// alone sends the service manager's notifications, from run, so their
// order is the order of its decisions: READY=1 never follows STOPPING=1.
type Service struct {
	ln      net.Listener
	log     *slog.Logger
	workers int
	build   buildFunc
	policy  healPolicy    // what a lost worker means; set before Start
	output  *workerOutput // the parent's writer of its workers' output; nil in direct mode
	// Set before Start, not changed after:
	notify  func(states ...string) // sd_notify; defaults to nothing
	serving func(n int)            // told each generation that begins to serve; defaults to nothing
	keys    *ticketKeys            // the shared session ticket keyring; nil without TLS
	counts  *tally                 // what every worker counted, for the status listener
	// upgrades, when set, is what an upgrade of the parent needs
	// (upgrade.go); nil: none can run.
	upgrades *upgrader

	inbox chan any      // the events, to run; unbuffered, as run is always receiving
	done  chan struct{} // closed by run when the service has ended
	err   error         // how it ended; read after done
	final lifeState     // run's state as it ended; read after done
}

// newService returns a Service whose generations build makes, serving ln
// with workers workers each, and starts run, which returns once the
// service has ended: by Stop, or a Start that failed.
func newService(ln net.Listener, log *slog.Logger, workers int, build buildFunc) *Service {
	v := &Service{ln: ln, log: log, workers: workers, build: build, policy: defaultPolicy, notify: func(...string) {}, counts: newTally(),
		serving: func(int) {}, inbox: make(chan any), done: make(chan struct{})}
	go v.run()
	return v
}

// errStoppedFirst is Start's error when a Stop came before it: a startup
// cancelled before it began, which the front end treats as a clean stop.
var errStoppedFirst = fmt.Errorf("start: the service was stopped first: %w", context.Canceled)

// errStartedTwice is the answer to a second Start.
var errStartedTwice = errors.New("start: service already started")

// errNotServing is Reload's answer when there is no serving generation to
// replace: before Start succeeded, or once the service is ending.
var errNotServing = errors.New("reload: not serving")

// Start starts the first generation and blocks until every worker is
// ready or the generation has been rolled back. It sends READY=1 before
// it returns nil, unless the end began meanwhile. Cancelling ctx rolls
// the startup back. An error means nothing is left running and the
// service has ended. Start is called once.
func (v *Service) Start(ctx context.Context) error {
	r := make(chan error, 1)
	if !v.send(evStart{ctx: ctx, reply: r}) {
		return errStoppedFirst
	}
	err := <-r
	if err != nil && !errors.Is(err, errStartedTwice) {
		// A failed first generation ends the service; one that lost a
		// worker before it was seen ready is still stopping.
		<-v.done
	}
	return err
}

// Reload starts the next generation on the listener and blocks until it
// serves, the previous one retiring with the usual drain and deadlines,
// or until it has been rolled back, leaving the serving one untouched;
// the error says why, naming the worker. A reload asked for while another
// runs, or while an old generation still retires, waits for them; all
// asked for meanwhile are answered by the same one more reload. ctx only
// bounds the wait: the reload goes on.
func (v *Service) Reload(ctx context.Context) error {
	r := make(chan error, 1)
	if !v.send(evReload{reply: r}) {
		return errNotServing
	}
	select {
	case err := <-r:
		return err
	case <-ctx.Done():
		return fmt.Errorf("reload: %w", context.Cause(ctx))
	}
}

// requestReload asks for a reload, as SIGHUP does, without waiting for it.
func (v *Service) requestReload() { v.send(evReload{}) }

// Stop ends the service and blocks until every worker of every generation
// is reaped or the final deadline has passed. A Start or a Reload in
// progress is cancelled, so its generation rolls back; the serving and a
// retiring generation drain. Cancelling ctx skips the rest of every drain,
// even of an end a lost worker began. Stop is safe to call more than once;
// each call returns how the service ended.
func (v *Service) Stop(ctx context.Context) error {
	hurry := context.AfterFunc(ctx, func() { v.send(evHurry{}) })
	defer hurry()
	v.send(evStop{})
	<-v.done
	return v.err
}

// Wait blocks until the service has ended, by Stop, a failed Start or a
// lost worker, and returns how it ended: nil after a clean Stop.
func (v *Service) Wait() error {
	<-v.done
	return v.err
}

// state returns run's state now, or as it was when the service ended.
func (v *Service) state() lifeState {
	r := make(chan lifeState, 1)
	if !v.send(evState{reply: r}) {
		return v.final
	}
	return <-r
}

// pids returns the serving generation's worker pids, for the log.
func (v *Service) pids() []int { return v.state().ServingPIDs }

// leave begins the shutdown delay: not ready from now on, serving on
// until Stop (lifecycle.go, onLeave).
func (v *Service) leave() { v.send(evLeave{}) }

// rotateTicketKeys rotates the ticket keys now, as the daily timer does,
// and returns once run has done it.
func (v *Service) rotateTicketKeys() {
	done := make(chan struct{})
	if v.send(evRotate{done: done}) {
		<-done
	}
}

// buildFunc makes generation n with the session ticket keys as they are
// now; it starts nothing. Once the generation is ready, and until its
// stop begins, it tells the Service through r what befalls its workers.
type buildFunc func(n, workers int, keys [][]byte, r reports) generation

// reports is how a ready generation tells the lifecycle loop about its
// workers.
type reports struct {
	lost    func(error)                            // a worker was lost (a *workerError, for worker processes)
	recycle func(slot, pid int, limit, why string) // the worker pid in slot reached limit and asks to be recycled
	counts  *tally                                 // gets every worker's counters, for the status listener
}

// workerGenerations returns what builds each generation of worker
// processes for the Service: a Supervisor for cfg with the generation's
// number and ticket keys, which reports its workers to the Service, and
// which reads the TLS identity again with readTLS when it is a reload's.
func workerGenerations(cfg supervisorConfig, ln net.Listener, log *slog.Logger, readTLS func() (*tlsIdentity, error)) buildFunc {
	return func(n, workers int, keys [][]byte, r reports) generation {
		c := cfg
		c.Generation, c.Workers = n, workers
		c.Runtime.TicketKeys = keys
		gen := newSupervisor(c, ln, log, r)
		if n > 1 {
			gen.readTLS = readTLS
		}
		return gen
	}
}
