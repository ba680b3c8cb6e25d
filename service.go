package main

// service.go is the layer above the generation: it owns the listener, runs
// the sequence of generations on it, and tells the service manager what
// state servery is in. A generation (Supervisor) stays fixed; the Service
// decides when one starts and when it ends. Replacing one is reload.go.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Service runs servery's sequence of worker generations on one listener:
// the serving one, and during a reload the next one starting or the
// previous one retiring, never more than two with live processes.
//
// The Service owns the listener and closes it once, when the service ends;
// a retiring generation leaves it open for the next.
// It alone sends service-manager notifications, serialized by its lock,
// so READY=1 can never follow STOPPING=1: READY=1 is sent inside Start,
// only if no stop has begun, and every stop sends STOPPING=1 first.
type Service struct {
	cfg    supervisorConfig
	ln     net.Listener
	log    *slog.Logger
	notify func(states ...string) // sd_notify; defaults to nothing
	// keys is the session ticket keyring every generation shares, or nil
	// without TLS; the Service rotates it every ticketKeyRotation.
	keys *ticketKeys
	// newGeneration builds the Supervisor for a generation. Tests swap it
	// to start test-binary workers.
	newGeneration func(cfg supervisorConfig, ln net.Listener, log *slog.Logger) *Supervisor
	// reloadTLS returns the TLS identity a reload's generation serves: the
	// certificate files read again, or the same self-signed identity. nil:
	// the same identity.
	reloadTLS func() (*tlsIdentity, error)

	reloadMu sync.Mutex // one reload at a time; taken before mu

	mu           sync.Mutex
	started      bool
	stopping     bool // a stop or a lost worker has begun the end
	stopAsked    bool // Stop has begun the end
	generations  int
	serving      *Supervisor        // the ready generation, or nil
	retiring     *Supervisor        // the previous generation while it drains, or nil
	cancelStart  context.CancelFunc // cuts a Start in progress short
	startDone    chan struct{}      // closed when Start returns
	cancelReload context.CancelFunc // cuts a Reload's new generation short
	reloadDone   chan struct{}      // closed when that Reload returns

	stopOnce   sync.Once
	finishOnce sync.Once
	closeOnce  sync.Once
	done       chan struct{} // closed when the service has ended
	err        error         // how it ended; read after done
}

// newService returns a Service for cfg on ln. It starts nothing.
func newService(cfg supervisorConfig, ln net.Listener, log *slog.Logger) *Service {
	return &Service{
		cfg:           cfg,
		ln:            ln,
		log:           log,
		notify:        func(...string) {},
		newGeneration: newSupervisor,
		done:          make(chan struct{}),
	}
}

// Start starts the first generation and blocks until every worker is
// ready or the generation has been rolled back. It sends READY=1 before
// it returns nil, unless a stop began meanwhile. An error means nothing is
// left running and the service has ended. Start is called once.
func (v *Service) Start(ctx context.Context) error {
	v.mu.Lock()
	if v.started || v.stopping {
		v.mu.Unlock()
		return errors.New("start: service already started or stopped")
	}
	v.started = true
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v.cancelStart, v.startDone = cancel, make(chan struct{})
	gen := v.nextGeneration()
	v.mu.Unlock()
	defer close(v.startDone)

	if err := gen.Start(ctx); err != nil {
		v.finish(err)
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.serving = gen
	if v.stopping {
		return nil // the Stop waiting for this Start stops gen
	}
	v.notify("READY=1", fmt.Sprintf("STATUS=%d workers ready", v.cfg.Workers))
	go v.watch(gen)
	if v.keys != nil {
		go v.rotateTicketKeysEvery(ticketKeyRotation)
	}
	return nil
}

// rotateTicketKeysEvery rotates the ticket keys every period until the
// service ends.
func (v *Service) rotateTicketKeysEvery(period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			v.rotateTicketKeys()
		case <-v.done:
			return
		}
	}
}

// rotateTicketKeys puts a fresh ticket key first, keeps the previous one
// for resumption, and sends both to the serving generation's workers. A
// generation started later gets them in its config.
func (v *Service) rotateTicketKeys() {
	if err := v.keys.rotate(); err != nil {
		v.log.Error("ticket key rotation", "err", err)
		return
	}
	v.mu.Lock()
	gen := v.serving
	v.mu.Unlock()
	if gen != nil {
		gen.sendTicketKeys(v.keys.current())
	}
	v.log.Info("ticket keys rotated")
}

