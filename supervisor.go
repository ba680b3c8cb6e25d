package main

// supervisor.go is the parent's side of one generation: it starts the
// generation's worker processes, watches them, stops them and reaps them.
// Replacing one worker in its slot is slot.go's.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// supervisorConfig is what the parent needs beyond the workers' runtime.
type supervisorConfig struct {
	Workers        int
	Generation     int // this generation's number, from 1, for workers and logs
	StartupTimeout time.Duration
	DrainTimeout   time.Duration
	ForceTimeout   time.Duration
	Runtime        runtimeConfig
	Args           []string // the command line every worker is started with
	// Each worker asks to be recycled after about MaxRequests requests or
	// MaxAge of serving (recycleLimits draws its own); 0: never.
	MaxRequests int64
	MaxAge      time.Duration
	// A worker that does not answer a probe within WorkerTimeout is hung
	// (hang.go); one whose resident memory exceeds MaxMemory asks to be
	// recycled (memory.go). 0: never.
	WorkerTimeout time.Duration
	MaxMemory     int64
	// Output, when set, is the parent's one writer of every worker's
	// stdout and stderr (output.go); nil: a worker writes to the
	// command's Stderr, or the parent's.
	Output *workerOutput
}

// procSeam is how the supervisor starts and signals processes. Tests swap
// its fields to start the test binary with a fault, or to lose a signal.
type procSeam struct {
	// command returns the unstarted command for worker index, which runs
	// with args.
	command func(index int, args []string) (*exec.Cmd, error)
	// signal sends sig to the process group the worker leads.
	signal func(p *workerProc, sig os.Signal) error
}

// Supervisor runs one generation of workers sharing one listener: one
// worker per slot, numbered by Worker.Index.
//
// The Supervisor shares the listener it is given but never closes it: the
// Service above it owns the listener, which outlives any one generation.
// It owns the write end of each worker's protocol input (the liveness
// pipe) and the read end of each worker's protocol output. It does not
// decide what a lost worker means, nor when a worker that asks to be
// recycled is: it reports both (onLost, onRecycle), and whoever owns the
// generation decides, and may then have it replace the worker in its slot
// (replace, slot.go).
type Supervisor struct {
	cfg  supervisorConfig
	ln   net.Listener
	log  *slog.Logger
	seam procSeam
	// onLost is called with each worker lost after ready (a
	// *workerError), if the generation's stop had not begun when it was
	// seen. The Service sends it to its lifecycle loop (evLost), which
	// decides what the loss means (lifecycle.go, onLost).
	onLost func(error)
	// onRecycle is called when the worker pid in slot asks to be
	// recycled, with its reason, once the generation serves.
	onRecycle func(slot, pid int, limit, why string)
	// readTLS, when set, reads the TLS identity again before Start spawns
	// anything: a reload serves a renewed certificate. nil: cfg's.
	readTLS func() (*tlsIdentity, error)
	// counts, when set, gets every worker's counters (metrics.go).
	counts *tally
	// count is how many workers the generation has, or is growing or
	// shrinking to (scale.go): a new worker's processor share and its
	// Worker.Count. cfg.Workers is the count it started with.
	count atomic.Int64

	startedAt time.Time
	rollback  bool       // Start failed and rolls the generation back; set before the stop begins
	events    chan event // from the readers of Start's workers, in arrival order
	readers   sync.WaitGroup
	// exe is the executable the generation's workers run, opened once
	// (selfCommand) and closed by release.
	exeOnce sync.Once
	exe     *os.File
	exeErr  error

	mu        sync.Mutex
	procs     []*workerProc // the worker in each slot, by index: appended by Start, swapped by replace
	all       []*workerProc // every worker spawned and not yet forgotten; appended under spawnMu as well
	forgotten forgottenWorkers
	startDone chan struct{} // closed when Start returns; nil until it is called
	stopping  bool
	cause     error // why the generation stops: a failed start, a lost worker; nil if asked
	// promoted: promote was called, and recycle requests go to
	// onRecycle; until then they wait in early (a worker may reach its
	// limit before its generation is promoted, even within its barrier).
	promoted bool
	early    []*workerProc
	// lostUnserved is the first worker lost after Start and before promote,
	// which then fails.
	lostUnserved error

	// spawnMu is held by replace across its check that the stop has not
	// begun and its spawn, and taken once by the stop after it began, so
	// the stop sees every worker there will ever be in all.
	spawnMu sync.Mutex
	// joins ends when the stop begins, and with it any replacement's
	// barrier.
	joins       context.Context
	cancelJoins context.CancelFunc
	replacing   sync.WaitGroup // replace calls running

	// reporting holds the stop's end until a loss seen before it began
	// has been reported, so whoever owns the generation learns of the
	// loss before it learns that the generation stopped.
	reporting sync.WaitGroup
	// keyMu orders the ticket-key sends: held across their pipe writes,
	// which mu never is, so a stop never waits for a slow worker's pipe.
	// It guards keySeq and keys, the last sent, which a replacement gets.
	keyMu  sync.Mutex
	keySeq uint64
	keys   [][]byte
	// hold is an upgrade's hold on the workers' lines (handover.go),
	// while one is on.
	hold atomic.Pointer[holding]

	stopOnce  sync.Once
	hurryOnce sync.Once
	hurry     chan struct{} // closed to skip the rest of the drain
	done      chan struct{} // closed once the generation is reaped and released
	err       error         // how the generation ended; read after done
}

