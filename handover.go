package main

// handover.go is what an upgrade (upgrade.go) hands from the old image
// to the new one across the exec, and how each side does its part: the
// old one holds its workers' lines and writes the handover file; the new
// one reads it and adopts the serving generation as its own, a
// Supervisor whose workers it did not start but watches, probes, heals
// and reaps as if it had. Descriptors survive an exec under their
// numbers when they are not close-on-exec, so the file names each by
// its number, and only those named lose close-on-exec.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"
)

// handoverEnv names the descriptor of the handover file in the new
// image's environment; the new image removes it at once.
const handoverEnv = "SERVERY_HANDOVER"

// handover is everything the new image needs to go on where the old one
// stopped: the sockets, the TLS identity and ticket keys (so sessions
// resume), every counter (so Prometheus sees no reset), the crash budget,
// the generation's number and the workers of the serving generation.
type handover struct {
	Version  int       `json:"version"`
	Protocol int       `json:"protocol"` // the adopted workers' protocolVersion
	ExecAt   time.Time `json:"exec_at"`  // when the old image began the exec, for the window's length
	Started  time.Time `json:"started"`  // when the service began: processStart of the first image
	// Listener and Status are descriptors: the listener and the status
	// listener (-1: none).
	Listener int `json:"listener"`
	Status   int `json:"status"`
	// TLS is the identity the serving generation presents, and Keys the
	// ticket keys, newest first; RotateIn is how long until the next
	// rotation. nil without TLS.
	TLS      *tlsIdentity  `json:"tls,omitempty"`
	Keys     [][]byte      `json:"keys,omitempty"`
	KeySeq   uint64        `json:"key_seq"`
	RotateIn time.Duration `json:"rotate_in,omitempty"`
	Numbered int           `json:"numbered"` // generations numbered so far
	Target   int           `json:"target"`
	// Losses are the ages of the workers lost within the policy's window,
	// which the budget counts.
	Losses  []time.Duration `json:"losses,omitempty"`
	Stats   statusSnapshot  `json:"stats"`
	Tally   handedTally     `json:"tally"`
	Dropped int64           `json:"dropped"` // output lines dropped (output.go)
	Serving handedGen       `json:"serving"`
}

// handedTally is the tally's record of the workers gone, by slot, and
// of every exit.
type handedTally struct {
	Slots map[int]handedSlot `json:"slots"`
	Exits map[string]int64   `json:"exits"`
}

type handedSlot struct {
	Gone     workerStats `json:"gone"`
	LastExit string      `json:"last_exit"`
	Hangs    int64       `json:"hangs"`
}

// handedGen is the serving generation: its number and its workers, by
// slot.
type handedGen struct {
	Number  int            `json:"number"`
	Workers []handedWorker `json:"workers"`
}

// handedWorker is one serving worker: its process, the descriptors of
// the parent's ends of its pipes, and what the parent knew of it.
type handedWorker struct {
	Index    int         `json:"index"`
	PID      int         `json:"pid"`
	In       int         `json:"in"`   // the write end of its protocol input, its fd 4
	Out      int         `json:"out"`  // the read end of its protocol output, its fd 5
	Logs     []int       `json:"logs"` // the read ends of its stdout, stderr and access lines, if the parent reads them
	ReadyAt  int64       `json:"ready_at"`
	Last     workerStats `json:"last"` // its counters as last seen
	Failures int         `json:"failures,omitempty"`
	// A request to be recycled it made, which the new image passes on.
	Asked bool   `json:"asked,omitempty"`
	Limit string `json:"limit,omitempty"`
	Why   string `json:"why,omitempty"`
}

// handoverFiles are the descriptors an exec hands over: those the old
// image opened for it alone (own), closed if the exec fails, and the
// workers' pipes, which it keeps.
type handoverFiles struct {
	own, kept []*os.File
}

func (f handoverFiles) all() []*os.File { return append(slices.Clone(f.own), f.kept...) }

