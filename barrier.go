package main

// barrier.go holds the wire protocol between the parent and its workers and
// the parent's side of the all-or-nothing startup barrier.
//
// The protocol is JSON lines on two pipes, the worker's fds 4 and 5
// (spawn). The parent writes to a worker's protocol input, its "stdin" in
// the design record (DESIGN, "Design record to code"): one config
// message, then, once every worker is prepared, one commit, and after it
// only rotated ticket keys and stats questions (the probe's, hang.go,
// and the status listener's, status.go); closing it is the drain signal.
// The worker writes to its protocol output: starting (its App's start
// step runs), prepared, ready, failed (with a reason), recycle (once, at
// its -max-requests, -max-worker-age or -max-worker-memory), stats (an
// answer, or its own stall report) and, after a drain, done (with its
// counters). Logs go to stderr, and the worker's stdout goes there too:
// neither ever mixes with the protocol.
//
// A worker that replaces a lost or recycled one in its slot goes through
// the same barrier alone: config, starting, prepared, commit, ready.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// protocolVersion is carried in workerEnv and in the config message, so a
// worker started from a different build refuses to run instead of
// misreading the parent. 7: the pipes moved from stdin and stdout to
// fds 4 and 5; stats carry the worker's
// progress, stall and stuck requests.
const protocolVersion = 8

// workerEnv selects worker mode when set, with the protocol version as its
// value. An environment variable rather than a flag keeps worker mode out
// of the user-visible command line.
const workerEnv = "SERVERY_WORKER_PROTOCOL"

// workerNameEnv tells a worker its generation and index ("3 1") before
// its config arrives, only so that the lines it may log before then (a
// refusal, a termination during a rollback) say which worker they are
// about. The config message stays what the worker runs by.
const workerNameEnv = "SERVERY_WORKER_NAME"

// maxLineBytes bounds one protocol line; a config message carrying a long
// certificate chain fits comfortably.
const maxLineBytes = 1 << 20

// Message types, in the order a worker's life uses them.
const (
	msgConfig   = "config"   // parent → worker: the runtime to build
	msgStarting = "starting" // worker → parent: config read, the App's start step runs
	msgPrepared = "prepared" // worker → parent: built, listener adopted, not accepting
	msgCommit   = "commit"   // parent → worker: every worker is prepared, start accepting
	msgReady    = "ready"    // worker → parent: accepting
	msgFailed   = "failed"   // worker → parent: cannot continue, with a reason
	msgRecycle  = "recycle"  // worker → parent: at its limit, replace me (serving on meanwhile), with a reason
	msgDone     = "done"     // worker → parent: drained, with counters, about to exit

	// After commit, the messages the parent may send a serving worker.
	msgTicketKeys = "ticket_keys" // parent → worker: the rotated session ticket keys
	msgStats      = "stats"       // parent → worker: your counters, please; worker → parent: with them
	// An upgrade of the parent (upgrade.go) holds every worker's lines
	// across its exec: hold asks a worker to write nothing after its
	// held until resume, which the parent's new image sends once it has
	// adopted the worker.
	msgHold   = "hold"   // parent → worker: answer held, then write nothing until resume
	msgHeld   = "held"   // worker → parent: the last line before resume
	msgResume = "resume" // parent → worker: write again
)

// message is one protocol line. Type says which other fields matter.
type message struct {
	Type    string        `json:"type"`
	Version int           `json:"version,omitempty"` // config
	Config  *workerConfig `json:"config,omitempty"`  // config
	PID     int           `json:"pid,omitempty"`     // prepared
	Reason  string        `json:"reason,omitempty"`  // failed, recycle, done
	Limit   string        `json:"limit,omitempty"`   // recycle: the limit reached, one of recycleLimitNames
	Stats   *workerStats  `json:"stats,omitempty"`   // done, and a worker's stats
	Keys    [][]byte      `json:"keys,omitempty"`    // ticket_keys
}