// newSupervisor returns a Supervisor for cfg that will serve ln and tell
// r what befalls its ready workers. It starts nothing.
func newSupervisor(cfg supervisorConfig, ln net.Listener, log *slog.Logger, r reports) *Supervisor {
	s := &Supervisor{
		cfg:    cfg,
		ln:     ln,
		log:    log.With("generation", cfg.Generation),
		seam:   procSeam{signal: signalWorkerGroup},
		events: make(chan event),
		hurry:  make(chan struct{}),
		done:   make(chan struct{}),
		keys:   cfg.Runtime.TicketKeys,

		onLost:    r.lost,
		onRecycle: r.recycle,
		counts:    r.counts,
	}
	s.seam.command = s.selfCommand
	s.count.Store(int64(cfg.Workers))
	s.joins, s.cancelJoins = context.WithCancel(context.Background())
	return s
}

// signalWorkerGroup signals the process group p leads.
func signalWorkerGroup(p *workerProc, sig os.Signal) error { return signalGroup(p.pid, sig) }

// selfCommand starts the parent's own executable with the parent's
// command line, so a worker is the same build as its parent (`go run .`
// included) and its App reads the same flags. The generation opens the
// executable at its first spawn and keeps it open until its stop: a
// generation started after the binary was replaced runs the new one, and
// a worker that replaces one in its slot runs its generation's build even
// once the file has been replaced (where a process can run an open file:
// Linux; elsewhere the file at the path then).
func (s *Supervisor) selfCommand(_ int, args []string) (*exec.Cmd, error) {
	s.exeOnce.Do(func() {
		path, err := os.Executable()
		if err == nil {
			s.exe, err = os.Open(path)
		}
		if err != nil {
			s.exeErr = fmt.Errorf("find own executable: %w", err)
		}
	})
	if s.exeErr != nil {
		return nil, s.exeErr
	}
	run := runPath(s.exe)
	magic := make([]byte, 2)
	if s.exe.ReadAt(magic, 0); string(magic) == "#!" {
		// A script's interpreter opens it by the path it is given, after
		// the exec has closed the descriptor: it runs by its name.
		run = s.exe.Name()
	}
	cmd := exec.Command(run, args...)
	// The parent's own argv[0]: a worker's os.Args is the parent's, so it
	// names itself as the parent does (programName, and the kernel's name,
	// nameProcess), ps shows the same command line, and a program that
	// runs os.Args[0] finds itself. Rejected: a title with the generation
	// and slot, as nginx's "nginx: worker process". Go cannot rewrite its
	// argv after exec, and one given at exec would be the worker's
	// os.Args[0], which programs read as their name or path.
	cmd.Args[0] = os.Args[0]
	return cmd, nil
}

// Start starts the generation and blocks until every worker is ready. If
// any worker fails, exits or misbehaves first, the startup timeout passes
// or ctx is cancelled, Start rolls the whole generation back, waits until
// no worker is left, and returns an error that names the worker. Start is
// called once.
func (s *Supervisor) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.stopping || s.startDone != nil {
		s.mu.Unlock()
		return errors.New("start: supervisor already started or stopped")
	}
	s.startDone = make(chan struct{})
	s.mu.Unlock()
	defer close(s.startDone)
	s.startedAt = time.Now()
	s.log.Info("generation starting", "workers", s.cfg.Workers, "addr", s.ln.Addr().String())
	err := s.tlsAgain()
	if err == nil {
		err = s.spawnAll()
	}
	committed := false
	if err == nil {
		committed, err = s.barrier(ctx, s.procs, s.events, s.keys)
	}
	if err != nil {
		// Before commit no worker accepts, so there is nothing to drain.
		// After it, committed workers may already be answering, and the
		// rollback drains them as a stop does.
		drain := time.Duration(0)
		if committed {
			drain = s.cfg.DrainTimeout
		}
		s.log.Error("startup failed, rolling back", "err", err, "drain", drain)
		s.rollback = true
		s.stopWith(fmt.Errorf("start: %w", err), drain)
		go s.follow(s.events, s.started()) // the barrier no longer reads events
		<-s.done
		return s.err // the start error, and any survivor of the rollback
	}
	s.log.Info("generation ready", "workers", len(s.procs), "ready_in", since(s.startedAt))
	go s.follow(s.events, s.started())
	return nil
}