// handoverState is the handover of the steady service l describes, gen
// serving, and the descriptors it names.
func (v *Service) handoverState(l *life, gen *Supervisor) (*handover, handoverFiles, error) {
	var files handoverFiles
	h := &handover{Version: handoverVersion, Protocol: protocolVersion, ExecAt: time.Now(), Started: processStart, Status: -1,
		Numbered: l.numbered, Target: l.target, KeySeq: l.keySeq, Stats: l.stats, TLS: gen.cfg.Runtime.TLS}
	now := time.Now()
	for _, t := range l.losses {
		h.Losses = append(h.Losses, now.Sub(t))
	}
	if v.keys != nil {
		h.Keys, h.RotateIn = v.keys.current(), max(time.Until(l.rotateAt), 0)
	}
	sockets := []net.Listener{v.ln}
	if v.upgrades.statusLn != nil {
		sockets = append(sockets, v.upgrades.statusLn)
	}
	for i, ln := range sockets {
		f, err := listenerFile(ln)
		if err != nil {
			closeAll(files.own...)
			return nil, handoverFiles{}, err
		}
		files.own = append(files.own, f)
		if i == 0 {
			h.Listener = fdOf(f)
		} else {
			h.Status = fdOf(f)
		}
	}
	h.Tally = v.counts.handOff()
	if v.output != nil {
		h.Dropped = v.output.droppedLines()
	}
	var err error
	if h.Serving, files.kept, err = gen.handOff(); err != nil {
		closeAll(files.own...)
		return nil, handoverFiles{}, err
	}
	for i := range h.Serving.Workers {
		if s := l.slots.byIndex[h.Serving.Workers[i].Index]; s != nil {
			h.Serving.Workers[i].Failures = s.failures
		}
	}
	return h, files, nil
}

// fdOf is f's descriptor, read without Fd, which would make it blocking
// and end its deadlines, should the exec fail and the file be used on.
func fdOf(f *os.File) int {
	fd := -1
	if raw, err := f.SyscallConn(); err == nil {
		raw.Control(func(d uintptr) { fd = int(d) })
	}
	return fd
}

// handOff is the tally's part of the handover.
func (t *tally) handOff() handedTally {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := handedTally{Slots: map[int]handedSlot{}, Exits: maps.Clone(t.exits)}
	for i, s := range t.slots {
		h.Slots[i] = handedSlot{Gone: s.gone, LastExit: s.lastExit, Hangs: s.hangs}
	}
	return h
}

// takeOver restores the tally the old image handed over.
func (t *tally) takeOver(h handedTally) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, s := range h.Slots {
		st := t.slot(i)
		st.gone, st.lastExit, st.hangs = s.Gone, s.LastExit, s.Hangs
	}
	for r, n := range h.Exits {
		t.exits[r] = n
	}
}

// handOff is the generation's part of the handover, and the workers'
// descriptors it names. Its lines are held (holdLines).
func (s *Supervisor) handOff() (handedGen, []*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := handedGen{Number: s.cfg.Generation}
	var files []*os.File
	for _, p := range s.procs {
		// One that left its slot, or exited, during the hold would be
		// adopted as serving: the upgrade waits for its replacement.
		select {
		case <-p.exited:
			return handedGen{}, nil, fmt.Errorf("worker %d (pid %d) exited during the hold", p.index, p.pid)
		default:
		}
		if p.gone || p.hung {
			return handedGen{}, nil, fmt.Errorf("worker %d (pid %d) left its slot during the hold", p.index, p.pid)
		}
		w := handedWorker{Index: p.index, PID: p.pid, In: fdOf(p.stdin), Out: fdOf(p.stdout), ReadyAt: p.readyAt.Load(),
			Last: s.counts.last(p), Asked: p.asked, Limit: p.recycleLimit, Why: p.recycleWhy}
		if w.In < 0 || w.Out < 0 {
			return handedGen{}, nil, fmt.Errorf("worker %d (pid %d): its protocol pipes are closed", p.index, p.pid)
		}
		files = append(files, p.stdin, p.stdout)
		live := p.following()
		for _, f := range p.logs {
			fd := -1 // a stream that ended (a worker may close its stdout): no follower in the new image
			if slices.Contains(live, f) {
				fd = fdOf(f)
				files = append(files, f)
			}
			w.Logs = append(w.Logs, fd)
		}
		g.Workers = append(g.Workers, w)
	}
	return g, files, nil
}