// workerConfig is what a worker needs to build its runtime, beyond its
// command line: who it is, its deadlines and the server's settings.
type workerConfig struct {
	Index          int           `json:"index"`
	Count          int           `json:"count"`      // workers in the generation
	Generation     int           `json:"generation"` // from 1
	StartupTimeout time.Duration `json:"startup_timeout"`
	ForceTimeout   time.Duration `json:"force_timeout"`
	// The worker asks to be recycled after this many requests, or after
	// serving this long; 0: never. The parent draws each worker's own,
	// with jitter (recycleLimits).
	RecycleRequests int64         `json:"recycle_requests,omitempty"`
	RecycleAge      time.Duration `json:"recycle_age,omitempty"`
	// RecycleMemory: the worker asks to be recycled once its resident
	// memory exceeds this. WorkerTimeout (-worker-timeout) bounds the
	// App's health check, which gates each stats answer, and is how long
	// a request runs before the worker names it stuck (progress.go).
	// 0: never, none.
	RecycleMemory int64         `json:"recycle_memory,omitempty"`
	WorkerTimeout time.Duration `json:"worker_timeout,omitempty"`
	runtimeConfig
}

// workerStats are a worker's counters, reported in its done message and
// whenever the parent asks (msgStats), and, with a stats answer, what it
// is doing now. The counters only grow in one worker.
type workerStats struct {
	Accepted int64 `json:"accepted"`           // connections accepted
	Served   int64 `json:"served"`             // requests answered
	Inflight int64 `json:"inflight,omitempty"` // requests being answered now
	Memory   int64 `json:"memory,omitempty"`   // resident bytes now (residentBytes)
	// Progress moves whenever the worker's serving path does: requests
	// answered plus writes on a request's behalf (progress.go). Stuck
	// counts requests found running for longer than the worker timeout;
	// Stalled is how long the worker has made no progress with requests
	// in flight, which the parent's probe decides on (hang.go).
	Progress int64         `json:"progress,omitempty"`
	Stuck    int64         `json:"stuck,omitempty"`
	Stalled  time.Duration `json:"stalled,omitempty"`
	// Requests counts answered requests by status class and duration
	// (reqmetrics.go).
	Requests requestStats `json:"requests"`
}

// decodeMessage parses one protocol line and checks that it is complete.
// It is the only place protocol input is decoded, so a malformed line, an
// unknown type or a version mismatch fails the same way on both sides.
func decodeMessage(line []byte) (message, error) {
	var m message
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return message{}, fmt.Errorf("malformed protocol line %.80q: %w", line, err)
	}
	// Decoder.More is false before a stray ']' or '}', so look at the
	// bytes themselves: only whitespace may follow the object.
	if rest := bytes.TrimSpace(line[dec.InputOffset():]); len(rest) > 0 {
		return message{}, fmt.Errorf("malformed protocol line %.80q: trailing data", line)
	}
	return m, m.check()
}

// check reports a message that lacks the fields its type requires.
func (m message) check() error {
	switch m.Type {
	case msgConfig:
		if m.Version != protocolVersion {
			return fmt.Errorf("protocol version %d, want %d", m.Version, protocolVersion)
		}
		if m.Config == nil {
			return errors.New("config message without config")
		}
	case msgPrepared:
		if m.PID <= 0 {
			return errors.New("prepared message without pid")
		}
	case msgFailed, msgRecycle:
		if m.Reason == "" {
			return fmt.Errorf("%s message without reason", m.Type)
		}
	case msgDone:
		if m.Stats == nil {
			return errors.New("done message without stats")
		}
	case msgTicketKeys:
		if len(m.Keys) == 0 {
			return errors.New("ticket_keys message without keys")
		}
		for _, k := range m.Keys {
			if len(k) != 32 {
				return fmt.Errorf("ticket key of %d bytes, want 32", len(k))
			}
		}
	case msgStarting, msgCommit, msgReady, msgStats, msgHold, msgHeld, msgResume:
		// A stats request carries nothing; the parent checks that an
		// answer carries the counters (Supervisor.read).
	default:
		return fmt.Errorf("unknown message type %q", m.Type)
	}
	if m.Keys != nil && m.Type != msgTicketKeys {
		return fmt.Errorf("%s message with ticket keys", m.Type)
	}
	return nil
}

