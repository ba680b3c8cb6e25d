package main

// output.go makes the parent the one writer of every line its workers
// write to stdout or stderr: servery's own records, a program's prints,
// net/http's messages, Go's panic traces and the stack dumps of a hung
// worker. A worker's fds 1 and 2 are pipes that only the parent reads,
// not the parent's own stderr shared by every process, so each line
// reaches the log whole and once, and two workers dumping their stacks
// at once give two dumps, not lines cut into each other. It is uWSGI's
// log master; gunicorn lets each worker write, and its users lose lines
// at rotation.
//
// A record a worker's logger wrote passes through as it is: it names its
// generation, worker and pid already (a line that only looks like one, a
// program's own slog output, passes through too, naming what it names). Anything else (a raw line) is
// wrapped in a record of the log's format that names them, with its
// stream; in JSON, the raw lines that arrive together, such as a stack
// dump, become one record, so every line of the log is one object.
//
// A slow log must not slow requests. The parent reads every worker's
// pipes as fast as they fill into a bounded queue, and one goroutine
// writes the queue out; when the queue is full, lines are dropped and
// counted (/status, /metrics), never left in a pipe, where the worker's
// next write would block. A worker catches SIGPIPE (stdio_unix.go), so a
// write after its parent died fails instead of killing it: it drains
// and exits as it would have.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// outputQueueBytes bounds what the parent holds of its workers' lines
	// while its own log output is slow: 4 MiB, some hundred full stack
	// dumps.
	outputQueueBytes = 4 << 20
	// maxOutputLine is the longest line kept whole; a longer one is cut
	// there, with outputCutMark (follower.next).
	maxOutputLine = 64 << 10
	// rawBlockWait is how long a block of raw lines waits for its next
	// line, so a dump the runtime writes line by line stays one record.
	rawBlockWait = 50 * time.Millisecond
	// maxRawBlock bounds one record of raw lines.
	maxRawBlock = 1 << 20
)

// outputCutMark ends a line cut at maxOutputLine.
const outputCutMark = " [cut: line over 64 KiB]"

// workerOutput is the parent's one writer of its workers' output: their
// logs, and their access lines when there is an access log.
type workerOutput struct {
	sink   *logSink
	logs   *outputQueue
	access *outputQueue // logs, for an access log on stderr; nil for none
}

// newWorkerOutput returns the writer of the workers' output to sink's
// output, and of their access lines to access (nil: none), and starts
// its goroutines; close ends them.
func newWorkerOutput(sink *logSink, access io.Writer) *workerOutput {
	o := &workerOutput{sink: sink, logs: newOutputQueue(sink.w)}
	switch {
	case access == nil:
	case access == io.Writer(sink.w):
		o.access = o.logs // one queue: the order the lines came in
	default:
		o.access = newOutputQueue(access)
	}
	return o
}

// close writes out what is queued and returns. Every follow must have
// ended (the generations are stopped).
func (o *workerOutput) close() {
	o.logs.close()
	if o.access != nil {
		o.access.close()
	}
}

// droppedLines returns how many lines the queues had no room for; 0
// without an output (direct mode).
func (o *workerOutput) droppedLines() int64 {
	if o == nil {
		return 0
	}
	n := o.logs.dropped.Load()
	if o.access != nil && o.access != o.logs {
		n += o.access.dropped.Load()
	}
	return n
}

// outputQueue is a bounded queue of batches of whole lines, and the one
// goroutine that writes them to w.
type outputQueue struct {
	w       io.Writer
	queue   chan []byte
	pending atomic.Int64 // bytes in queue
	dropped atomic.Int64 // lines dropped because the queue was full
	wrote   sync.WaitGroup
	once    sync.Once
}

func newOutputQueue(w io.Writer) *outputQueue {
	q := &outputQueue{w: w, queue: make(chan []byte, 1024)}
	q.wrote.Add(1)
	go q.write()
	return q
}

// write writes the queued batches out, each in one write: for the log,
// under the sink's lock, so a batch never lands inside one of the
// parent's own records.
func (q *outputQueue) write() {
	defer q.wrote.Done()
	for b := range q.queue {
		q.w.Write(b)
		q.pending.Add(-int64(len(b)))
	}
}

// close writes out what is queued, and ends the writer.
func (q *outputQueue) close() {
	q.once.Do(func() { close(q.queue) })
	q.wrote.Wait()
}