// Stop stops the generation and blocks until every worker has been reaped
// and every handle released, or until the final deadline has passed (plus
// at most a second for the readers of survivors' pipes). It closes every
// worker's protocol input at once, so all workers drain together;
// survivors are terminated at the drain timeout and killed at the force
// timeout, both measured from the start of the stop.
// Cancelling ctx does not abandon the stop: it skips the rest of the drain,
// so survivors are terminated at once. Stop returns nil only if every
// worker was reaped and none was lost; it is safe to call more than once
// and from several goroutines, and each call returns the same result.
//
// A Start in progress owns the generation until it returns, so Stop first
// waits for it; to cut a startup short, cancel Start's context. Stop
// before Start makes a later Start fail.
func (s *Supervisor) Stop(ctx context.Context) error {
	s.mu.Lock()
	startDone := s.startDone
	if startDone == nil {
		// Decided under the same lock Start takes: no Start can slip in
		// and spawn workers this stop would never see.
		s.stopping = true
	}
	s.mu.Unlock()
	if startDone != nil {
		<-startDone
	}
	s.stopWith(nil, s.cfg.DrainTimeout)
	select {
	case <-s.done:
	case <-ctx.Done():
		s.skipDrain()
		<-s.done
	}
	return s.err
}

// Wait blocks until the generation has ended, by Stop or because a worker
// was lost, and returns how it ended: nil after a clean Stop.
func (s *Supervisor) Wait() error {
	<-s.done
	return s.err
}

// tlsAgain reads the TLS identity again, for a reload, before anything
// is spawned.
func (s *Supervisor) tlsAgain() error {
	if s.readTLS == nil {
		return nil
	}
	id, err := s.readTLS()
	if err != nil {
		return fmt.Errorf("reload tls: %w", err)
	}
	s.cfg.Runtime.TLS = id
	return nil
}

// promote hands over the ticket keys as they are now (workers accept
// from their commit on) and passes on the recycle requests that came
// before. It is the lifecycle loop's promotion of a ready generation
// (generation.promote), called from the loop itself, so it blocks on
// nothing: what reports to the loop does so in a goroutine. A worker lost
// since Start returned fails it instead, with that loss: the loop learns
// of the loss only after it decided the promotion, and a generation that
// never served must fail its reload, not end a fixed generation's
// service (-max-restarts 0) as a serving worker's loss does.
func (s *Supervisor) promote(seq uint64, keys [][]byte) error {
	s.mu.Lock()
	if lost := s.lostUnserved; lost != nil {
		s.mu.Unlock()
		return lost
	}
	s.promoted = true
	early := s.early
	s.early = nil
	s.mu.Unlock()
	if keys != nil {
		go s.sendTicketKeys(seq, keys)
	}
	for _, p := range early {
		go s.onRecycle(p.index, p.pid, p.recycleLimit, p.recycleWhy)
	}
	if s.cfg.WorkerTimeout > 0 {
		go s.probe()
	}
	return nil
}

// recycleAsked takes a worker's first request to be recycled: passed on
// once the generation serves, held until then, dropped once the worker
// left its slot or the stop began.
func (s *Supervisor) recycleAsked(p *workerProc, limit, why string) {
	s.mu.Lock()
	if s.stopping || p.gone || p.asked {
		s.mu.Unlock()
		return
	}
	p.asked, p.recycleLimit, p.recycleWhy = true, limit, why
	promoted := s.promoted
	if !promoted {
		s.early = append(s.early, p)
	}
	s.mu.Unlock()
	s.log.Info("worker asks to be recycled", "worker", p.index, "pid", p.pid, "reason", why)
	if promoted {
		s.onRecycle(p.index, p.pid, limit, why)
	}
}

// beginStop begins the stop of a started generation, with the usual
// drain, and returns at once (generation.beginStop).
func (s *Supervisor) beginStop(cause error) { s.stopWith(cause, s.cfg.DrainTimeout) }

// number is the generation's number.
func (s *Supervisor) number() int { return s.cfg.Generation }

// sendTicketKeys sends rotated session ticket keys to the worker in every
// slot, all within one second: a worker that does not read its pipe for
// that long is logged, not waited for. It does nothing once the
// generation stops, or if keys of a later seq were sent already. A stop,
// or a worker's loss or retirement, may close a pipe under the writes:
// that write fails, and only a failure of a worker still in its slot is
// worth a warning.
func (s *Supervisor) sendTicketKeys(seq uint64, keys [][]byte) {
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	if seq < s.keySeq {
		return
	}
	s.keySeq, s.keys = seq, keys
	s.mu.Lock()
	procs := slices.Clone(s.procs)
	stopping := s.stopping
	s.mu.Unlock()
	if stopping {
		return
	}
	deadline := time.Now().Add(time.Second)
	for _, p := range procs {
		s.sendKeys(p, keys, deadline)
	}
}