// lineReader reads protocol messages from one pipe.
type lineReader struct {
	sc *bufio.Scanner
}

func newLineReader(r io.Reader) *lineReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLineBytes)
	return &lineReader{sc: sc}
}

// next blocks until a whole line arrives and returns it decoded. It returns
// io.EOF when the writer has closed its end: for a worker, that the parent
// asked it to drain or died; for the parent, that the worker is gone.
func (r *lineReader) next() (message, error) {
	if !r.sc.Scan() {
		if err := r.sc.Err(); err != nil {
			return message{}, fmt.Errorf("read protocol: %w", err)
		}
		return message{}, io.EOF
	}
	return decodeMessage(r.sc.Bytes())
}

// lineWriter writes protocol messages to one pipe; it is safe for
// concurrent use. trace, when set, is called with each message as it is
// sent, in the order the pipe carries them (-log-level debug); a failed
// write is then logged after it.
type lineWriter struct {
	mu    sync.Mutex
	w     io.Writer
	trace func(message)
	held  bool // hold keeps mu until release; only the caller of both reads it
}

// hold sends m and keeps the writer locked, so that m is the last line
// until release: every other send waits for it. The lock is taken once,
// for the write and the hold alike, so no waiting send slips in between.
func (w *lineWriter) hold(m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.Type, err)
	}
	w.mu.Lock()
	w.held = true
	if w.trace != nil {
		w.trace(m)
	}
	if _, err := w.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("send %s: %w", m.Type, err)
	}
	return nil
}

// release ends a hold, if one is on.
func (w *lineWriter) release() {
	if w.held {
		w.held = false
		w.mu.Unlock()
	}
}

// send writes m as one line. A line longer than the pipe's atomic size
// (4 KiB) can arrive in pieces, and a writer that dies or times out
// mid-way leaves a partial line, which the reader's decodeMessage rejects.
func (w *lineWriter) send(m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.Type, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.trace != nil {
		w.trace(m) // before the write, so it comes before the answer's line
	}
	if _, err := w.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("send %s: %w", m.Type, err)
	}
	return nil
}

// trace logs a protocol message sent to p or read from it, at debug
// level, encoded as the pipe carries it (a line the reader could not
// decode is logged by the barrier as malformed instead) but for its
// secrets: the TLS
// identity (its key) and the ticket keys are left out, and what was left
// out is said instead. s.log names the generation. It
// is how a reader follows a startup, a reload or a respawn message by
// message (-log-level debug).
func (s *Supervisor) trace(p *workerProc, dir string, m message) {
	var secrets []string
	if m.Config != nil && (m.Config.TLS != nil || m.Config.TicketKeys != nil) {
		c := *m.Config
		if c.TLS != nil {
			c.TLS = nil
			secrets = append(secrets, "tls identity")
		}
		if c.TicketKeys != nil {
			c.TicketKeys = nil
			secrets = append(secrets, fmt.Sprintf("%d ticket keys", len(m.Config.TicketKeys)))
		}
		m.Config = &c
	}
	if m.Keys != nil {
		secrets = append(secrets, fmt.Sprintf("%d ticket keys", len(m.Keys)))
		m.Keys = nil
	}
	b, _ := json.Marshal(m)
	attrs := []any{"worker", p.index, "pid", p.pid, "line", string(b)}
	if secrets != nil {
		attrs = append(attrs, "left_out", strings.Join(secrets, ", "))
	}
	if dir == "sent" {
		s.log.Debug("protocol sent", attrs...)
	} else {
		s.log.Debug("protocol read", attrs...)
	}
}

// workerError names the worker that broke the barrier or the generation.
type workerError struct {
	Index  int
	PID    int
	Reason string
	Err    error // the underlying cause, if any, for errors.Is
}

func (e *workerError) Error() string {
	return fmt.Sprintf("worker %d (pid %d): %s", e.Index, e.PID, e.Reason)
}

func (e *workerError) Unwrap() error { return e.Err }