// put queues a batch of lines, or drops it, counting its lines, if the
// queue is full.
func (q *outputQueue) put(b []byte, lines int) {
	if len(b) == 0 {
		return
	}
	if q.pending.Add(int64(len(b))) > outputQueueBytes {
		q.pending.Add(-int64(len(b)))
		q.dropped.Add(int64(lines))
		return
	}
	select {
	case q.queue <- b:
	default:
		q.pending.Add(-int64(len(b)))
		q.dropped.Add(int64(lines))
	}
}

// outputSource names a worker's stream for the records that wrap its
// raw lines.
type outputSource struct {
	generation, worker, pid int
	stream                  string // "stdout", "stderr" or "access"
}

// follow reads one stream of one worker to its end, or until r is
// closed (forget, release), and queues its lines, then closes done.
//
// An upgrade's hold (handover.go) parks it: a read deadline now ends its
// read, and once it has queued all it read it waits in h.park for the
// exec, or for the hold to end.
func (o *workerOutput) follow(r *os.File, src outputSource, done chan<- struct{}, h parker) {
	defer close(done)
	defer r.Close()
	if src.stream == "access" {
		forward(r, o.access, h)
		return
	}
	f := &follower{o: o, q: o.logs, src: src, r: r, br: bufio.NewReaderSize(r, maxOutputLine), hold: h}
	f.run()
}

// parker is an upgrade's hold on a generation's pipes, as their readers
// see it (Supervisor.holding, park).
type parker interface {
	holding() bool
	park() bool
}

// settle waits until every line queued so far has been written, or
// deadline: an upgrade's exec would lose what is still queued.
func (o *workerOutput) settle(deadline time.Time) {
	if o == nil {
		return
	}
	for _, q := range []*outputQueue{o.logs, o.access} {
		for q != nil && q.pending.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
}

// forward passes a worker's access lines on as they come: every whole
// line a read brings goes out in one batch, the rest waits for its end.
// It looks at no line, so the access log costs the parent a read, a
// copy and a write for each batch a worker flushed.
func forward(r *os.File, q *outputQueue, h parker) {
	buf := make([]byte, 64<<10)
	var tail []byte // a line not yet whole
	for {
		n, err := r.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) && h.holding() {
			// An upgrade: what came is queued, a part line as a line.
			if data := append(tail, buf[:n]...); len(data) > 0 {
				if data[len(data)-1] != '\n' {
					data = append(data, '\n')
				}
				q.put(data, bytes.Count(data, []byte{'\n'}))
			}
			tail = nil
			h.park()
			r.SetReadDeadline(time.Time{})
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// A hold that ended before this read saw it: read on.
			r.SetReadDeadline(time.Time{})
			err = nil
		}
		data := buf[:n]
		if len(tail) > 0 {
			data = append(tail, data...)
			tail = nil
		}
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			q.put(bytes.Clone(data[:i+1]), bytes.Count(data[:i+1], []byte{'\n'}))
			data = data[i+1:]
		}
		switch {
		case len(data) > maxOutputLine: // no line is this long: cut it
			q.put(append(append(bytes.Clone(data[:maxOutputLine]), outputCutMark...), '\n'), 1)
		case len(data) > 0:
			tail = bytes.Clone(data)
		}
		if err != nil {
			if len(tail) > 0 {
				q.put(append(tail, '\n'), 1)
			}
			return
		}
	}
}

// follower is one stream's reader; only follow's goroutine uses it.
type follower struct {
	o       *workerOutput
	q       *outputQueue
	src     outputSource
	r       *os.File
	br      *bufio.Reader
	batch   []byte // lines for the next put
	lines   int
	raw     []string // a block of raw lines not yet wrapped
	rawN    int      // their bytes
	partial []byte   // a line a read deadline interrupted
	hold    parker
}

func (f *follower) run() {
	for {
		line, err := f.next()
		if line != nil {
			f.add(line)
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && f.hold.holding() {
				// An upgrade: what came is queued, a part line as a
				// line, before the exec.
				if f.partial != nil {
					f.add(f.partial)
					f.partial = nil
				}
				f.flushRaw()
				f.flush()
				f.hold.park()
				f.r.SetReadDeadline(time.Time{})
				continue
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				f.r.SetReadDeadline(time.Time{})
				f.flushRaw()
				f.flush()
				continue
			}
			f.flushRaw()
			f.flush()
			return
		}
		if f.br.Buffered() == 0 {
			// Nothing more has arrived: the batch goes out now. A raw
			// block waits a moment for the rest of a dump.
			f.flush()
			if len(f.raw) > 0 && !f.hold.holding() { // a hold's deadline is now, and stays so
				f.r.SetReadDeadline(time.Now().Add(rawBlockWait))
			}
		}
	}
}