// sendKeys writes keys to one worker by deadline; keyMu is held.
func (s *Supervisor) sendKeys(p *workerProc, keys [][]byte, deadline time.Time) {
	p.stdin.SetWriteDeadline(deadline)
	if err := p.out.send(message{Type: msgTicketKeys, Keys: keys}); err != nil && s.serves(p) {
		s.log.Warn("cannot send ticket keys", "worker", p.index, "pid", p.pid, "err", err)
	}
}

// serves reports whether p is still its slot's worker and the
// generation's stop has not begun.
func (s *Supervisor) serves(p *workerProc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.stopping && !p.gone
}

// pids returns the workers' process ids, in index order: those spawned so
// far while Start runs. It is safe to call at any time.
func (s *Supervisor) pids() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	pids := make([]int, len(s.procs))
	for i, p := range s.procs {
		pids[i] = p.pid
	}
	return pids
}

// spawnAll starts every worker, each with the listener as its fd 3.
func (s *Supervisor) spawnAll() error {
	closeInheritedOnExec()
	lnFile, err := listenerFile(s.ln)
	if err != nil {
		return err
	}
	// Every worker holds its own copy from here on; the parent's copy of
	// the file is only needed while starting them.
	defer lnFile.Close()
	for i := range s.cfg.Workers {
		p, err := s.spawn(i, lnFile, s.events)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.procs = append(s.procs, p)
		s.all = append(s.all, p)
		s.mu.Unlock()
	}
	return nil
}

// workerEnviron is the environment worker index starts with: the
// parent's, less what belongs to the parent alone, plus worker mode, the
// worker's name and a GOMAXPROCS share unless the user chose one.
func (s *Supervisor) workerEnviron(base []string, index int) []string {
	env := make([]string, 0, len(base)+3)
	for _, kv := range base {
		if !parentOnlyEnv(kv) {
			env = append(env, kv)
		}
	}
	env = append(env, workerEnv+"="+strconv.Itoa(protocolVersion),
		fmt.Sprintf("%s=%d %d", workerNameEnv, s.cfg.Generation, index))
	if os.Getenv("GOMAXPROCS") == "" {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(workerProcs(runtime.GOMAXPROCS(0), int(s.count.Load()))))
	}
	if limit, ok := memoryLimit(s.cfg.MaxMemory); ok {
		env = append(env, limit)
	}
	return env
}

// workerProcs divides the parent's processors among the workers, at least
// one each, so N workers do not each run GOMAXPROCS threads on the same
// cores and contend for them.
func workerProcs(procs, workers int) int {
	return max(1, procs/workers)
}

// parentOnlyEnv reports variables a worker must not inherit: worker mode
// (set afresh), systemd's socket activation and watchdog variables (they
// describe the parent's pid) and NOTIFY_SOCKET (only the main process may
// notify).
func parentOnlyEnv(kv string) bool {
	name, _, _ := strings.Cut(kv, "=")
	switch name {
	case workerEnv, workerNameEnv, "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID":
		return true
	}
	return false
}

// started returns the workers Start started, which Start's follow
// observes once they are ready (or rolls back). It is taken in Start's
// goroutine, which owns their barrier state, before follow begins. A
// replacement has a follow of its own (slot.go).
func (s *Supervisor) started() []*workerProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.procs)
}

// follow observes the events of procs, which arrive on events, until the
// stream of each has ended with its exit, or the generation is done. It
// lets go of each worker as its exit is seen (forget), or at once for one
// whose exit the barrier took: a generation that replaces workers for
// months holds a goroutine, a descriptor or a handle only for the workers
// that still run.
func (s *Supervisor) follow(events <-chan event, procs []*workerProc) {
	running := 0
	for _, p := range procs {
		if p.ended {
			s.forget(p)
		} else {
			running++
		}
	}
	for running > 0 {
		select {
		case ev := <-events:
			s.observe(ev)
			if ev.last() {
				ev.proc.ended = true
				running--
				s.forget(ev.proc)
			}
		case <-s.done:
			return
		}
	}
}