// errStartupTimeout is wrapped by Start's error when -startup-timeout passes.
var errStartupTimeout = errors.New("startup timeout")

// startupContext is ctx ended by -startup-timeout as well, with
// errStartupTimeout as its cause: the barrier's, and an App start's in a
// worker or in direct mode.
func startupContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%w after %v", errStartupTimeout, timeout))
}

// barrier runs startup over procs, the started workers, whose events
// arrive on events: it sends each its configuration, waits until every
// worker has reported prepared, sends commit to all of them, and waits
// until every worker has reported ready. It blocks until that completes
// or until the first worker fails, exits or misbehaves, the startup
// timeout passes or ctx is cancelled; the caller then rolls them all back.
// committed says whether commit was sent, after which a worker may have
// answered requests. Start runs it over the whole generation, replace over
// one worker in its slot.
//
// No worker accepts before commit, and commit is sent only after the whole
// prepared quorum, so an early worker cannot answer a request while a later
// one can still fail to build its runtime.
func (s *Supervisor) barrier(ctx context.Context, procs []*workerProc, events <-chan event, keys [][]byte) (committed bool, err error) {
	ctx, cancel := startupContext(ctx, s.cfg.StartupTimeout)
	defer cancel()
	began := time.Now()
	for _, p := range procs {
		s.sendBy(ctx, p, message{Type: msgConfig, Version: protocolVersion, Config: s.workerConfig(p.index, keys)})
	}
	if err := s.await(ctx, procs, events, stagePrepared, began); err != nil {
		return false, fmt.Errorf("prepare: %w", err)
	}
	s.log.Info("committing", "workers", len(procs), "prepared_in", since(began))
	for _, p := range procs {
		s.sendBy(ctx, p, message{Type: msgCommit})
	}
	if err := s.await(ctx, procs, events, stageReady, began); err != nil {
		return true, fmt.Errorf("commit: %w", err)
	}
	return true, nil
}

// workerConfig is the config message for the worker in slot index, with
// the session ticket keys as they are now and its own recycling limits.
func (s *Supervisor) workerConfig(index int, keys [][]byte) *workerConfig {
	cfg := workerConfig{Index: index, Count: int(s.count.Load()), Generation: s.cfg.Generation,
		StartupTimeout: s.cfg.StartupTimeout, ForceTimeout: s.cfg.ForceTimeout, runtimeConfig: s.cfg.Runtime}
	cfg.TicketKeys = keys
	cfg.AcceptPace = acceptPace // workers share the socket: balance it
	cfg.RecycleRequests, cfg.RecycleAge = recycleLimits(s.cfg.MaxRequests, s.cfg.MaxAge)
	cfg.RecycleMemory, cfg.WorkerTimeout = s.cfg.MaxMemory, s.cfg.WorkerTimeout
	return &cfg
}

// sendBy writes one message to a worker's protocol input (its fd 4,
// which the parent writes), giving up when ctx ends (the startup timeout,
// or a cancelled Start), so that a worker that never reads cannot hold
// startup once the pipe's buffer is full. A failed write
// is only logged: the worker has exited or is stuck, and await reports
// which, with the better reason.
func (s *Supervisor) sendBy(ctx context.Context, p *workerProc, m message) {
	deadline, _ := ctx.Deadline()
	p.stdin.SetWriteDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { p.stdin.SetWriteDeadline(time.Now()) })
	defer stop()
	if err := p.out.send(m); err != nil {
		s.log.Warn("cannot write to worker", "worker", p.index, "pid", p.pid, "err", err)
	}
}

// await blocks until every worker of procs has reached stage. Any other
// event, the end of ctx or the startup timeout is returned as an error
// that names a worker.
func (s *Supervisor) await(ctx context.Context, procs []*workerProc, events <-chan event, want stage, began time.Time) error {
	pending := len(procs)
	for pending > 0 {
		select {
		case ev := <-events:
			ev.proc.ended = ev.last()
			if ev.starting() {
				ev.proc.startingAt = time.Now()
				continue
			}
			if ev.recycle() {
				s.recycleAsked(ev.proc, ev.msg.Limit, ev.msg.Reason) // held until the generation serves
				continue
			}
			if err := ev.advance(want); err != nil {
				return err
			}
			pending--
			s.log.Info(want.String(), "worker", ev.proc.index, "pid", ev.proc.pid, "after", since(began))
		case <-ctx.Done():
			return stalled(procs, want, context.Cause(ctx))
		}
	}
	return nil
}