// next returns the next whole line, without its newline; a line over
// maxOutputLine is cut there, with a mark, and the rest of it that has
// arrived skipped (what comes after a pause is read as lines of its own).
// A line the read deadline interrupted is kept for the next call; at the
// end of the stream a last line without a newline is returned with the
// error.
func (f *follower) next() ([]byte, error) {
	line, err := f.br.ReadSlice('\n')
	if f.partial != nil {
		line = append(f.partial, line...)
		f.partial = nil
	} else {
		line = bytes.Clone(line)
	}
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || len(line) > maxOutputLine:
		cut := append(line[:min(len(line), maxOutputLine)], outputCutMark...)
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = f.br.ReadSlice('\n')
		}
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
			return cut, err
		}
		return cut, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		if len(line) > 0 {
			f.partial = line
		}
		return nil, err
	case err != nil:
		if len(line) > 0 {
			return line, err
		}
		return nil, err
	}
	return bytes.TrimSuffix(line, []byte("\n")), nil
}

// add takes one line: a worker's own record passes through; a raw line
// joins the block that is wrapped in a record.
func (f *follower) add(line []byte) {
	if f.o.sink.isRecord(line) {
		f.flushRaw()
		f.batch = append(append(f.batch, line...), '\n')
		f.lines++
		return
	}
	if !f.o.sink.json.Load() {
		// Text: a record per line, which keeps the log one line a
		// record for grep.
		f.raw = append(f.raw[:0], string(line))
		f.flushRaw()
		return
	}
	f.raw = append(f.raw, string(line))
	f.rawN += len(line)
	if f.rawN >= maxRawBlock {
		f.flushRaw()
	}
}

// flushRaw wraps the raw block, if any, in one record and adds it to the
// batch.
func (f *follower) flushRaw() {
	if len(f.raw) == 0 {
		return
	}
	var b bytes.Buffer
	text := slog.String("line", f.raw[0])
	if len(f.raw) > 1 {
		text = slog.Any("lines", f.raw)
	}
	slog.New(f.o.sink.handler(&b)).LogAttrs(context.Background(), slog.LevelInfo, "worker output",
		slog.Int("generation", f.src.generation), slog.Int("worker", f.src.worker),
		slog.Int("pid", f.src.pid), slog.String("stream", f.src.stream), text)
	f.batch = append(f.batch, b.Bytes()...)
	f.lines += len(f.raw) // dropped, they count as the lines they hold
	f.raw, f.rawN = nil, 0
}

// flush queues the batch.
func (f *follower) flush() {
	f.q.put(f.batch, f.lines)
	f.batch, f.lines = nil, 0
}

// outputStreams name a worker's output pipes, in the order outputPipes
// makes them.
var outputStreams = [...]string{"stdout", "stderr", "access"}

// outputPipes returns the pipes for a worker's stdout and stderr, and
// its access lines if access is set: the parent's read ends and the
// worker's write ends, each in that order.
func outputPipes(access bool) (read, write []*os.File, err error) {
	n := 2
	if access {
		n = 3
	}
	for range n {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(append(read, write...)...)
			return nil, nil, err
		}
		read, write = append(read, r), append(write, w)
	}
	return read, write, nil
}

// closeAll closes every file.
func closeAll(files ...*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// following returns p's output pipes whose followers still read them.
func (p *workerProc) following() []*os.File {
	var live []*os.File
	for i, f := range p.logs {
		select {
		case <-p.streamsDone[i]:
		default:
			live = append(live, f)
		}
	}
	return live
}

// followOutput starts the readers of p's stdout and stderr, which close
// p.logsDone once both have ended; without them it closes it at once.
func (s *Supervisor) followOutput(p *workerProc) {
	if len(p.logs) == 0 {
		close(p.logsDone)
		return
	}
	done := make([]chan struct{}, len(p.logs))
	for i := range done {
		done[i] = make(chan struct{})
	}
	p.streamsDone = done
	for i, r := range p.logs {
		if r == nil { // a stream that had ended before an upgrade (handover.go)
			close(done[i])
			continue
		}
		src := outputSource{generation: s.cfg.Generation, worker: p.index, pid: p.pid, stream: outputStreams[i]}
		s.readers.Add(1) // release waits for it, so nothing is queued after the output closes
		go func() {
			defer s.readers.Done()
			s.cfg.Output.follow(r, src, done[i], s)
		}()
	}
	go func() {
		for _, d := range done {
			<-d
		}
		close(p.logsDone)
	}()
}