// forget lets go of a worker that has exited and left its slot: it
// closes the worker's pipes and drops it from all, keeping what the
// stop would have read of it (a failed App stop step, its counters). A
// generation whose stop has begun forgets nothing: the stop reaps and
// releases every worker in all itself.
func (s *Supervisor) forget(p *workerProc) {
	s.mu.Lock()
	if s.stopping || !p.gone {
		s.mu.Unlock()
		return
	}
	s.all = slices.DeleteFunc(s.all, func(q *workerProc) bool { return q == p })
	if err := p.appStopError(); err != nil {
		s.forgotten.keep(err) // with the removal, so the stop sees it in one place or the other
	}
	s.mu.Unlock()
	// The reader has seen EOF by now, or a descendant still holds the
	// pipe: closing the read end wakes it either way, and it ends.
	p.stdin.Close()
	p.stdout.Close()
	closeAll(p.logs...)
	s.logCounters(p)
}

// observe handles one event from a ready worker. A recycle request, the
// first, is passed on (onRecycle); anything else a worker sends or does
// after ready is its loss, reported once (onLost), and the worker, if it
// still runs, is made to leave as a retired one does. Nothing is reported
// of a worker that left its slot, nor once the stop began: the stop path
// reports each worker's exit itself. Seen and reported are two steps: the
// owner may have begun the stop in between, which is why it decides by
// what the generation was when the loss was seen (lifecycle.go, onLost).
func (s *Supervisor) observe(ev event) {
	p := ev.proc
	s.mu.Lock()
	if s.stopping || p.gone {
		s.mu.Unlock()
		return
	}
	if ev.err == nil && ev.msg.Type == msgRecycle && !p.asked {
		s.mu.Unlock()
		s.recycleAsked(p, ev.msg.Limit, ev.msg.Reason)
		return
	}
	reason := "sent " + ev.msg.Type + " after ready"
	if ev.err != nil {
		reason = ev.err.Error()
	}
	lost := &workerError{Index: p.index, PID: p.pid, Reason: reason, Err: ev.err}
	p.gone = true
	if !s.promoted && s.lostUnserved == nil {
		s.lostUnserved = lost
	}
	s.reporting.Add(1)
	s.mu.Unlock()
	defer s.reporting.Done()
	s.log.Error("worker lost", "worker", p.index, "pid", p.pid, "reason", reason)
	s.retire(p, s.cfg.DrainTimeout) // a worker that broke the protocol may still run
	s.onLost(lost)
}

// stopWith starts the stop path once and reports whether this call
// started it; later calls do nothing. cause is the reason the generation
// ends (nil for a requested stop) and drain how long workers get before
// they are terminated: 0 for a rollback before commit, whose workers have
// no requests to finish. It does not block.
func (s *Supervisor) stopWith(cause error, drain time.Duration) (began bool) {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.stopping = true
		s.cause = cause
		s.mu.Unlock()
		go s.stop(drain)
		began = true
	})
	return began
}

// skipDrain makes a running stop terminate survivors now.
func (s *Supervisor) skipDrain() {
	s.hurryOnce.Do(func() { close(s.hurry) })
}

// stop runs the whole stop path and publishes its result.
func (s *Supervisor) stop(drain time.Duration) {
	began := time.Now()
	// Any replacement's barrier ends, and once the one spawning now, if
	// any, has added its worker, none can be added: all is final.
	s.cancelJoins()
	s.spawnMu.Lock()
	s.spawnMu.Unlock()
	err := s.escalate(began, drain)
	s.release()
	// A replacement's barrier has ended by now (joins); its worker's
	// stage is read below.
	s.replacing.Wait()
	s.reporting.Wait()
	for _, p := range s.all {
		s.logCounters(p)
	}
	s.err = errors.Join(s.cause, err, s.appStopErrors())
	if err != nil {
		s.log.Error("stop failed", "err", err)
	}
	took := time.Since(began).Round(100 * time.Microsecond)
	switch {
	case s.rollback && err == nil:
		// The failure was logged when the rollback began; this only says
		// that nothing of the generation is left.
		s.log.Info("generation rolled back", "took", took)
	default:
		s.log.Info("generation stopped", "took", took, "clean", s.err == nil)
	}
	close(s.done)
}

// release closes every handle the generation still holds once all workers
// are reaped, and waits for the readers to finish, so nothing lingers until
// the Supervisor is garbage collected. The readers get one second in all
// to reach EOF first, so a done message still in the pipe is not lost;
// after that, closing the read ends wakes any reader whose pipe a survivor
// or a stray descendant still holds.
func (s *Supervisor) release() {
	linger, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, p := range s.all {
		p.stdin.Close()
		for _, done := range []chan struct{}{p.readerDone, p.logsDone} {
			select {
			case <-done:
			case <-linger.Done(): // stays closed for every later worker
			}
		}
		p.stdout.Close()
		closeAll(p.logs...)
	}
	s.readers.Wait()
	s.exeOnce.Do(func() {}) // what the one that opened it wrote, seen
	if s.exe != nil {
		s.exe.Close()
	}
}

