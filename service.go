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
// so READY=1 can never follow STOPPING=1: READY=1 is sent only if the end
// has not begun, and the end sends STOPPING=1 first.
//
// The service ends one way, whatever begins it (Stop, or a worker lost
// from the serving generation): one goroutine (stop) cuts a Start or a
// Reload in progress short, waits for it, and stops the serving and the
// retiring generation together. model/reload.pml checks this layer.
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
	stopping     bool  // the end has begun: Stop, or a lost worker
	lostErr      error // the worker lost from the serving generation, if that began the end
	generations  int
	serving      *Supervisor        // the ready generation, or nil
	retiring     *Supervisor        // the previous generation while it drains, or nil
	cancelStart  context.CancelFunc // cuts a Start in progress short
	startDone    chan struct{}      // closed when Start returns
	cancelReload context.CancelFunc // cuts a Reload's new generation short
	reloadDone   chan struct{}      // closed when that Reload returns

	endOnce    sync.Once
	hurry      context.Context    // cancelled to skip the rest of every drain
	cut        context.CancelFunc // cancels hurry
	finishOnce sync.Once
	closeOnce  sync.Once
	done       chan struct{} // closed when the service has ended
	err        error         // how it ended; read after done
}

// newService returns a Service for cfg on ln. It starts nothing.
func newService(cfg supervisorConfig, ln net.Listener, log *slog.Logger) *Service {
	hurry, cut := context.WithCancel(context.Background())
	return &Service{
		cfg:           cfg,
		ln:            ln,
		log:           log,
		notify:        func(...string) {},
		newGeneration: newSupervisor,
		hurry:         hurry,
		cut:           cut,
		done:          make(chan struct{}),
	}
}

// errStoppedFirst is Start's error when a Stop came before it: a startup
// cancelled before it began, which the front end treats as a clean stop.
var errStoppedFirst = fmt.Errorf("start: the service was stopped first: %w", context.Canceled)

// Start starts the first generation and blocks until every worker is
// ready or the generation has been rolled back. It sends READY=1 before
// it returns nil, unless a stop began meanwhile. An error means nothing is
// left running and the service has ended. Start is called once.
func (v *Service) Start(ctx context.Context) error {
	v.mu.Lock()
	switch {
	case v.started:
		v.mu.Unlock()
		return errors.New("start: service already started")
	case v.stopping:
		v.mu.Unlock()
		return errStoppedFirst
	}
	v.started = true
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v.cancelStart, v.startDone = cancel, make(chan struct{})
	gen := v.nextGeneration()
	v.mu.Unlock()
	defer close(v.startDone)

	err := gen.Start(ctx)
	if err == nil {
		err = v.serve(gen)
	}
	if err != nil {
		gen.Wait() // at once after a rollback; a lost worker's stop is under way
		v.finish(err)
		return err
	}
	return nil
}

// serve makes the first generation, ready, the serving one and sends
// READY=1, unless the end has begun (the stop, waiting for Start, then
// stops it). A worker lost since ready fails it instead: a generation
// that never served cannot end the service as a lost one, so Start
// reports it.
func (v *Service) serve(gen *Supervisor) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := gen.lostErr(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	v.serving = gen
	if v.stopping {
		return nil
	}
	v.notify("READY=1", fmt.Sprintf("STATUS=%d workers ready", v.cfg.Workers))
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
// generation started later gets them in its config, and again when it
// begins to serve (promote), so a rotation during its startup is not
// lost. Under v.mu, so the two sends cannot cross.
func (v *Service) rotateTicketKeys() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.keys.rotate(); err != nil {
		v.log.Error("ticket key rotation", "err", err)
		return
	}
	if v.serving != nil {
		v.serving.sendTicketKeys(v.keys.current())
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

// lost is called by a ready generation when one of its workers is lost,
// after that generation has begun to stop. A worker lost from the serving
// generation ends the service, with exit status 1 in the front end. One
// of a retiring generation is not lost: that generation is on its way
// out. One of a generation not yet serving fails its Start or Reload,
// which look for it before they serve it (serve, promote), under the same
// lock, so every loss is seen by exactly one of the three.
func (v *Service) lost(gen *Supervisor, err error) {
	v.mu.Lock()
	if gen != v.serving {
		v.mu.Unlock()
		return
	}
	if v.lostErr == nil {
		v.lostErr = err
	}
	v.mu.Unlock()
	v.end(err)
}

// end begins the end of the service, once: STOPPING=1 (with the lost
// worker as STATUS, if one ended it), then the stop goroutine.
func (v *Service) end(lost error) {
	v.mu.Lock()
	if !v.stopping {
		v.stopping = true
		status := ""
		if lost != nil {
			status = "STATUS=" + lost.Error()
		}
		v.notify(status, "STOPPING=1")
	}
	v.mu.Unlock()
	v.endOnce.Do(func() { go v.stop() })
}

// Stop ends the service and blocks until every worker is reaped or the
// final deadline has passed. A Start or a Reload in progress is
// cancelled, so its new generation rolls back; the serving and a retiring
// generation drain. Cancelling ctx skips the rest of every drain, even of
// an end a lost worker began. Stop is safe to call more than once and
// from several goroutines; each call returns how the service ended.
func (v *Service) Stop(ctx context.Context) error {
	unhook := context.AfterFunc(ctx, v.cut)
	defer unhook()
	v.end(nil)
	<-v.done
	return v.err
}

// stop is the end's goroutine. It ends with the serving generation's
// result, the loss that began the end, and a survivor of the retiring
// generation, if any: a retiring generation's lost worker is not the
// service's failure.
func (v *Service) stop() {
	v.mu.Lock()
	cancel, startDone := v.cancelStart, v.startDone
	cancelReload, reloadDone := v.cancelReload, v.reloadDone
	v.mu.Unlock()
	if cancel != nil {
		cancel()
		<-startDone
	}
	// A reload's new generation rolls back (or, ready already, becomes
	// the serving one); then the serving and a retiring one stop.
	if cancelReload != nil {
		cancelReload()
		<-reloadDone
	}
	// Close the parent's copy first: once every worker has closed its own,
	// the kernel refuses new connections instead of queueing them for a
	// listener nobody will accept on.
	v.closeListener()
	v.mu.Lock()
	gen, old, lost := v.serving, v.retiring, v.lostErr
	v.mu.Unlock()
	var oldErr error
	var retired sync.WaitGroup
	if old != nil {
		retired.Go(func() {
			if err := old.Stop(v.hurry); errors.Is(err, errSurvived) {
				oldErr = err
			}
		})
	}
	var err error
	if gen != nil {
		err = gen.Stop(v.hurry)
	}
	retired.Wait()
	if lost != nil && !errors.Is(err, lost) {
		err = errors.Join(lost, err)
	}
	v.finish(errors.Join(err, oldErr))
}

// Wait blocks until the service has ended, by Stop, a failed Start or a
// lost worker, and returns how it ended: nil after a clean Stop.
func (v *Service) Wait() error {
	<-v.done
	return v.err
}

// finish records how the service ended and releases the listener; only
// the first call counts (a failed Start's, or stop's).
func (v *Service) finish(err error) {
	v.finishOnce.Do(func() {
		v.closeListener()
		v.cut()
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