// stalled builds the error for a barrier that ctx ended: it names the
// first worker that had not reached want and what it was doing, and the
// others that had not, each with what it was doing, all on one line.
func stalled(procs []*workerProc, want stage, cause error) error {
	var first *workerError
	var others []string
	for _, p := range procs {
		if p.stage >= want {
			continue
		}
		if first == nil {
			first = &workerError{Index: p.index, PID: p.pid,
				Reason: fmt.Sprintf("not %s: %s: %v", want, p.doing(), cause), Err: cause}
			continue
		}
		others = append(others, fmt.Sprintf("worker %d (pid %d) %s", p.index, p.pid, p.doing()))
	}
	if first == nil {
		return cause
	}
	if len(others) > 0 {
		first.Reason += "; also not " + want.String() + ": " + strings.Join(others, ", ")
	}
	return first
}

// doing says what a worker that has not reached the next stage of the
// barrier is doing, as far as the parent can tell from what it sent.
func (p *workerProc) doing() string {
	switch {
	case p.stage == stagePrepared:
		return "committed, not yet accepting"
	case p.startingAt.IsZero():
		return "had not read its config (still starting, or stuck in the program's code before Main)"
	}
	return fmt.Sprintf("App.Start still running after %v", time.Since(p.startingAt).Round(time.Millisecond))
}

// starting reports whether ev is a worker's starting message, sent once
// before prepared: it advances no stage, and only tells stalled what the
// worker is doing.
func (ev event) starting() bool {
	p := ev.proc
	return ev.err == nil && ev.msg.Type == msgStarting && p.stage == stageStarted && p.startingAt.IsZero()
}

// recycle reports whether ev is a ready worker's request to be recycled,
// which may come while the barrier still waits for others: no failure.
func (ev event) recycle() bool {
	return ev.err == nil && ev.msg.Type == msgRecycle && ev.proc.stage == stageReady
}

// advance moves the event's worker to want if the event is the message
// that stage expects from a worker in the stage before it; anything else is
// that worker's failure.
func (ev event) advance(want stage) error {
	p := ev.proc
	fail := func(reason string, err error) error {
		return &workerError{Index: p.index, PID: p.pid, Reason: reason, Err: err}
	}
	switch {
	case ev.err != nil:
		return fail(ev.err.Error(), ev.err)
	case ev.msg.Type == msgFailed:
		return fail("failed: "+ev.msg.Reason, nil)
	case ev.msg.Type != want.message() || p.stage != want-1:
		return fail(fmt.Sprintf("sent %q while %s", ev.msg.Type, p.stage), errProtocol)
	}
	if want == stagePrepared && ev.msg.PID != p.pid {
		return fail(fmt.Sprintf("prepared with pid %d", ev.msg.PID), errProtocol)
	}
	p.stage = want
	if want == stageReady {
		p.readyAt.Store(time.Now().UnixNano())
	}
	return nil
}

// errProtocol marks a worker that broke the protocol.
var errProtocol = errors.New("protocol violation")

// stage is how far a worker has come through startup, as the parent sees it.
type stage int

const (
	stageStarted  stage = iota // process started, config sent
	stagePrepared              // reported prepared
	stageReady                 // reported ready
)

func (st stage) String() string {
	return [...]string{"started", "prepared", "ready"}[st]
}

// message is the protocol message that moves a worker into st.
func (st stage) message() string {
	return [...]string{"", msgPrepared, msgReady}[st]
}

// since is the time elapsed since t, rounded for logs.
func since(t time.Time) time.Duration {
	return time.Since(t).Round(100 * time.Microsecond)
}