// appStopErrors names every worker whose App's stop step failed, as its
// done message said: an unclean exit, which fails the stop as it fails
// direct mode's. Those forgotten before the stop are among them.
func (s *Supervisor) appStopErrors() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := slices.Clone(s.forgotten.failures)
	for _, p := range s.all {
		if err := p.appStopError(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.forgotten.more > 0 {
		errs = append(errs, fmt.Errorf("%d more workers: %w", s.forgotten.more, errAppStop))
	}
	return errors.Join(errs...)
}

// appStopError is the error of a worker whose App's stop step failed, as
// its done message said, or nil.
func (p *workerProc) appStopError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopFailure == "" {
		return nil
	}
	return &workerError{Index: p.index, PID: p.pid, Reason: p.stopFailure, Err: errAppStop}
}

// forgottenWorkers is what a generation keeps of the workers it let go
// of before its stop (forget): the App stop steps that failed, the
// first few named and the rest counted, so a run of months keeps a
// list of bounded length.
type forgottenWorkers struct {
	failures []error
	more     int
}

// keep records a forgotten worker's failed App stop step.
func (f *forgottenWorkers) keep(err error) {
	if len(f.failures) < 8 {
		f.failures = append(f.failures, err)
		return
	}
	f.more++
}

// errAppStop is wrapped by the error of a generation in which an App's
// stop step failed.
var errAppStop = errors.New("app stop failed")

// logCounters logs a worker's final counters, once it has exited, so an
// operator sees how connections spread across workers. A worker that
// never became ready served nothing and has none to report.
func (s *Supervisor) logCounters(p *workerProc) {
	st := p.getStats()
	switch {
	case st == nil && p.readyAt.Load() == 0:
	case st == nil:
		s.log.Info("worker counters", "worker", p.index, "pid", p.pid, "reported", false)
	default:
		s.log.Info("worker counters", "worker", p.index, "pid", p.pid,
			"accepted", st.Accepted, "served", st.Served)
	}
}

// workerProc is the parent's handle on one worker process. Its fields
// stdin and stdout keep the design record's names for the protocol's
// pipes: they are the parent's ends of the worker's fds 4 and 5, not the
// worker's standard input and output (/dev/null, and a pipe the parent
// reads, logs).
type workerProc struct {
	index      int // its slot
	pid        int
	cmd        *exec.Cmd
	stdin      *os.File // write end of the liveness pipe, the worker's protocol input (its fd 4); only the parent holds it
	stdout     *os.File // read end of the worker's protocol output (its fd 5)
	out        *lineWriter
	events     chan event    // its reader's and reaper's events: the generation's, or its own for a replacement
	stage      stage         // owned by the barrier
	startingAt time.Time     // when it said starting; owned by the barrier
	exited     chan struct{} // closed once the process is reaped
	status     error         // cmd.Wait's result; read after exited
	readerDone chan struct{} // closed once its output is read to the end
	logs       []*os.File    // read ends of its stdout and stderr, when the parent writes them (output.go); else nil
	logsDone   chan struct{} // closed once logs are read to the end, or at once without them
	// streamsDone has one channel per pipe in logs, closed once its
	// follower has ended; set by followOutput before it starts them.
	streamsDone []chan struct{}
	ended       bool // its exit event was taken: by the barrier, then by its follow
	// Under the Supervisor's mu:
	gone         bool   // it left its slot: lost, replaced, or a replacement that failed
	asked        bool   // it asked to be recycled
	recycleWhy   string // why it asked
	recycleLimit string // which limit it reached
	hung         bool   // it did not answer a probe in time, and is being ended (hang.go)

	// askedAt is when the oldest stats question it has not answered was
	// asked, on monoNow's clock; 0: none pending.
	askedAt atomic.Int64
	silence silence // the probe's alone (hang.go)
	// leftBehind is closed (leave) when the worker outlived its SIGKILL
	// by unreapedGrace, stuck in the kernel: whatever waits for its exit
	// to replace it (a respawn, the next recycle) goes on without it.
	leftBehind chan struct{}
	leaveOnce  sync.Once

	readyAt atomic.Int64 // when it reported ready, in Unix nanoseconds; 0 until then

	mu          sync.Mutex
	stats       *workerStats
	stopFailure string        // the App's stop step failed: why
	replied     chan struct{} // closed, and replaced, at each stats answer
	killed      error         // why the parent killed it (errHung), for its exit's line; nil: it did not
}

// leave closes leftBehind, once.
func (p *workerProc) leave() { p.leaveOnce.Do(func() { close(p.leftBehind) }) }

// killedFor records why the parent is about to kill p, so its exit is
// told from a crash's or the OOM killer's.
func (p *workerProc) killedFor(why error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killed = why
}

// killReason is why the parent killed p; nil if it did not.
func (p *workerProc) killReason() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed
}