// errHoldTimeout fails an upgrade whose workers did not all hold their
// lines in time: one may be hung, or its pipe full.
var errHoldTimeout = errors.New("not every worker held its lines within a second")

// holding is an upgrade's hold on a generation's lines: every worker's
// protocol reader and output followers park once they have read all
// there is (parked), and wait for resume, which the old image closes
// if the exec fails. The new image reads on where they stopped.
type holding struct {
	parked chan struct{} // one send per reader or follower that parked
	resume chan struct{}
}

// holdLines asks every worker to hold its lines (msgHold), stops the
// parent's readers of every pipe once they have read what came before,
// and holds keyMu, so no ticket-key message is half written at the exec.
// It blocks until all have parked, or for within: then it gives the
// lines back and fails. A generation whose stop began, or that still
// holds a worker that left its slot, is not steady and fails at once.
func (s *Supervisor) holdLines(within time.Duration) error {
	s.keyMu.Lock()
	deadline := time.Now().Add(within) // from the lock: a key send before it may have taken a while
	s.mu.Lock()
	procs := slices.Clone(s.procs)
	busy := s.stopping || len(s.all) != len(s.procs)
	for _, p := range procs {
		busy = busy || p.gone || p.hung
	}
	s.mu.Unlock()
	if busy {
		s.keyMu.Unlock()
		return errors.New("a worker is leaving its slot")
	}
	n := 0
	for _, p := range procs {
		n += 1 + len(p.following())
	}
	h := &holding{parked: make(chan struct{}, n), resume: make(chan struct{})}
	s.hold.Store(h)
	for _, p := range procs {
		p.stdin.SetWriteDeadline(deadline)
		p.out.send(message{Type: msgHold}) // a worker that cannot take it does not park: the wait fails
		for _, f := range p.following() {
			f.SetReadDeadline(time.Unix(1, 0)) // now: the follower parks once it has read all there is
		}
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for range n {
		select {
		case <-h.parked:
		case <-t.C:
			s.resumeLines()
			return errHoldTimeout
		}
	}
	return nil
}

// resumeLines ends a hold, if one is on: the old image serves on, its
// workers write again, and its readers read on.
func (s *Supervisor) resumeLines() {
	h := s.hold.Swap(nil)
	if h == nil {
		return
	}
	close(h.resume)
	s.mu.Lock()
	procs := slices.Clone(s.procs)
	s.mu.Unlock()
	deadline := time.Now().Add(time.Second)
	for _, p := range procs {
		p.stdin.SetWriteDeadline(deadline)
		p.out.send(message{Type: msgResume})
	}
	s.keyMu.Unlock()
}

// holding reports whether a hold is on.
func (s *Supervisor) holding() bool { return s.hold.Load() != nil }

// park is called by a reader of a worker's pipe that reached the point
// a hold asked for: it blocks until the hold ends, and reports whether
// there was one.
func (s *Supervisor) park() bool {
	h := s.hold.Load()
	if h == nil {
		return false
	}
	h.parked <- struct{}{}
	select {
	case <-h.resume:
	case <-s.done:
	}
	return true
}

// takeHandover reads the handover the old image left, if this image
// was started by an upgrade's exec, and removes its variable so that
// nothing started later sees it; nil, nil otherwise.
func takeHandover() (*handover, error) {
	v, ok := os.LookupEnv(handoverEnv)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(handoverEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q: not a descriptor", handoverEnv, v)
	}
	f := os.NewFile(uintptr(fd), "handover")
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read handover: %w", err)
	}
	var h handover
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("read handover: %w", err)
	}
	// Close-on-exec again at once, before the program's own code can
	// start a child that would hold a worker's pipe.
	for _, fd := range h.descriptors() {
		setCloseOnExec(fd, true)
	}
	if h.Version != handoverVersion || h.Protocol != protocolVersion {
		return nil, fmt.Errorf("handover version %d, protocol %d; this build reads %d, %d", h.Version, h.Protocol, handoverVersion, protocolVersion)
	}
	return &h, nil
}