// nextGeneration numbers and builds the next generation; v.mu is held.
func (v *Service) nextGeneration() *Supervisor {
	v.generations++
	cfg := v.cfg
	cfg.Generation = v.generations
	if v.keys != nil {
		cfg.Runtime.TicketKeys = v.keys.current()
	}
	gen := v.newGeneration(cfg, v.ln, v.log)
	gen.onLost = func(err error) { v.lost(gen, err) }
	return gen
}

// lost is called by a ready generation when one of its workers is lost.
// A worker lost from the serving generation ends the service, with exit
// status 1 in the front end, and cuts a reload short; one of a retiring
// generation is not lost, since that generation is on its way out.
func (v *Service) lost(gen *Supervisor, err error) {
	v.mu.Lock()
	if gen != v.serving {
		v.mu.Unlock()
		return
	}
	if !v.stopping {
		v.stopping = true
		v.notify("STATUS="+err.Error(), "STOPPING=1")
	}
	if v.cancelReload != nil {
		v.cancelReload()
	}
	v.mu.Unlock()
	v.closeListener()
}

// watch ends the service when gen ends on its own while it serves, after a
// lost worker, once a reload in progress and a retiring generation are
// gone too. A generation that ends because it retired, or because Stop
// stopped it, ends nothing here.
func (v *Service) watch(gen *Supervisor) {
	err := gen.Wait()
	v.mu.Lock()
	mine := gen == v.serving && !v.stopAsked
	reloadDone, old := v.reloadDone, v.retiring
	v.mu.Unlock()
	if !mine {
		return
	}
	if reloadDone != nil {
		<-reloadDone
	}
	if old != nil {
		old.Wait()
	}
	v.finish(err)
}

// Stop ends the service and blocks until every worker is reaped or the
// final deadline has passed. A Start in progress is cancelled, so its
// generation rolls back; a ready generation drains. Cancelling ctx skips
// the rest of the drain. Stop is safe to call more than once and from
// several goroutines; each call returns how the service ended.
func (v *Service) Stop(ctx context.Context) error {
	v.stopOnce.Do(func() { go v.stop(ctx) })
	<-v.done
	return v.err
}

// stop is the body of the first Stop.
func (v *Service) stop(ctx context.Context) {
	v.mu.Lock()
	if !v.stopping {
		v.stopping = true
		v.notify("STOPPING=1")
	}
	v.stopAsked = true
	cancel, startDone := v.cancelStart, v.startDone
	cancelReload, reloadDone := v.cancelReload, v.reloadDone
	v.mu.Unlock()
	if cancel != nil {
		cancel()
		<-startDone
	}
	// A reload's new generation rolls back first; then the serving one
	// stops, and a retiring one finishes its retirement.
	if cancelReload != nil {
		cancelReload()
		<-reloadDone
	}
	// Close the parent's copy first: once every worker has closed its own,
	// the kernel refuses new connections instead of queueing them for a
	// listener nobody will accept on.
	v.closeListener()
	v.mu.Lock()
	gen, old := v.serving, v.retiring
	v.mu.Unlock()
	var oldErr error
	var retired sync.WaitGroup
	if old != nil {
		retired.Go(func() { oldErr = old.Stop(ctx) })
	}
	var err error
	if gen != nil {
		err = gen.Stop(ctx)
	}
	retired.Wait()
	v.finish(errors.Join(err, oldErr))
}

// Wait blocks until the service has ended, by Stop, a failed Start or a
// lost worker, and returns how it ended: nil after a clean Stop.
func (v *Service) Wait() error {
	<-v.done
	return v.err
}

// finish records how the service ended and releases the listener; only
// the first call counts.
func (v *Service) finish(err error) {
	v.finishOnce.Do(func() {
		v.closeListener()
		v.err = err
		close(v.done)
	})
}

func (v *Service) closeListener() {
	v.closeOnce.Do(func() { v.ln.Close() })
}

// pids returns the serving generation's worker pids, for the log.
func (v *Service) pids() []int {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.serving == nil {
		return nil
	}
	return v.serving.pids()
}