// event is one thing a worker did: a message, or an error that ends its
// stream (a bad line, or its exit).
type event struct {
	proc *workerProc
	msg  message
	err  error
}

// errExited is wrapped by the event that reports a worker's exit.
var errExited = errors.New("exited")

// last reports whether ev is the last of its worker's stream: its exit.
func (ev event) last() bool { return errors.Is(ev.err, errExited) }

// The descriptors a worker inherits beyond 0, 1 and 2, in the order of
// spawn's ExtraFiles.
const (
	listenerFD    = 3 // the shared listening socket, which the worker adopts
	protocolInFD  = 4 // the parent's lines; EOF: the parent closed it, or died
	protocolOutFD = 5 // the worker's lines to the parent
	accessLogFD   = 6 // the worker's access lines, with an access log (output.go)
)

// spawn starts worker index with the listener as its fd 3 and the
// protocol's pipes as its fds 4 and 5, and starts the goroutines that
// read its output and reap it, which send its events to events.
//
// The worker's stdin is /dev/null, and its stdout and stderr are pipes
// the parent reads and writes to its log (output.go; without an Output,
// both are the command's Stderr): whatever a program prints to stdout,
// from the first line of the first init(), long before servery's code
// runs in it, lands in the log. The design record (DESIGN, "Design record to code") put
// the protocol on stdin and stdout, and a worker moved it off them once
// its main ran; a print before that (a library that announces itself at
// init) was a malformed protocol line, and every start rolled back.
func (s *Supervisor) spawn(index int, lnFile *os.File, events chan event) (*workerProc, error) {
	reserveThreads() // runService's already, unless a program runs a Supervisor alone
	cmd, err := s.seam.command(index, s.cfg.Args)
	if err != nil {
		return nil, refused(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("worker %d: protocol pipe: %w", index, refused(err))
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("worker %d: protocol pipe: %w", index, refused(err))
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = s.workerEnviron(cmd.Env, index)
	var logs, logEnds []*os.File
	if s.cfg.Output != nil && cmd.Stderr == nil {
		if logs, logEnds, err = outputPipes(s.cfg.Runtime.AccessPipe); err != nil {
			closeAll(inR, inW, outR, outW)
			return nil, fmt.Errorf("worker %d: output pipe: %w", index, refused(err))
		}
		cmd.Stdout, cmd.Stderr = logEnds[0], logEnds[1] // the parent writes every line (output.go)
	} else {
		if cmd.Stderr == nil {
			cmd.Stderr = os.Stderr // logs go where the parent's go
		}
		cmd.Stdout = cmd.Stderr // prints go to the log
	}
	cmd.Stdin = nil                                // /dev/null
	cmd.ExtraFiles = []*os.File{lnFile, inR, outW} // listenerFD, protocolInFD, protocolOutFD
	if len(logEnds) > 2 {
		cmd.ExtraFiles = append(cmd.ExtraFiles, logEnds[2]) // accessLogFD
	}
	newSession(cmd)
	err = cmd.Start()
	// The child has its own copies now. Closing ours leaves the parent as
	// the only holder of the protocol-in pipe's write end (os.Pipe made
	// it close-on-exec, so no other worker inherited it), and the worker
	// reads EOF exactly when the parent closes it or dies. The output
	// pipes' write ends go too, so their readers see EOF when the worker
	// and its descendants are gone.
	closeAll(append(logEnds, inR, outW)...)
	if err != nil {
		closeAll(append(logs, inW, outR)...)
		return nil, fmt.Errorf("worker %d: start: %w", index, refused(err))
	}
	p := &workerProc{index: index, pid: cmd.Process.Pid, cmd: cmd, stdin: inW, stdout: outR, logs: logs, events: events,
		out: &lineWriter{w: inW}, exited: make(chan struct{}), readerDone: make(chan struct{}), leftBehind: make(chan struct{}),
		logsDone: make(chan struct{})}
	s.followOutput(p)
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		p.out.trace = func(m message) { s.trace(p, "sent", m) }
	}
	s.log.Info("worker started", "worker", index, "pid", p.pid)
	s.counts.begin(p, index)
	s.readers.Add(1)
	go s.read(p)
	go s.reap(p)
	return p, nil
}

// refused explains an error of a spawn that the host refused by naming
// the limit it met, so the operator knows what to raise: the one line
// that says why a start rolled back, or why a replacement failed. Other
// errors pass unchanged.
func refused(err error) error {
	var why string
	switch {
	case errors.Is(err, syscall.EAGAIN):
		why = "the host refused another process: " + processLimits()
	case errors.Is(err, syscall.EMFILE):
		why = "the parent is out of descriptors: " + fileLimit()
	case errors.Is(err, syscall.ENFILE):
		why = "the system is out of descriptors (fs.file-max)"
	case errors.Is(err, syscall.ENOMEM):
		why = "the host is out of memory for another process"
	default:
		return err
	}
	return hostRefusal{fmt.Errorf("%w (%s)", err, why)}
}

// hostRefusal is a spawn's error that the host refused for want of room.
type hostRefusal struct{ error }

func (r hostRefusal) Unwrap() error      { return r.error }
func (hostRefusal) Is(target error) bool { return target == errHostRefused }

// errHostRefused is wrapped by a spawn's error when the host refused it
// for want of room: EAGAIN, EMFILE, ENFILE or ENOMEM (refused).
var errHostRefused = errors.New("the host refused a new worker")

// read forwards the worker's messages as events until its protocol output
// (fd 5 in the worker, stdout here) ends or carries a line that does not
// decode. It keeps the final counters itself, so they are in place once
// the readers are done.
func (s *Supervisor) read(p *workerProc) {
	defer s.readers.Done()
	defer close(p.readerDone)
	defer p.stdout.Close() // its only reader: nothing is read after this
	lr := newLineReader(p.stdout)
	trace := s.log.Enabled(context.Background(), slog.LevelDebug)
	for {
		m, err := lr.next()
		if trace && err == nil {
			s.trace(p, "read", m)
		}
		if err == io.EOF || errors.Is(err, os.ErrClosed) {
			return // the exit event from reap ends the stream; a close is forget's or release's
		}
		if err == nil && m.Type == msgHeld {
			s.park() // nothing follows until the resume, whichever image sends it
			continue
		}
		if err == nil && m.Type == msgDone {
			p.setDone(m.Stats, m.Reason)
			continue
		}
		if err == nil && m.Type == msgStats && m.Stats != nil {
			s.counts.seen(p, *m.Stats)
			p.statsReplied()
			s.judgeProgress(p, *m.Stats)
			continue
		}
		if !s.deliver(p, event{proc: p, msg: m, err: err}) || err != nil {
			return
		}
	}
}

// reap waits for the worker to exit and reports it as the last event of
// its stream, after anything it wrote before exiting, so a "failed" reason
// is not overtaken by the bare exit status.
//
// reap is not waited for when the generation is released: for a survivor
// of the kill deadline it may never return.
func (s *Supervisor) reap(p *workerProc) {
	// Where awaitExit fails, cmd.Wait waits itself, holding a thread.
	awaitExit(p.pid)
	if p.cmd != nil {
		p.status = p.cmd.Wait()
	} else {
		p.status = waitAdopted(p.pid) // an upgrade's old image started it (handover.go)
	}
	s.sweep(p)
	close(p.exited)
	// Its last lines are read first: what it wrote, and what it printed
	// as it died (a panic's trace), are queued for the log before its exit
	// is reported (the queue's writer may still write them after the
	// parent's own record of the exit).
	linger, cancel := context.WithTimeout(context.Background(), time.Second) // a descendant may still hold a pipe
	for _, done := range []chan struct{}{p.readerDone, p.logsDone} {
		select {
		case <-done:
		case <-linger.Done():
		}
	}
	cancel()
	status := "status 0"
	if p.status != nil {
		status = p.status.Error()
	}
	exit := fmt.Errorf("%w: %s", errExited, status)
	if why := p.killReason(); why != nil {
		// The parent's own kill, which its budget does not count (heal.go).
		exit = fmt.Errorf("%w: killed, %w (%s)", errExited, why, status)
		status = "killed, " + why.Error() + " (" + status + ")"
	}
	s.counts.end(p, p.getStats(), exitReason(p.status), status)
	s.deliver(p, event{proc: p, err: exit})
}

// sweep kills whatever is left in a just-reaped worker's process group.
// servery's own code and the static site start no children; an embedded
// App may, but one still in the group once its worker has exited has lost
// the process that owned it, so whoever started it, it is a leak that
// would otherwise outlive the generation. It runs the moment the worker is
// reaped: while any member of the group lives, the kernel does not reuse
// its id, and if none lives the signal finds nothing (ESRCH); only in the
// microseconds between the two could a recycled pid lead a new group.
func (s *Supervisor) sweep(p *workerProc) {
	s.seam.signal(p, syscall.SIGKILL)
}

// deliver hands ev to whoever watches p, or drops it once the generation
// is done.
func (s *Supervisor) deliver(p *workerProc, ev event) bool {
	select {
	case p.events <- ev:
		return true
	case <-s.done:
		return false
	}
}

// setDone records a worker's done message: its counters, and why its
// App's stop step failed, if it did.
func (p *workerProc) setDone(st *workerStats, stopFailure string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats, p.stopFailure = st, stopFailure
}

func (p *workerProc) getStats() *workerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}