// descriptors are every descriptor h names.
func (h *handover) descriptors() []int {
	fds := []int{h.Listener, h.Status}
	for _, w := range h.Serving.Workers {
		fds = append(append(fds, w.In, w.Out), w.Logs...)
	}
	return slices.DeleteFunc(fds, func(fd int) bool { return fd < 0 })
}

// inherited is the file at descriptor fd, handed over (takeHandover has
// made it close-on-exec again); nil for -1.
func inherited(fd int, name string) *os.File {
	if fd < 0 {
		return nil
	}
	return os.NewFile(uintptr(fd), name)
}

// handedListener is the listener handed over at descriptor fd.
func handedListener(fd int, name string) (net.Listener, error) {
	f := inherited(fd, name)
	if f == nil {
		return nil, nil
	}
	defer f.Close() // the listener holds its own duplicate
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("%s handed over as fd %d: %w", name, fd, err)
	}
	return ln, nil
}

// adopt makes the generation the old image handed over this Supervisor's
// own: its workers serving as they did, read, followed, probed once
// promoted, and reaped as if this image had started them. It starts no
// process, and it tells each worker to write again (msgResume).
func (s *Supervisor) adopt(g handedGen) {
	s.mu.Lock()
	s.startDone = make(chan struct{})
	close(s.startDone)
	// Its workers served before the exec: a loss from now on is a
	// serving worker's, never one before serving (lostUnserved).
	s.promoted = true
	s.startedAt = time.Now()
	for _, w := range g.Workers {
		p := adopted(w)
		if w.Asked {
			p.asked, p.recycleLimit, p.recycleWhy = true, w.Limit, w.Why
			s.early = append(s.early, p) // passed on by promote
		}
		s.procs = append(s.procs, p)
		s.all = append(s.all, p)
	}
	procs := slices.Clone(s.procs)
	s.mu.Unlock()
	for _, p := range procs {
		p.events = s.events
		s.followOutput(p)
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			p.out.trace = func(m message) { s.trace(p, "sent", m) }
		}
		s.counts.begin(p, p.index)
		s.counts.seen(p, g.Workers[slices.Index(procs, p)].Last)
		s.readers.Add(1)
		go s.read(p)
		go s.reap(p)
	}
	deadline := time.Now().Add(time.Second)
	for _, p := range procs {
		p.stdin.SetWriteDeadline(deadline)
		p.out.send(message{Type: msgResume})
	}
	s.log.Info("generation adopted", "workers", len(procs))
	go s.follow(s.events, procs)
}

// adopted is the parent's handle on a worker handed over by w.
func adopted(w handedWorker) *workerProc {
	stdin := inherited(w.In, "protocol-in")
	p := &workerProc{index: w.Index, pid: w.PID, stdin: stdin, stdout: inherited(w.Out, "protocol-out"),
		stage: stageReady, out: &lineWriter{w: stdin}, exited: make(chan struct{}),
		readerDone: make(chan struct{}), leftBehind: make(chan struct{}), logsDone: make(chan struct{})}
	for i, fd := range w.Logs {
		p.logs = append(p.logs, inherited(fd, outputStreams[i]))
	}
	p.readyAt.Store(w.ReadyAt)
	return p
}

// waitAdopted waits for an adopted worker, which this image did not
// start and so has no exec.Cmd of: its exit status, as cmd.Wait gives it.
func waitAdopted(pid int) error {
	proc, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	state, err := proc.Wait()
	if err != nil {
		return err
	}
	if !state.Success() {
		return &exec.ExitError{ProcessState: state}
	}
	return nil
}
