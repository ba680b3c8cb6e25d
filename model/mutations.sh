#!/usr/bin/env bash
# model/mutations.sh -- mutation check: the tests guard the design claims.
#
#   bash model/mutations.sh                     every mutant
#   bash model/mutations.sh sigterm tls         only these (names as in the table)
#   MUTANT_TIMEOUT=300 bash model/mutations.sh  longer limit per test run (default 120 s; the
#                                               baseline's, BASELINE_TIMEOUT, 900 s)
#   KEEP=1 bash model/mutations.sh barrier      keep the test logs to read
#
# For each central claim of the design (DESIGN.md's "Design record to code"
# and "Guarantees and limits" tables) it breaks a copy of the repository
# with one small source edit, builds the copy's test binary and runs only
# the tests that back the claim; they must FAIL. Each edit replaces an
# exact snippet that must occur exactly once in its file, so a mutant whose
# snippet has moved or changed is reported as "did not apply" and fails the
# check instead of passing vacuously; a mutant that does not compile fails
# it too. Before any mutant, the same tests run unmutated and must all pass
# (each by name), or a failure would prove nothing.
#
# The working tree (tracked and untracked, not ignored files) is copied once
# into a temporary directory and each mutant starts from that copy;
# the repository itself is never touched. The baseline runs alone; then
# mutants run JOBS at a time (default 3), without -race, on the shared Go
# build cache. Test binaries live under the
# temporary directory, so any process left behind (a mutant can break the
# very kill that cleans up, e.g. without Setsid) is found by that path and
# killed by pid after each run. It prints a table (claim, mutation, tests,
# result) and exits non-zero unless every mutant applied, compiled and was
# caught.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
limit=${MUTANT_TIMEOUT:-120}
# The tests start servery under a fake service manager where they need one.
unset NOTIFY_SOCKET LISTEN_PID LISTEN_FDS LISTEN_FDNAMES GOMAXPROCS

work=$(mktemp -d "${TMPDIR:-/tmp}/servery-mutations.XXXXXX")

# leftovers lists processes running a test binary under the path $1
# (default: any of this script's).
leftovers() { pgrep -f -- "${1:-$work/}" || true; }

# reap NAME [PATH] kills, by pid, whatever a test run under PATH left
# behind, and says so.
reap() {
	local pid left
	left=$(leftovers "${2:-}")
	[ -z "$left" ] && return 0
	for pid in $left; do kill -KILL "$pid" 2>/dev/null || true; done
	echo "      (killed $(echo "$left" | wc -w) leftover process(es) of $1)" >&2
}

cleanup() {
	local pid
	for pid in $(leftovers); do kill -KILL "$pid" 2>/dev/null || true; done
	if [ "${KEEP:-0}" = 1 ]; then
		echo "logs kept in $work (one NAME.log per mutant)" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'echo "mutations.sh: line $LINENO: $BASH_COMMAND failed" >&2' ERR

# ------------------------------------------------------------- mutants
# mutant NAME CLAIM MUTATION TESTS [RUNS]: registers a mutant; the
# function m_NAME applies its edits. TESTS is a space-separated list of
# test names (bench/TestX for one of the bench package's); RUNS (default 1), for a test that catches the mutant only
# some of the time, runs them up to that many times, until one fails.
names=()
declare -A claim_of mutation_of tests_of runs_of
mutant() {
	names+=("$1")
	claim_of[$1]=$2
	mutation_of[$1]=$3
	tests_of[$1]=$4
	runs_of[$1]=${5:-1}
}

mutant barrier "no answer before every worker is prepared" \
	"commit after the first prepared" \
	"TestBarrierDelaysEveryAnswerUntilAllPrepared"
m_barrier() {
	edit barrier.go 'pending := len(procs)' \
		'pending := len(procs); if want == stagePrepared { pending = 1 }'
}

mutant rollback "a failed startup leaves no process" \
	"Start returns the error without stopping the generation" \
	"TestRollbackWhenOneWorkerFailsBeforeReady TestRollbackOnStartupTimeout"
m_rollback() {
	# events are still read, so a later Stop (the test's cleanup) works
	edit supervisor.go 's.stopWith(fmt.Errorf("start: %w", err), drain)' \
		'go func() { for range s.events {} }(); return err'
}

mutant one-writer "the parent writes every line a worker writes, whole, so -log-format json is one object a line, prints and stack dumps included" \
	"workers write to the parent's stderr themselves" \
	"TestJSONLogIsOneObjectALineWithPrintsPanicsDumpsAndAReload"
m_one-writer() {
	edit supervisor.go '	if s.cfg.Output != nil && cmd.Stderr == nil {' '	if false && s.cfg.Output != nil && cmd.Stderr == nil {'
}

mutant log-drop "a slow log drops the workers' lines and counts them; it never blocks a request" \
	"a full queue waits for room" \
	"TestASlowLogDropsWorkerLinesAndCountsThemWithoutSlowingRequests"
m_log-drop() {
	edit output.go '	if q.pending.Add(int64(len(b))) > outputQueueBytes {' '	if q.pending.Add(int64(len(b))) > outputQueueBytes && false {'
	edit output.go '	select {
	case q.queue <- b:
	default:
		q.pending.Add(-int64(len(b)))
		q.dropped.Add(int64(lines))
	}' '	q.queue <- b'
}

mutant sigpipe "a worker whose parent died while it logs drains and exits 0" \
	"Go's SIGPIPE ends the worker at its first write to the broken pipe" \
	"TestWorkerWhoseParentIsKilledWhileItLogsDrainsAndExits0"
m_sigpipe() {
	edit stdio_unix.go 'func survivePipeBreaks() { signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) }' 'func survivePipeBreaks() { _ = signal.Notify }'
}

mutant reopen "SIGUSR1 reopens the access log file: after a rotation, new lines go to a new file at the path" \
	"the reopen keeps writing the moved file" \
	"TestAccessLogFileLogsEveryRequestOnceAcrossRotations"
m_reopen() {
	edit accesslog.go 'func (a *accessFile) reopen() error {' 'func (a *accessFile) reopen() error {
	if true {
		return nil
	}'
}

mutant access-skip "-access-log-skip leaves its paths out of the access log" \
	"every path is logged" \
	"TestAccessLogInJSONSkipsPathsAndCapsLongFields"
m_access-skip() {
	edit accesslog.go '		if al.skip[r.URL.Path] {' '		if false && al.skip[r.URL.Path] {'
}

mutant access-cap "a client-chosen field of an access line is cut at 2 KiB with a mark" \
	"fields of any length" \
	"TestAccessLogInJSONSkipsPathsAndCapsLongFields"
m_access-cap() {
	edit accesslog.go '	if len(s) <= maxAccessField {' '	if true {'
}

mutant request-metrics "the request metrics sum every worker that held a slot: they never go backwards at a respawn, a recycle or a reload" \
	"a slot's status classes are its latest worker's alone" \
	"TestCountersNeverGoBackwardsAcrossRespawnRecycleReloadAndScale"
m_request-metrics() {
	edit reqmetrics.go '		a.Classes[i] += b.Classes[i]' '		a.Classes[i] = b.Classes[i]'
}

mutant handshake-flood "failed TLS handshakes are logged at most once a second, with a count of those left out" \
	"every failed handshake is logged" \
	"TestFailedTLSHandshakesAreLoggedAtMostOnceASecondWithACount"
m_handshake-flood() {
	edit logging.go '	if !h.last.IsZero() && now.Sub(h.last) < handshakeLogEvery {' '	if false && !h.last.IsZero() && now.Sub(h.last) < handshakeLogEvery {'
}

mutant handshake-eof "a client that closes before its TLS handshake (EOF, a reset) is a DEBUG line, not a warning, and spends no room in the warnings' rate" \
	"an early close is a failed handshake like any other" \
	"TestFailedTLSHandshakesAreLoggedAtMostOnceASecondWithACount"
m_handshake-eof() {
	edit logging.go '	return err == "EOF" || strings.HasSuffix(err, "connection reset by peer")' '	return false'
}

mutant panic-500 "a handler's panic is answered 500 (or cut off) and logged once, over HTTP/1.1 and HTTP/2" \
	"net/http recovers it: an empty reply, the stack inside the message" \
	"TestHandlerPanicIsAnswered500OrCutOffAndLoggedOnce"
m_panic-500() {
	edit worker.go '		defer srv.answerPanic(w, r)
' ''
}

mutant panic-committed "a panic after the header went out cuts the response off, never appends a 500 to it" \
	"the 500 is written whatever was sent" \
	"TestHandlerPanicIsAnswered500OrCutOffAndLoggedOnce"
m_panic-committed() {
	edit worker.go '	if !uncommitted(w) {
		panic(http.ErrAbortHandler)
	}' ''
}

mutant rollback-hurry "a rollback's SIGTERM ends the context of the stop step it runs" \
	"the stop step before serving is never told to hurry" \
	"TestRollbackRunsTheStopStepOfEveryWorkerWhoseStartReturned"
m_rollback-hurry() {
	edit worker.go 'func() { hurried(); stopEarly() }' 'func() { stopEarly() }'
}

mutant accesslog-h2 "with an access log, HTTP/2 keeps its write deadlines and its 500 for a panic" \
	"the access log's writer hides the stream's SetWriteDeadline" \
	"TestHandlerPanicIsAnswered500OrCutOffAndLoggedOnce"
m_accesslog-h2() {
	edit accesslog.go 'func (r *statusRecorder) SetWriteDeadline(t time.Time) error {' 'func (r *statusRecorder) SetWriteDeadlineOff(t time.Time) error {'
}

mutant accesslog-cut "the access log says 444 for a request a panic left with no response" \
	"it says the 200 it assumed" \
	"TestHandlerPanicIsAnswered500OrCutOffAndLoggedOnce"
m_accesslog-cut() {
	edit accesslog.go '				if !rec.began {
					rec.status = statusNoResponse
				}
' ''
}

mutant trace-secrets "-log-level debug traces the protocol without its secrets" \
	"the TLS identity's key is traced with its config" \
	"TestDebugLevelTracesTheProtocolMessageByMessage"
m_trace-secrets() {
	edit barrier.go '			c.TLS = nil
' ''
}

mutant trace-read "-log-level debug traces what the parent reads, message by message" \
	"only what it sends is traced" \
	"TestDebugLevelTracesTheProtocolMessageByMessage"
m_trace-read() {
	edit supervisor.go '			s.trace(p, "read", m)' '			_ = m'
}

mutant rollback-stop "a rollback runs the stop step of every worker whose App started" \
	"SIGTERM before serving exits at once, cutting the stop step the EOF began" \
	"TestRollbackRunsTheStopStepOfEveryWorkerWhoseStartReturned"
m_rollback-stop() {
	edit worker.go '	started.Store(rt)
' ''
}

mutant sigterm "stop escalates: SIGTERM at the drain deadline" \
	"no SIGTERM stage (straight to SIGKILL at the force deadline)" \
	"TestTerminateAtDrainDeadlineStopsWorkerThatIgnoresEOF"
m_sigterm() {
	edit drain.go '{drain, s.hurry, syscall.SIGTERM, "terminate"},' ''
}

mutant sigkill "stop escalates: SIGKILL at the force deadline" \
	"no SIGKILL stage" \
	"TestForceKillsWorkerThatIgnoresTerm"
m_sigkill() {
	edit drain.go '{force, nil, syscall.SIGKILL, "kill"},' ''
}

mutant eof-ready "EOF on stdin after ready: the worker drains and exits" \
	"the worker never notices its stdin closed after commit" \
	"TestEOFAfterReadyDrainsInFlightRequest TestParentSIGKILLDrainsWorkers"
m_eof-ready() {
	edit worker.go 'close(eof)' 'select {}'
}

mutant eof-commit "EOF on stdin before commit: exit without accepting" \
	"EOF before commit is taken as commit" \
	"TestWorkerEOFBeforeCommitExitsWithoutAccepting"
m_eof-commit() {
	edit worker.go 'return false, errors.New("stdin closed before commit")' 'return true, nil'
}

mutant setsid "workers lead their own session: a kill reaches descendants" \
	"Setsid: false (workers stay in the parent's process group)" \
	"TestKillReachesWorkersGrandchild"
m_setsid() {
	edit proc_unix.go 'Setsid: true' 'Setsid: false'
}

mutant group-kill "the kill reaches the worker's whole process group" \
	"signal the worker's pid, not its group" \
	"TestKillReachesWorkersGrandchild"
m_group-kill() {
	edit proc_unix.go 'syscall.Kill(-pid, s)' 'syscall.Kill(pid, s)'
}

mutant tls "one TLS identity, generated once by the parent" \
	"each worker serves its own fresh self-signed certificate" \
	"TestOneTLSIdentityAcrossWorkers"
m_tls() {
	edit worker.go 'tc, err := cfg.TLS.serverConfig()' \
		'tc, err := func() (*tls.Config, error) { id, err := selfSignedIdentity("", time.Now()); if err != nil { return nil, err }; return id.serverConfig() }()'
}

mutant root "nothing outside -dir is served (os.Root)" \
	"files opened with os.Open(dir/name) instead of the root" \
	"TestStaticRefusesHostilePaths TestPathEscapesOverTheWireStayInsideRoot"
m_root() {
	edit static.go '	if fi, err := root.Stat(name); err != nil {' '	if fi, err := os.Stat(root.Name() + "/" + name); err != nil {'
	edit static.go '	f, err := root.OpenFile(name, openFlags, 0)' '	f, err := os.OpenFile(root.Name()+"/"+name, openFlags, 0)'
}

mutant dotfiles "no dotfile is served (except /.well-known/)" \
	"hiddenPath always false" \
	"TestStaticRefusesHostilePaths TestPathEscapesOverTheWireStayInsideRoot"
m_dotfiles() {
	edit static.go 'return strings.Contains(clean, "/.")' 'return false'
}

mutant deadline-note "write timeout holds after net/http or crypto/tls clears the deadline" \
	"limitConn.SetWriteDeadline override renamed away" \
	"TestWriteTimeoutHoldsAfterTheFirstResponse TestWriteTimeoutHoldsOverTLS"
m_deadline-note() {
	edit listener.go 'func (c *limitConn) SetWriteDeadline(' 'func (c *limitConn) setWriteDeadlineUnused('
}

mutant rearm-write "a steady slow reader is never cut (large writes)" \
	"Write arms the deadline once, not per 64 KiB chunk" \
	"TestSteadySlowReaderIsNeverCut"
m_rearm-write() {
	edit listener.go $'for len(b) > 0 {\n\t\tc.rearmWrite()' $'c.rearmWrite()\n\tfor len(b) > 0 {'
}

mutant rearm-sendfile "a steady slow reader is never cut (sendfile)" \
	"ReadFrom arms the deadline once, not per 64 KiB chunk" \
	"TestSteadySlowReaderIsNeverCut"
m_rearm-sendfile() {
	edit listener.go $'for remain > 0 {\n\t\tc.rearmWrite()' $'c.rearmWrite()\n\tfor remain > 0 {'
}

mutant stalled "a client that stops reading is cut by -write-timeout" \
	"limitConn ignores the write timeout" \
	"TestStalledReaderIsCutOffAndFreesItsSlot"
m_stalled() {
	edit listener.go 'writeTimeout: l.writeTimeout}' 'writeTimeout: 0}'
}

mutant ready "READY=1 only once every worker is ready" \
	"Start returns (READY=1) after the first ready" \
	"TestReadyIsNotifiedOnlyOnceEveryWorkerIsReady"
m_ready() {
	edit barrier.go 'pending := len(procs)' \
		'pending := len(procs); if want == stageReady { pending = 1 }'
	# the other workers' ready then reaches the monitor: not a lost worker
	edit supervisor.go 'reason := "sent " + ev.msg.Type + " after ready"' \
		'if ev.err == nil && ev.msg.Type == msgReady { return }; reason := "sent " + ev.msg.Type + " after ready"'
}

mutant rollback-drain "a rollback after commit drains in-flight requests" \
	"rollback after commit terminates at once (drain 0)" \
	"TestRollbackAfterCommitDrainsInFlightRequests"
m_rollback-drain() {
	edit supervisor.go 'drain = s.cfg.DrainTimeout' 'drain = 0'
}

mutant cache-version "the cache never goes back to an older version" \
	"add replaces an entry without checking the file's current version" \
	"TestStaticCacheNeverGoesBackToAnOlderVersion"
m_cache-version() {
	edit cache.go '|| !current(e)' ''
}

mutant h2-stream "an HTTP/2 handler that computes or pauses is not cut by the write timeout" \
	"the streams wrapper not installed: the deadline net/http arms as a stream opens is never moved" \
	"TestHTTP2HandlerSlowerThanTheWriteTimeoutIsNotCut TestHTTP2StreamThatPausesAfterAFlushIsNotCut"
m_h2-stream() {
	edit worker.go 'srv.streams(srv.bodies(srv.counting(h)))' 'srv.bodies(srv.counting(h))'
}

mutant h2-base "an HTTP/2 stream that never reopens its window is cut, in a handler's write or in net/http's flush after it" \
	"HTTP/2 connections are not handed the server copy with the write timeout (http2Base)" \
	"TestHTTP2StreamWithoutWindowUpdateIsCut TestHTTP2ResponseStalledAtItsLastFlushIsCut"
m_h2-base() {
	edit listener.go '	serveH2 := hs.TLSNextProto["h2"]
	if serveH2 == nil {' '	serveH2 := hs.TLSNextProto["h2"]
	if serveH2 != nil {'
}

mutant h2-base-shutdown "an HTTP/2 connection whose handshake ends after Shutdown began is told to go (GOAWAY) and the drain ends cleanly" \
	"the server copy HTTP/2 connections are served with is never told the server is shutting down" \
	"TestHTTP2ConnectionWhoseHandshakeEndsAfterShutdownBeganIsToldToGo"
m_h2-base-shutdown() {
	edit drain.go '		srv.h2base.SetKeepAlivesEnabled(false)' '		_ = srv.h2base'
}

mutant h2-off "without net/http's HTTP/2 server (GODEBUG=http2server=0) a TLS client offering h2 is answered over HTTP/1.1" \
	"the server still offers h2 in the TLS handshake" \
	"TestWithoutNetHTTPsHTTP2ServerTLSClientsGetHTTP1"
m_h2-off() {
	edit listener.go '		hs.TLSConfig.NextProtos = slices.DeleteFunc(slices.Clone(hs.TLSConfig.NextProtos), func(p string) bool { return p == "h2" })' '		_ = slices.Clone[[]string]'
}

mutant h2-hold-waiting "a write waiting on an HTTP/2 client's window is left to the deadline" \
	"a visit of the server's holds moves the deadline while a write waits" \
	"TestHTTP2StreamWithoutWindowUpdateIsCut"
m_h2-hold-waiting() {
	edit listener.go '	if s.gone || s.moving || s.waiting || s.deadline.Sub(now) > s.timeout*3/4 {' '	if s.gone || s.moving || s.deadline.Sub(now) > s.timeout*3/4 {'
	edit listener.go '	if s.gone || s.waiting {' '	if s.gone {'
}

mutant h2-visit-apart "a move that waits on one HTTP/2 connection holds up no other handler" \
	"a visit moves each deadline itself, under the set's lock" \
	"TestAMoveWaitingOnOneConnectionHoldsUpNoOtherHandler"
m_h2-visit-apart() {
	edit listener.go '			go s.holdOff()' '			s.holdOff()'
}

mutant h2-remove-waits "a deadline move never reaches an HTTP/2 stream whose handler returned" \
	"a handler leaves the set without waiting for a move under way" \
	"TestAMoveNeverReachesAStreamWhoseHandlerReturned"
m_h2-remove-waits() {
	edit listener.go $'\th.mu.Unlock()\n\ts.mu.Lock()\n\ts.gone = true\n\ts.mu.Unlock()' $'\th.mu.Unlock()'
}

mutant h2-late "an HTTP/2 handler net/http started late is not cut while it computes" \
	"a visit moves a deadline only once half of it is left" \
	"TestHTTP2HandlerStartedLateIsNotCutWhileItComputes"
m_h2-late() {
	edit listener.go 's.deadline.Sub(now) > s.timeout*3/4 {' 's.deadline.Sub(now) > s.timeout/2 {'
}

mutant multipart-cleanup "a parsed multipart form's temporary files are removed after its request" \
	"net/http's request is not told of the form the handler parsed on its copy" \
	"TestAMultipartFormsTemporaryFilesAreRemovedAfterItsRequest"
m_multipart-cleanup() {
	edit listener.go '		r.MultipartForm = req.MultipartForm' '		_ = req.MultipartForm'
}

mutant h2-nobody "an HTTP/2 request body the client has not ended gets its read deadline, whatever its length says" \
	"an HTTP/2 stream with no declared length (ContentLength -1) taken for one without a body" \
	"TestAnHTTP2BodyGetsADeadlineOnlyWhenItIsRead TestAnHTTP2BodyLeftOpenWithoutALengthIsCutAtTheBodyTimeout"
m_h2-nobody() {
	edit listener.go 'r.ContentLength == 0 && !declared' 'r.ContentLength <= 0 && !declared'
}

mutant h2-settle "an HTTP/2 handler that pauses after a write its client held up for most of the deadline is not cut" \
	"the end of a write leaves the deadline where the write found it" \
	"TestHTTP2PauseAfterAFlushItsClientHeldUpIsNotCut"
m_h2-settle() {
	edit listener.go $'\t\ts.move(now)\n\t}\n}' $'\t\t_ = now\n\t}\n}'
}

mutant h2-hold "an HTTP/2 handler that computes between writes is not cut" \
	"a visit of the server's holds moves only what the writer knows, not the stream's deadline" \
	"TestHTTP2HandlerSlowerThanTheWriteTimeoutIsNotCut"
m_h2-hold() {
	edit listener.go $'\ts.move(time.Now())\n}' $'\ts.deadline = time.Now().Add(s.timeout)\n}'
}

mutant ready-stopping "READY=1 never follows STOPPING=1" \
	"a generation ready as the end began is promoted (READY=1)" \
	"TestReadyIsNeverNotifiedAfterStopping"
m_ready-stopping() {
	edit lifecycle.go '	if err == nil && !l.ending && !(l.leaving && !first) {' '	if err == nil {'
}

mutant sidecar-stale "a sidecar older than its file is never served" \
	"sidecars are used whatever their modification time" \
	"TestStaleSidecarIsNotServed"
m_sidecar-stale() {
	edit encoding.go 'fi.ModTime().Unix() >= time.Unix(0, modTime).Unix()' 'fi.ModTime().Unix() >= time.Unix(0, 0).Unix()'
}

mutant sidecar-second "a sidecar made by brotli -k (its time cut to the second) is served" \
	"sidecar times compared to the nanosecond" \
	"TestSidecarWithItsFilesTimeCutToTheSecondIsServed"
m_sidecar-second() {
	edit encoding.go 'fi.ModTime().Unix() >= time.Unix(0, modTime).Unix()' 'fi.ModTime().UnixNano() >= time.Unix(0, modTime).UnixNano()'
}

mutant sidecar-reval "a changed sidecar is noticed like a changed file" \
	"revalidation stats the file but not its sidecars" \
	"TestSidecarsAreCachedWithinTheBudgetAndRevalidated"
m_sidecar-reval() {
	edit static.go '&&
		h.statSidecars(e.name, e.version.modTime) == e.sidecars' ''
}

mutant nosniff "every response says X-Content-Type-Options: nosniff" \
	"the header is set on file responses only" \
	"TestEveryResponseSaysNosniff"
m_nosniff() {
	edit static.go 'w.Header()["X-Content-Type-Options"] = hdrNosniff' ''
	edit static.go 'hdr["Content-Type"] = e.contentType' 'hdr["Content-Type"] = e.contentType; hdr["X-Content-Type-Options"] = hdrNosniff'
}

mutant fallback-asset "a missing asset stays 404 under -fallback" \
	"the fallback answers every missing path" \
	"TestFallbackServesTheAppForMissingRoutesOnly"
m_fallback-asset() {
	edit pages.go 'if h.fallback == "" || path.Ext(strings.TrimSuffix(key, "/")) != "" {' 'if h.fallback == "" {'
}

mutant reload-early "the serving generation retires only once every new worker is ready" \
	"a reload retires the serving generation as the new one starts" \
	"TestFailedReloadChangesNothing"
m_reload-early() {
	edit lifecycle.go '	v.begin(l, context.Background(), replies)' '	v.stop(l, l.serving, nil)
	v.begin(l, context.Background(), replies)'
}

mutant reload-coalesce "SIGHUPs during a reload coalesce into one more" \
	"a reload stays due once it began, so requests never coalesce" \
	"TestReloadRequestsCoalesceIntoOneMore"
m_reload-coalesce() {
	edit lifecycle.go 'l.reload, l.queued = false, nil' 'l.queued = nil'
}

mutant reload-stop "a stop during a reload or the first start cuts it short and leaves nothing behind" \
	"the end does not cancel the starting generation" \
	"TestStopDuringReloadLeavesNothing TestDirectSignalDuringTheFirstStartIsACleanStop"
m_reload-stop() {
	edit lifecycle.go '	if l.starting != nil {
		l.starting.cancel()
	}
	if l.slots != nil {' '	if l.slots != nil {'
}

mutant reload-drain "a retiring worker answers every connection it accepted" \
	"drain shuts down without letting HTTP/1 clients leave first" \
	"TestReloadUnderLoadDropsNothing"
m_reload-drain() {
	edit drain.go '	srv.awaitClosed(ctx)' ''
}

mutant drain-busy "a keep-alive connection is never closed under a request its client may have sent" \
	"the drain does not wait for a response under way when it began" \
	"TestKeepAliveRequestAfterAResponseThatSpansADrainIsAnswered"
m_drain-busy() {
	edit drain.go '			case connBusy:
				return false' '			case connBusy:
				return true'
}

mutant drain-close "every HTTP/1 response committed during a drain says Connection: close" \
	"only handlers that began after the drain are told" \
	"TestResponseCommittedAfterADrainBeganSaysConnectionClose"
m_drain-close() {
	edit drain.go '		h["Connection"] = hdrClose' ''
}

mutant drain-handlers "the App's stop runs only after every handler returned" \
	"the drain ends when net/http's Shutdown does" \
	"TestDrainEndsOnlyAfterEveryHandlerReturned"
m_drain-handlers() {
	edit drain.go '		err = srv.awaitHandlers(ctx)' '		err = nil'
}

mutant end-all "the end stops every generation, one ready as it began included" \
	"a generation ready as the end began is left running" \
	"TestServingWorkerLostAsAReloadBecomesReadyEndsTheService"
m_end-all() {
	edit lifecycle.go '		// Ready in the instant the end, or its shutdown delay, began:
		// it never serves.
		v.stop(l, ev.gen, nil)' '		// BROKEN: left running'
}

mutant promote-lost "a new generation that lost a worker before serving fails the reload" \
	"a loss taken before the generation was seen ready is ignored" \
	"TestReloadFailsIfItsGenerationLostAWorkerBeforeServing TestWorkerLostAfterStartBeforePromotionFailsTheReload"
m_promote-lost() {
	edit supervisor.go '	if lost := s.lostUnserved; lost != nil {' '	if lost := s.lostUnserved; lost != nil && false {'
}

mutant ticket-shared "one set of session ticket keys: a returning client resumes on any worker" \
	"each worker keeps its own automatic ticket keys" \
	"TestSessionsResumeWhicheverWorkerAnswers"
m_ticket-shared() {
	edit tls.go '	cfg.SetSessionTicketKeys(arr)' '	_ = arr'
}

mutant ticket-promote "a rotation during a reload reaches the new generation" \
	"promotion does not send the current ticket keys" \
	"TestReloadHandsTheNewGenerationTheCurrentTicketKeys"
m_ticket-promote() {
	edit supervisor.go '	if keys != nil {
		go s.sendTicketKeys(seq, keys)
	}' ''
}

mutant ticket-previous "a rotation keeps the previous ticket key, so a ticket issued before it still resumes" \
	"a rotation drops every older key at once" \
	"TestTicketKeyRotationKeepsThePreviousKeyThenDropsIt"
m_ticket-previous() {
	edit tls.go '	k.keys = append([][]byte{key}, k.keys[:min(len(k.keys), 1)]...)' '	k.keys = append([][]byte{key}, k.keys[:0]...)'
}

mutant ticket-every "a rotation reaches every worker" \
	"a rotation reaches only the first worker" \
	"TestTicketKeyRotationKeepsThePreviousKeyThenDropsIt"
m_ticket-every() {
	edit supervisor.go '	for _, p := range procs {
		s.sendKeys(p, keys, deadline)
	}' '	for _, p := range procs[:1] {
		s.sendKeys(p, keys, deadline)
	}'
}

mutant app-stop "an App's failed stop step is an unclean exit (exit 1)" \
	"the workers' stop failures are left out of the generation's result" \
	"TestAppStopFailureIsAnUncleanExit"
m_app-stop() {
	edit supervisor.go 's.err = errors.Join(s.cause, err, s.appStopErrors())' 's.err = errors.Join(s.cause, err)'
}

mutant start-deadline "an App start that ignores its context is not waited for" \
	"startApp waits for Start whatever its context" \
	"TestDirectStartupTimeoutHoldsWhenStartIgnoresIt"
m_start-deadline() {
	edit app.go '	case r := <-done:
		return r.h, r.err
	case <-ctx.Done():
	}' '	case r := <-done:
		return r.h, r.err
	}'
}

mutant direct-retire "direct mode stops a replaced handler after its last request" \
	"the replaced handler's requests are not waited for" \
	"TestDirectReloadStopsTheOldHandlerAfterItsLastRequest"
m_direct-retire() {
	edit direct.go 'drain, cancelDrain := context.WithTimeout(hurry, rt.cfg.Runtime.DrainTimeout)' \
		'drain, cancelDrain := context.WithTimeout(hurry, 0)'
}

mutant stop-at-once "a stop during a reload stops every generation at once, by the force deadline" \
	"the end leaves the serving generation running" \
	"TestStopDuringAReloadsCommitEndsByTheForceDeadline"
m_stop-at-once() {
	edit lifecycle.go '	if l.serving != nil {
		v.stop(l, l.serving, cause)
	}' ''
}

mutant hurry-all "a second signal skips the drain of every generation, one rolling back included" \
	"the second signal skips only the stopping generations' drains" \
	"TestStopDuringAReloadsCommitEndsByTheForceDeadline"
m_hurry-all() {
	edit lifecycle.go '	if l.starting != nil {
		l.starting.gen.skipDrain()
	}' ''
}

mutant never-served-stop "a generation ready as the end began stops by the force deadline (direct mode)" \
	"its App stop step is given no deadline" \
	"TestDirectGenerationReadyAsTheEndBeganStopsByTheForceDeadline"
m_never-served-stop() {
	edit direct.go 'stopApp(stopCtx, force, rt.app, d.app.h)' 'stopApp(stopCtx, time.Time{}, rt.app, d.app.h)'
}

mutant rollback-app-stop "an App stop step that failed in a rollback cut by a signal exits 1" \
	"a signal during startup is a clean stop whatever the rollback's App stop did" \
	"TestSignalDuringARollbackAfterCommitWithAFailedAppStopExitsOne"
m_rollback-app-stop() {
	edit command.go ' && !errors.Is(err, errAppStop)' ''
}

mutant retired-app-stop "a replaced generation's failed App stop step makes the exit 1" \
	"a retired generation's failure is only logged" \
	"TestAppStopFailureOfAReplacedGenerationFailsTheExit"
m_retired-app-stop() {
	edit lifecycle.go '			l.retired = errors.Join(l.retired, fmt.Errorf("generation %d: %w", ev.gen.number(), ev.err))
			if !l.ending {' '			if !l.ending {'
}

mutant lost-retiring "a serving worker's loss is never dropped, even when a promotion came first" \
	"a loss taken from a generation a promotion retired is dropped" \
	"TestServingWorkerLostAsAPromotionSlipsInEndsTheService"
m_lost-retiring() {
	edit lifecycle.go 'case ev.gen == l.serving || ev.gen == l.retiring:' 'case ev.gen == l.serving:'
}

mutant status-line "every sd_notify STATUS= is one line" \
	"STATUS= carries a multi-line error as it is" \
	"TestNotificationsStayOneAssignmentPerLine"
m_status-line() {
	edit lifecycle.go 'return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")' 'return strings.TrimSpace(s)'
}

mutant next-after-stop "a reload queued behind a generation that stops runs once it has stopped" \
	"only a retired generation's stop lets a queued reload begin" \
	"TestReloadFailsIfItsGenerationLostAWorkerBeforeServing"
m_next-after-stop() {
	edit lifecycle.go '	v.next(l) // a reload may have waited for this generation' ''
}

mutant report-first "a generation's stop ends only after a loss it saw is reported" \
	"the stop does not wait for the loss report" \
	"TestServingWorkerLostAsAPromotionSlipsInEndsTheService"
m_report-first() {
	edit supervisor.go '	s.reporting.Wait()' ''
}

mutant rollback-reload-app-stop "a reload rolled back with a failed App stop step makes the exit 1" \
	"a reload's rollback failure is only logged" \
	"TestReloadRolledBackWithAFailedAppStopFailsTheExit"
m_rollback-reload-app-stop() {
	edit lifecycle.go '			// Rolled back, but not cleanly: that fails the exit status
			// of the service, as in any generation.
			l.retired = errors.Join(l.retired, fmt.Errorf("generation %d: %w", ev.gen.number(), ev.err))' ''
}

mutant reload-wait "at most two generations are live: a reload waits for a retiring one" \
	"a reload begins while a generation still stops" \
	"TestReloadWaitsForARetiringGenerationSoAtMostTwoLive"
m_reload-wait() {
	edit lifecycle.go '	if !l.reload || l.ending || l.leaving || l.starting != nil || len(l.stopping) > 0 {' '	if !l.reload || l.ending || l.leaving || l.starting != nil {'
}

mutant respawn "a lost serving worker is replaced in its slot, the others serving on" \
	"a loss is logged and left: the slot stays empty" \
	"TestLostWorkerIsRespawnedInItsSlot"
m_respawn() {
	edit heal.go '	v.respawnAfter(l, slot, s)
}' '}'
}

mutant respawn-commit "a replacement accepts only after its commit, sent once it is prepared" \
	"the one-slot barrier commits with the config" \
	"TestReplacementAcceptsOnlyAfterItsCommit"
m_respawn-commit() {
	edit barrier.go '	if err := s.await(ctx, procs, events, stagePrepared, began); err != nil {' '	if len(procs) == 1 {
		s.sendBy(ctx, procs[0], message{Type: msgCommit})
	}
	if err := s.await(ctx, procs, events, stagePrepared, began); err != nil {'
}

mutant respawn-reaped "a respawn starts only once the lost worker is reaped: at most N+1 live" \
	"the replacement starts beside a lost worker that still runs" \
	"TestRespawnWaitsUntilTheLostWorkerHasExited"
m_respawn-reaped() {
	edit slot.go '		case <-old.exited:
		case <-old.leftBehind: // stuck in the kernel for good, perhaps
		case <-ctx.Done():' '		default:
		case <-ctx.Done():'
}

mutant backoff "a slot that keeps failing backs off, doubling, with jitter" \
	"every replacement is tried at once" \
	"TestCrashLoopBacksOffAndGivesUp"
m_backoff() {
	edit heal.go '	if failures == 0 {
		return 0' '	if failures >= 0 {
		return 0'
}

mutant budget "past -max-restarts losses within -restart-window servery gives up, exit 1" \
	"the budget is never spent" \
	"TestCrashLoopBacksOffAndGivesUp"
m_budget() {
	edit heal.go '	if len(l.losses) <= v.policy.MaxRestarts {' '	if true {'
}

mutant siblings "a replacement that fails to start never stops its siblings" \
	"a failed replacement stops the whole generation" \
	"TestFailedReplacementNeverStopsItsSiblings"
m_siblings() {
	edit slot.go '	s.retire(p, drain)
	select {' '	s.stopWith(errors.New("replacement failed"), drain)
	select {'
}

mutant healed-exit "a loss that was healed does not fail the exit status" \
	"every loss fails the end" \
	"TestStopDuringABackoffEndsPromptly"
m_healed-exit() {
	edit heal.go '	switch {
	case l.ending:
		v.log.Info("worker lost as the service ends"' '	l.endErr = errors.Join(l.endErr, ev.err)
	switch {
	case l.ending:
		v.log.Info("worker lost as the service ends"'
}

mutant reload-heal "a reload cancels the old generation's respawns; the new one heals its own" \
	"promotion keeps the old generation's healing" \
	"TestReloadCancelsThePendingRespawns"
m_reload-heal() {
	edit lifecycle.go '	if l.slots != nil {
		l.slots.end() // a reload cancels the respawns and recycles of the one it replaces
	}
	l.slots = newServingSlots(gen)' '	if l.slots == nil {
		l.slots = newServingSlots(gen)
	}'
}

mutant heal-during-reload "a loss during a reload is healed in the serving generation" \
	"a loss while a reload starts ends the service" \
	"TestLossDuringAReloadIsHealedInTheServingGeneration"
m_heal-during-reload() {
	edit heal.go 'ev.gen == l.slots.gen && errors.As(ev.err, &we)' 'ev.gen == l.slots.gen && errors.As(ev.err, &we) && l.starting == nil'
}

mutant fixed "-max-restarts 0 is the fixed generation: the first loss ends the service" \
	"a loss is healed whatever the budget" \
	"TestRealBinaryExitsOneWhenAWorkerIsLost TestLostWorkerIsNotified"
m_fixed() {
	edit heal.go 'return v.policy.MaxRestarts > 0 && l.slots != nil' 'return l.slots != nil'
}

mutant recycle-first "a recycle retires the old worker only once its replacement is ready" \
	"the old worker is retired before its replacement starts" \
	"TestRecycleStartsTheReplacementFirst"
m_recycle-first() {
	edit slot.go '	p, err := s.admit(ctx, slot)
	if err != nil {
		return replacement{}, err
	}
	r := replacement{OldPID: old.pid, NewPID: p.pid}' '	if recycle {
		s.retire(old, s.cfg.DrainTimeout)
	}
	p, err := s.admit(ctx, slot)
	if err != nil {
		return replacement{}, err
	}
	r := replacement{OldPID: old.pid, NewPID: p.pid}'
}

mutant recycle-one "one recycle at a time: at most N+1 workers live" \
	"recycles run together" \
	"TestRecycleStartsTheReplacementFirst" 3
m_recycle-one() {
	edit heal.go '	if h == nil || h.recycling || l.starting != nil || l.ending {' '	if h == nil || l.starting != nil || l.ending {'
}

mutant recycle-budget "a recycle does not count against the budget" \
	"each recycle counts as a loss" \
	"TestRecycleStartsTheReplacementFirst"
m_recycle-budget() {
	edit heal.go '		if ev.recycle {
			v.log.Info("worker recycled"' '		if ev.recycle {
			v.overBudget(l, time.Now(), errors.New("recycled"))
			v.log.Info("worker recycled"'
}

mutant recycle-kill "a retired worker that ignores SIGTERM is killed at the force deadline" \
	"a retired worker gets SIGTERM only" \
	"TestRecycledWorkerThatIgnoresSIGTERMIsKilledAtTheForceDeadline"
m_recycle-kill() {
	edit slot.go '{force, syscall.SIGKILL, "kill"}, {force + unreapedGrace' '{force, syscall.SIGTERM, "kill"}, {force + unreapedGrace'
}

mutant lost-busy "a replacement lost before the loop saw it ready is respawned: no loss dropped" \
	"a loss taken while its slot's replacement runs is dropped" \
	"TestReplacementLostBeforeItsReadyIsSeenIsRespawned"
m_lost-busy() {
	edit heal.go 'if slices.Contains(lost, ev.r.NewPID) && !l.ending {' 'if false {'
}

mutant recycle-wait "a recycle ends only once the old worker has gone: at most N+1 live" \
	"the next recycle may spawn while the old worker still drains" \
	"TestRecyclesKeepAtMostNPlusOneWorkersAlive"
m_recycle-wait() {
	edit slot.go '		case <-p.exited:
		case <-p.leftBehind:
		case <-s.joins.Done():' '		default:'
}

mutant recycle-barrier "a worker may ask to be recycled before its generation serves" \
	"a recycle request in the barrier fails the start" \
	"TestRecycleRequestDuringTheBarrierWaitsUntilTheGenerationServes"
m_recycle-barrier() {
	edit barrier.go '			if ev.recycle() {' '			if false && ev.recycle() {'
}

mutant respawn-exe "a replacement runs its generation's build, even once the file was replaced" \
	"a replacement runs the file now at the path" \
	"TestRespawnRunsItsGenerationsExecutableAfterTheFileWasReplaced"
m_respawn-exe() {
	edit exe_linux.go 'return "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))' '_ = strconv.Itoa; return f.Name()'
}

mutant counters-kept "counters never go backwards: the parent keeps what exited workers counted" \
	"a worker's counts are dropped when it exits" \
	"TestCountersNeverGoBackwardsAcrossRespawnRecycleReloadAndScale TestTallyKeepsWhatExitedWorkersCounted"
m_counters-kept() {
	edit metrics.go 's.gone = s.gone.add(st)' 's.gone = s.gone.add(workerStats{})'
}

mutant counters-latest "a worker's counters are the largest it reported: an answer that overtook a later one lowers nothing" \
	"the last answer read wins" \
	"TestTallyKeepsWhatExitedWorkersCounted"
m_counters-latest() {
	edit metrics.go 'c.last = c.last.max(st)' 'c.last = st'
}

mutant delay-ready "during the shutdown delay /readyz answers 503" \
	"the delay does not mark the service leaving" \
	"TestShutdownDelayIsNotReadyWhileServingOn"
m_delay-ready() {
	edit lifecycle.go '	l.leaving = true
	v.notify(' '	v.notify('
}

mutant delay-serve "during the shutdown delay every worker serves on" \
	"the stop begins as the delay does" \
	"TestShutdownDelayIsNotReadyWhileServingOn"
m_delay-serve() {
	edit command.go 't := time.NewTimer(fe.delay)' 't := time.NewTimer(0)'
}

mutant delay-skip "a second signal skips the shutdown delay" \
	"the second signal only skips the drain" \
	"TestSecondSignalSkipsTheShutdownDelay"
m_delay-skip() {
	edit command.go '	if !fe.delaying.CompareAndSwap(true, false) {
		return false
	}
	close(fe.skip)' '	if true {
		return false
	}
	close(fe.skip)'
}

mutant delay-reload "a reload is never applied during the shutdown delay" \
	"reloads run during the delay" \
	"TestShutdownDelayIsNotReadyWhileServingOn"
m_delay-reload() {
	edit lifecycle.go 'if l.ending || l.leaving || l.serving == nil {' 'if l.ending || l.serving == nil {'
	edit lifecycle.go 'if !l.reload || l.ending || l.leaving || l.starting' 'if !l.reload || l.ending || l.starting'
}

mutant status-timeouts "a slow status client holds only its own connection, for the header timeout at most" \
	"the status listener has no read timeouts" \
	"TestHostileStatusClientsHoldNothingButTheirConnections"
m_status-timeouts() {
	edit status.go '		ReadHeaderTimeout: statusHeaderTimeout,
		ReadTimeout:       statusHeaderTimeout,
' ''
}

mutant forget "an exited worker leaves nothing in the parent: its watch, pipes and handle go" \
	"a replaced worker is kept until its generation stops" \
	"TestReplacedWorkersLeaveNothingInTheParent"
m_forget() {
	edit supervisor.go '				s.forget(ev.proc)' ''
}

mutant pidfd "the parent holds no OS thread per worker while it waits for it" \
	"cmd.Wait waits for each worker in a thread of its own" \
	"TestParentReservesItsThreadsAndHoldsNoneAWorker"
m_pidfd() {
	edit supervisor.go '	awaitExit(p.pid)' ''
}

mutant thread-reserve "the parent starts the threads it needs before its first worker" \
	"the runtime starts the parent's threads as it needs them, when the host may refuse them" \
	"TestParentReservesItsThreadsAndHoldsNoneAWorker"
m_thread-reserve() {
	edit supervisor.go '	reserveThreads() //' '	// reserveThreads() //'
	edit command.go '		reserveThreads() //' '		// reserveThreads() //'
}

mutant refused-limit "a spawn the host refuses names the limit it met" \
	"the fork's error alone" \
	"TestRefusedProcessRollsBackNamingTheLimit"
m_refused-limit() {
	edit supervisor.go 'return nil, fmt.Errorf("worker %d: start: %w", index, refused(err))' 'return nil, fmt.Errorf("worker %d: start: %w", index, err)'
}

mutant status-evict "idle and slow status clients never keep a probe waiting" \
	"the status listener's cap holds Accept, as a worker's does" \
	"TestProbesAnswerWhateverOtherStatusClientsDo"
m_status-evict() {
	edit status.go 'newLimitListener(ln, 0, 0, statusWriteTimeout' 'newLimitListener(ln, statusMaxConns, 0, statusWriteTimeout'
}

mutant steady-reset "a worker lost after serving Steady starts its slot's backoff over" \
	"a slot's failures are never reset" \
	"TestLossOfASteadyWorkerStartsTheBackoffOver"
m_steady-reset() {
	edit heal.go '	} else {
		s.failures = 0
	}' '	}'
}

mutant recycle-reset "a recycle of a steady worker starts its slot's backoff over" \
	"a recycle keeps the slot's failures" \
	"TestRecycleOfASteadyWorkerStartsTheBackoffOver"
m_recycle-reset() {
	edit heal.go '			if time.Since(s.since) >= v.policy.Steady {' '			if false {'
}

mutant restart-window "losses older than -restart-window no longer count against the budget" \
	"every loss counts for ever" \
	"TestLossesOutsideTheWindowAreForgiven"
m_restart-window() {
	edit heal.go '	l.losses = slices.DeleteFunc(l.losses, func(t time.Time) bool { return t.Before(window) })' '	_ = window'
}

mutant backoff-cap "the backoff doubles up to its cap (30 s)" \
	"the backoff doubles without a cap" \
	"TestBackoffDoublesUpToItsCap"
m_backoff-cap() {
	edit heal.go '		d = min(d, v.policy.Backoff<<(failures-1))' '		d = v.policy.Backoff << (failures - 1)'
}

mutant recycle-failure "a failed recycle keeps the old worker serving and spends no budget" \
	"a failed recycle counts as a loss, as a failed respawn does" \
	"TestFailedRecyclesLeaveTheOldWorkerServing"
m_recycle-failure() {
	edit heal.go '	if ev.recycle && !slices.Contains(lost, s.pid) {' '	if false {'
}

mutant stdio "a program's prints, in init() too, go to the log, never to the protocol's pipe" \
	"the worker's stdout is the protocol's output pipe, as the design record had it" \
	"TestProgramPrintsGoToTheLogNotTheProtocol TestPrintBeforeMainGoesToTheLog"
m_stdio() {
	edit supervisor.go '		cmd.Stdout, cmd.Stderr = logEnds[0], logEnds[1] // the parent writes every line (output.go)' '		cmd.Stdout, cmd.Stderr = outW, logEnds[1]'
}

mutant pipes-cloexec "no child a worker starts holds the protocol's pipes" \
	"the inherited pipes are left inheritable" \
	"TestWorkersChildrenInheritNoProtocolPipe"
m_pipes-cloexec() {
	edit stdio_unix.go '	syscall.CloseOnExec(fd)' '	_ = syscall.CloseOnExec'
}

mutant write-timeout-tls "a client that stops reading is cut at -write-timeout over TLS too" \
	"a cleared deadline keeps whatever was in force, the TLS handshake's included" \
	"TestHostileClientsLoseTheirSlotOverEveryTransport"
m_write-timeout-tls() {
	edit listener.go '	if t.IsZero() && c.writeTimeout > 0 && c.ours.Load() {' '	if t.IsZero() && c.writeTimeout > 0 {'
}

mutant body-timeout "a request body that makes no progress for -body-timeout is cut" \
	"no deadline on request bodies" \
	"TestHostileClientsLoseTheirSlotOverEveryTransport"
m_body-timeout() {
	edit worker.go 'srv.streams(srv.bodies(srv.counting(h)))' 'srv.streams(srv.counting(h))'
}

mutant body-h2-lazy "an HTTP/2 request whose body is not read costs no read deadline" \
	"the body deadline armed around every handler, HTTP/2 too" \
	"TestAnHTTP2BodyGetsADeadlineOnlyWhenItIsRead"
m_body-h2-lazy() {
	edit listener.go '		discards := !servedByHTTP2(r)' '		discards := true'
}

mutant body-h1-discard "an HTTP/1 body left unread is bounded for net/http's discard, a PRI * HTTP/2.0 request's too" \
	"the body deadline around a handler decided by the request line, not the server answering" \
	"TestAnHTTP2BodyGetsADeadlineOnlyWhenItIsRead"
m_body-h1-discard() {
	edit listener.go '		discards := !servedByHTTP2(r)' '		discards := r.ProtoMajor == 1'
}

mutant body-read-arm "a body's deadline is armed before each read" \
	"reads of a body arm no deadline" \
	"TestAnHTTP2BodyGetsADeadlineOnlyWhenItIsRead"
m_body-read-arm() {
	edit listener.go 'func (b *bodyReader) Read(p []byte) (int, error) {
	b.arm()' 'func (b *bodyReader) Read(p []byte) (int, error) {'
}

mutant http2-served-by "which server answers a request is decided by the connection's protocol, not the request line" \
	"a PRI * HTTP/2.0 request over HTTP/1 counts as HTTP/2" \
	"TestAnHTTP2BodyGetsADeadlineOnlyWhenItIsRead"
m_http2-served-by() {
	edit worker.go '	return r.ProtoMajor == 2 && r.TLS != nil && r.TLS.NegotiatedProtocol == "h2"' '	return r.ProtoMajor == 2'
}

mutant fifo-open "nothing under -dir that is not a file (a FIFO, a device, a socket) can block an open" \
	"a served path is opened blocking, with no look at its type first" \
	"TestNothingUnderTheRootThatIsNotAFileBlocksAnOpen"
m_fifo-open() {
	edit static.go '	} else if !servable(fi) {' '	} else if _ = fi; false {'
	edit static.go '	f, err := root.OpenFile(name, openFlags, 0)' '	f, err := root.Open(name)'
}

mutant expect-continue "a request with Expect: 100-continue is answered at once, its body unread" \
	"the body deadline replaces the body on net/http's own request" \
	"TestExpectContinueIsAnsweredAtOnce"
m_expect-continue() {
	edit listener.go $'\tbr := &bodyRequest{req: *r}\n\treturn &br.body, &br.req' $'\tbr := &bodyRequest{req: *r}\n\treturn &br.body, r'
}

mutant evict-idle "at -max-conns a new client is served at once: an idle keep-alive connection makes room" \
	"no eviction: a new client waits for a slot whatever holds it" \
	"TestIdleKeepAliveConnectionsMakeRoomAtMaxConns TestHostileClientsLoseTheirSlotOverEveryTransport"
m_evict-idle() {
	edit evict.go '	for l.idle.longest() == nil {' '	for l.idle.longest() == nil || true {'
}

mutant evict-longest "the connection idle longest makes room" \
	"the connection idle for the shortest time makes room" \
	"TestEvictionClosesTheConnectionIdleLongest"
m_evict-longest() {
	edit evict.go '(victim == nil || seq < vseq)' '(victim == nil || seq > vseq)'
}

mutant evict-busy "a connection with a request in flight is never closed to make room" \
	"a busy connection may be closed to make room, before idle ones" \
	"TestRequestInFlightIsNeverEvicted TestMaxConnsHoldsExtraConnectionUntilOneFrees"
m_evict-busy() {
	edit evict.go 'if seq := c.idle.Load(); seq > notIdle &&' 'if seq := c.idle.Load(); seq >= notIdle &&'
	edit evict.go '	if v <= notIdle || !c.idle.CompareAndSwap(v, connEvicted) {' '	if v < notIdle || !c.idle.CompareAndSwap(v, connEvicted) {'
}

mutant evicted-runs "a request read from a connection already closed to make room never runs" \
	"its handler runs on the closed connection" \
	"TestRequestOnAnEvictedConnectionNeverRuns"
m_evicted-runs() {
	edit worker.go '		if lc.evicted() {
			return
		}' ''
}

mutant close-write "a refused request ends in a close, not a reset" \
	"limitConn hides CloseWrite" \
	"TestRefusedRequestEndsInACloseNotAReset"
m_close-write() {
	edit listener.go '	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {' '	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok && false {'
}

mutant direct-lost "direct mode's lost server ends the service, whichever generation it served" \
	"a loss reported as the retiring generation's is dropped, as a worker's would be" \
	"TestDirectServerLostAsAReloadPromotesEndsTheService"
m_direct-lost() {
	edit lifecycle.go '	case ev.gen == l.retiring && v.policy.MaxRestarts > 0 && workerLoss(ev.err):' '	case ev.gen == l.retiring && v.policy.MaxRestarts > 0:'
}

mutant status-one-step "status switches from one generation to the next in one step" \
	"a worker shows as stopping once its generation's stop began, whatever the snapshot said" \
	"TestStatusSwitchesGenerationsInOneStep"
m_status-one-step() {
	edit status.go '		case p.gone || s.stopping && !serving:' '		case p.gone || s.stopping:'
}

mutant delay-reload "the shutdown delay cuts a reload short and refuses those queued: no READY=1 after STOPPING=1" \
	"the delay leaves reloads alone" \
	"TestShutdownDelayCutsAReloadShortAndRefusesTheQueued"
m_delay-reload() {
	edit lifecycle.go '	if l.starting != nil && l.serving != nil {
		l.starting.cancel()
	}' ''
}

mutant direct-exe "a direct-mode reload warns that a replaced executable does not run" \
	"no look at the executable" \
	"TestDirectReloadWarnsThatTheReplacedExecutableDoesNotRun"
m_direct-exe() {
	edit direct.go '		d.rt.staleExecutable(d.n)' ''
}

mutant esrch "a signal to a worker already gone is no failure" \
	"ESRCH is warned about as any failed signal" \
	"TestSignalToAWorkerAlreadyGoneIsNoFailure"
m_esrch() {
	edit drain.go 'if err := s.seam.signal(p, sig); err != nil && !errors.Is(err, syscall.ESRCH) {' 'if err := s.seam.signal(p, sig); err != nil {'
}

mutant outq "a drain's grace for an idle connection begins once the client has its last answer" \
	"the grace begins when the answer is in the kernel's send buffer" \
	"TestSlowReadersNextRequestIsAnsweredAcrossADrain"
m_outq() {
	edit outq_linux.go '	return int(n)' '	return 0 * int(n)'
}

mutant key-order "a stop never waits behind a ticket-key send" \
	"a replacement's spawn takes keyMu under spawnMu" \
	"TestStopIsNotHeldBehindAKeySend"
m_key-order() {
	edit slot.go '	s.keyMu.Lock()
	keys, seq := s.keys, s.keySeq
	s.keyMu.Unlock()
	s.spawnMu.Lock()
	defer s.spawnMu.Unlock()' '	s.spawnMu.Lock()
	defer s.spawnMu.Unlock()
	s.keyMu.Lock()
	keys, seq := s.keys, s.keySeq
	s.keyMu.Unlock()'
}

mutant notify-deadline "a service manager that does not read never holds the lifecycle loop" \
	"a notification waits for the socket" \
	"TestANotifySocketNobodyReadsNeverHoldsTheLoop"
m_notify-deadline() {
	edit systemd.go '	conn.SetWriteDeadline(time.Now().Add(notifyTimeout))' '	_ = time.Now'
}

mutant delay-decided "a second signal during startup hurries the rollback, not a shutdown delay that never runs" \
	"the delay is armed whether or not a generation serves" \
	"TestSecondSignalDuringStartupHurriesTheRollback"
m_delay-decided() {
	edit command.go '		fe.delaying.Store(fe.delay > 0 && fe.served.Load())' '		fe.delaying.Store(fe.delay > 0)'
}

mutant delay-stopping "the shutdown delay sends STOPPING=1 once, as it begins" \
	"the stop after the delay sends STOPPING=1 again" \
	"TestControlStopRunsTheShutdownDelayAndSaysStoppingOnce"
m_delay-stopping() {
	edit lifecycle.go '	if !l.leaving || status != "" {' '	if true {'
}

mutant readyz-starting "/readyz answers 503 while the first generation starts" \
	"ready whenever no stop was asked for" \
	"TestReadyzIsNotReadyWhileStarting"
m_readyz-starting() {
	edit status.go '	s.Ready = l.serving != nil && !l.ending && !l.leaving' '	s.Ready = !l.ending && !l.leaving'
}

mutant livez-loop "/livez answers 503 when the lifecycle loop does not answer" \
	"live whatever the loop does" \
	"TestLivezFailsWhenTheLoopDoesNotAnswer"
m_livez-loop() {
	edit status.go '	if _, err := st.svc.status(ctx); err != nil {' '	if _, err := st.svc.status(ctx); err != nil && false {'
}

mutant forget-ended "a replacement whose exit its barrier took leaves nothing in the parent either" \
	"only a worker whose exit its watch sees is forgotten" \
	"TestFailedReplacementsLeaveNothingInTheParent"
m_forget-ended() {
	edit supervisor.go '		if p.ended {
			s.forget(p)
		} else {
			running++
		}' '		if !p.ended {
			running++
		}'
}

mutant no-config "only a pipe closed before the config is no failure, not an App error that wraps io.EOF" \
	"any error wrapping io.EOF is taken for the parent's close" \
	"TestAppStartErrorWrappingEOFIsAFailure"
m_no-config() {
	edit worker.go '	if errors.Is(err, errNoConfig) {' '	if errors.Is(err, errNoConfig) || errors.Is(err, io.EOF) {'
}

mutant outq-progress "a client that stops reading gets the one-second grace, not the drain timeout" \
	"the grace waits for the send queue to empty, whether or not it shrinks" \
	"TestAClientThatStopsReadingDoesNotHoldTheDrain"
m_outq-progress() {
	edit drain.go '				if n := unsent(c.conn); n > 0 && n != c.unsentSeen {' '				if n := unsent(c.conn); n > 0 {'
}

mutant hang "a worker that does not answer the parent's probe within -worker-timeout, and does not run, is killed, its stacks logged, and respawned" \
	"no worker is ever found hung for its silence" \
	"TestWorkerWhoseHealthCheckHangsIsKilledWithItsStacksAndRespawned TestStoppedWorkerIsFoundHungAndRespawned"
m_hang() {
	edit hang.go '	s.hang(p, hangSilent, silent)' ''
}

mutant hang-progress "a worker whose requests make no progress for -worker-timeout is hung, though it answers every probe" \
	"no worker is ever found hung for its stall" \
	"TestDeadlockedHandlerIsFoundHungWithinTheTimeout TestHandlerSlowerThanTheWorkerTimeoutWithNothingElseMovingIsAHang"
m_hang-progress() {
	edit hang.go '	if t := s.cfg.WorkerTimeout; t > 0 && st.Stalled >= t && p.readyAt.Load() != 0 {' '	if t := s.cfg.WorkerTimeout; false && t > 0 && st.Stalled >= t && p.readyAt.Load() != 0 {'
}

mutant hang-bytes "bytes written on a request's behalf are progress: a slow download, a stream, a hijacked connection are never a hang" \
	"a write is no progress" \
	"TestRequestsThatMoveBytesOrWaitOnTheirClientAreNeverAHang"
m_hang-bytes() {
	edit listener.go '	if forRequest && n > 0 {' '	if false && forRequest && n > 0 {'
}

mutant hang-hijacked "a handler running on a connection it hijacked is the program's: no stall of its worker, never named stuck" \
	"a hijacked connection's handler counts as blocked on the worker" \
	"TestRequestsThatMoveBytesOrWaitOnTheirClientAreNeverAHang"
m_hang-hijacked() {
	edit progress.go '	return srv.inflight.Load() - srv.prog.waiting.Load() - srv.prog.hijacked.Load()' '	return srv.inflight.Load() - srv.prog.waiting.Load()'
}

mutant hang-paused "a parent paused with its workers (a VM, a frozen cgroup) finds none hung for the pause" \
	"questions pending across the pause are judged" \
	"TestAPauseOfTheWholeServiceIsNoHang" 3
m_hang-paused() {
	edit hang.go '		late := time.Duration(now-last) > 2*interval' '		late := false && time.Duration(now-last) > 2*interval'
}

mutant hang-waiting "a request blocked on its client (one that stops reading, a slow upload) is no stall of its worker" \
	"requests waiting on their client count as blocked on the worker" \
	"TestRequestsThatMoveBytesOrWaitOnTheirClientAreNeverAHang"
m_hang-waiting() {
	edit progress.go '	return srv.inflight.Load() - srv.prog.waiting.Load() - srv.prog.hijacked.Load()' '	return srv.inflight.Load() - srv.prog.hijacked.Load()'
}

mutant hang-alive "a handler that says it is alive (Alive) is progress" \
	"Alive does nothing" \
	"TestHandlerSlowerThanTheWorkerTimeoutThatSaysAliveIsNeverKilled"
m_hang-alive() {
	edit progress.go '			v.conn.progressed()' '			_ = v'
}

mutant hang-busy "a worker late to answer while its CPU is busy is not hung" \
	"lateness alone is a hang" \
	"TestWorkerBusyWithItsOwnRequestsIsNeverFoundHung"
m_hang-busy() {
	edit hang.go 'func busy(cpu, wall time.Duration) bool { return cpu > 0 && cpu*10 >= wall }' 'func busy(cpu, wall time.Duration) bool { return false }'
}

mutant stuck "one stuck request is named once and counted; its worker serves on" \
	"stuck requests are neither named nor counted" \
	"TestOneStuckRequestWhileOthersFinishIsNamedNotAHang TestHandlerSlowerThanTheWorkerTimeoutWithNothingElseMovingIsAHang"
m_stuck() {
	edit progress.go '		rt.logStuck(srv.requests.look(every, timeout), timeout)' ''
}

mutant hang-budget "hang kills do not spend -max-restarts: the slot backs off instead" \
	"a hang kill counts against the budget" \
	"TestWorkersHungFromOneCauseNeverEndTheService"
m_hang-budget() {
	edit heal.go '	case !errors.Is(ev.err, errHung) && v.overBudget(l, time.Now(), ev.err):' '	case v.overBudget(l, time.Now(), ev.err):'
}

mutant hang-named "a worker servery killed as hung is named so in its loss" \
	"the loss says only the signal" \
	"TestStoppedWorkerIsFoundHungAndRespawned"
m_hang-named() {
	edit supervisor.go '	if why := p.killReason(); why != nil {' '	if why := p.killReason(); false && why != nil {'
}

mutant unreaped "a hung worker that outlives its SIGKILL (uninterruptible sleep) is reported lost and its slot respawned beside it" \
	"the slot waits for its exit for ever" \
	"TestHungWorkerThatOutlivesItsKillIsRespawnedBesideIt"
m_unreaped() {
	edit hang.go '		p.leave()' '		continue'
}

mutant monotonic "the probe measures ages on the monotonic clock" \
	"askedAt is a Unix time" \
	"TestProbeAgesAreMeasuredOnTheMonotonicClock"
m_monotonic() {
	edit status.go '	now := monoNow()' '	now := time.Now().UnixNano()'
}

mutant refusals "a spawn the host refuses is retried while another worker serves, never spent from the budget" \
	"a refusal counts as a failed respawn" \
	"TestRefusedSpawnsKeepAServingServiceServingUntilTheHostHasRoom"
m_refusals() {
	edit heal.go '	if errors.Is(ev.err, errHostRefused) && h.serving(ev.slot) {' '	if false && errors.Is(ev.err, errHostRefused) && h.serving(ev.slot) {'
}

mutant refusals-none "with no worker serving, refusals spend the budget" \
	"refusals never end the service" \
	"TestRefusedSpawnsWithNoWorkerServingSpendTheBudget"
m_refusals-none() {
	edit heal.go '	if errors.Is(ev.err, errHostRefused) && h.serving(ev.slot) {' '	if errors.Is(ev.err, errHostRefused) && (h != nil || true) {'
}

mutant draining-slot "a recycled slot's new worker, lost while the old one drains, is respawned at once" \
	"the recycle holds its slot until the old worker has gone" \
	"TestLossOfARecyclesReplacementIsRespawnedWhileTheOldWorkerDrains"
m_draining-slot() {
	edit slot.go '		r.retired = s.gone(old)' '		r.retired = s.gone(old); <-r.retired'
}

mutant memory-early "a worker over its memory bound as it starts is recycled after the slot's backoff, with one warning" \
	"it is recycled at once, every time" \
	"TestWorkerOverItsMemoryBoundAsItStartsBacksOff"
m_memory-early() {
	edit heal.go '	if ev.limit != "memory" || time.Since(s.since) >= v.policy.Steady {' '	if true {'
}

mutant hang-health "a worker answers the probe only once its App's health check passed" \
	"the answer does not wait for the health check" \
	"TestWorkerWhoseHealthCheckHangsIsKilledWithItsStacksAndRespawned"
m_hang-health() {
	edit hang.go '	if rt.app.Health == nil {' '	if true {'
}

mutant hang-answered "an answered probe is no hang: healthy workers under load are never killed" \
	"an answer does not clear the pending question" \
	"TestHealthyWorkersUnderLoadAreNeverFoundHung"
m_hang-answered() {
	edit status.go '	p.askedAt.Store(0)' ''
}

mutant memory "a worker over -max-worker-memory is recycled" \
	"memory is never read" \
	"TestWorkerOverItsMemoryIsRecycled"
m_memory() {
	edit memory.go '			if rss := residentBytes(); rss > limit {' '			if rss := residentBytes(); false && rss > limit {'
}

mutant timeout-floor "-worker-timeout below its floor (1s) is a usage error" \
	"any positive timeout is taken, 3ns included" \
	"TestBadConfigurationExitsTwoNamingTheFlag"
m_timeout-floor() {
	edit config.go '	case cfg.WorkerTimeout > 0 && cfg.WorkerTimeout < minWorkerTimeout:' '	case false:'
}

mutant memory-floor "-max-worker-memory below its floor (32MiB) is a usage error" \
	"any positive bound is taken, 100 bytes included" \
	"TestBadConfigurationExitsTwoNamingTheFlag"
m_memory-floor() {
	edit config.go '	case cfg.MaxWorkerMemory > 0 && cfg.MaxWorkerMemory < minWorkerMemory:' '	case false:'
}

mutant cache-warn "a cache budget at or above -max-worker-memory is warned of at start" \
	"only a budget above the bound is" \
	"TestCacheAtOrAboveTheMemoryBoundIsWarnedAtStart"
m_cache-warn() {
	edit config.go '	if ok && int64(*cache) >= cfg.MaxWorkerMemory {' '	if ok && int64(*cache) > cfg.MaxWorkerMemory {'
}

mutant proc-name "pgrep -x, ps -e and top show a worker by the program's name" \
	"a worker keeps the kernel's name of the /proc/self/fd/N it runs" \
	"TestWorkersAreNamedAfterTheProgram"
m_proc-name() {
	edit worker.go '	nameProcess(programName())' '	_ = programName'
}

mutant proc-argv "a worker's command line, and its name, are the parent's" \
	"a worker's argv[0] is its executable's path" \
	"TestWorkersAreNamedAfterTheProgram"
m_proc-argv() {
	edit supervisor.go '	cmd.Args[0] = os.Args[0]' '	cmd.Args[0] = s.exe.Name()'
}

mutant watchdog "WATCHDOG=1 comes from the lifecycle loop, so a wedged loop stops it" \
	"the watchdog pings from its own goroutine" \
	"TestWatchdogPingsWhileTheLoopRunsAndStopsWhenItIsWedged"
m_watchdog() {
	edit systemd.go 'func (v *Service) watchdog(period time.Duration) { v.every(period, evWatchdog{}) }' 'func (v *Service) watchdog(period time.Duration) { for range time.Tick(period) { v.notify("WATCHDOG=1") } }'
}

mutant json-workers "-log-format json holds for every worker's lines too" \
	"workers log text whatever the flag" \
	"TestJSONLogsAreOneObjectALineFromParentAndWorkers"
m_json-workers() {
	edit worker.go 'errors.Join(sink.setFormat(cfg.LogFormat), sink.setLevel(cfg.LogLevel)) // the parent' 'errors.Join(sink.setLevel(cfg.LogLevel)) // the parent'
}

mutant default-max-restarts "every flag's default is the one README's table and -help give" \
	"-max-restarts defaults to 6" \
	"TestEveryFlagsDefaultIsTheREADMEs"
m_default-max-restarts() {
	edit heal.go 'var defaultPolicy = healPolicy{MaxRestarts: 5,' 'var defaultPolicy = healPolicy{MaxRestarts: 6,'
}

mutant default-drain "every flag's default is the one README's table and -help give" \
	"-drain-timeout defaults to 12s" \
	"TestEveryFlagsDefaultIsTheREADMEs"
m_default-drain() {
	edit config.go '"drain-timeout", 10*time.Second,' '"drain-timeout", 12*time.Second,'
}

mutant hash-underscore "-immutable-assets counts a HASH with underscores (base64url) as a fingerprint" \
	"an underscore ends the hash" \
	"TestImmutableAssetsFlagSetsCacheControlByName"
m_hash-underscore() {
	edit pages.go "		case c != '_':" "		default:"
}

mutant status-reload-failed "a failed reload tells systemd STATUS=reload failed, generation N still serving: ..." \
	"the STATUS line says only the error" \
	"TestNotificationsStayOneAssignmentPerLine"
m_status-reload-failed() {
	edit lifecycle.go 'fmt.Sprintf("STATUS=reload failed, generation %d still serving: %v", l.serving.number(), err)' 'fmt.Sprintf("STATUS=generation %d: %v", l.serving.number(), err)'
}

mutant gomemlimit-env "a GOMEMLIMIT the environment sets reaches every worker unchanged" \
	"-max-worker-memory's limit overrides it" \
	"TestWorkersGetAMemoryLimitUnlessTheEnvironmentSetsOne"
m_gomemlimit-env() {
	edit memory.go '	if maxMemory <= 0 || os.Getenv("GOMEMLIMIT") != "" {' '	if maxMemory <= 0 || os.Getenv("GOMEMLIMIT") == "off" {'
}

mutant health-error "an App.Health that returns an error for -worker-timeout gets the worker found hung" \
	"a failed check still answers the probe" \
	"TestWorkerWhoseHealthCheckFailsIsFoundHungAndRespawned"
m_health-error() {
	edit hang.go '			rt.log.Warn("health check failed", "err", err)
			return' '			rt.log.Warn("health check failed", "err", err)'
}

mutant hung-grace "a hung worker gets 2 s after SIGQUIT before SIGKILL" \
	"SIGKILL follows at once" \
	"TestStoppedWorkerIsFoundHungAndRespawned"
m_hung-grace() {
	edit hang.go 'const hungGrace = 2 * time.Second' 'const hungGrace = 10 * time.Millisecond'
}

mutant watchdog-env "workers are never given WATCHDOG_USEC or WATCHDOG_PID" \
	"workers inherit the watchdog variables" \
	"TestWorkerEnvironmentSharesCPUsAndDropsParentOnlyVariables"
m_watchdog-env() {
	edit supervisor.go '"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID":' '"NOTIFY_SOCKET":'
}

mutant accesslog-bytes "the access log's size is the body bytes written: 0 for HEAD and 304" \
	"the size is the Content-Length header" \
	"TestAccessLogWritesOneCombinedLinePerRequest"
m_accesslog-bytes() {
	edit accesslog.go '	b = strconv.AppendInt(b, rec.bytes, 10)' '	b = strconv.AppendInt(b, func() (n int64) { fmt.Sscan(rec.Header().Get("Content-Length"), &n); return max(n, rec.bytes) }(), 10)'
}

mutant status-field-name "every /status field README names is there under its name" \
	"memory_bytes renamed memory" \
	"TestStatusJSONHasTheDocumentedFields"
m_status-field-name() {
	edit status.go '	Memory   int64 `json:"memory_bytes"`' '	Memory   int64 `json:"memory"`'
}

mutant status-slot-order "/status lists each generation's workers in slot order" \
	"spawn order, as s.all holds them" \
	"TestStatusJSONHasTheDocumentedFields"
m_status-slot-order() {
	edit status.go '	slices.SortStableFunc(vs, func(a, b workerView) int { return cmp.Compare(a.Slot, b.Slot) })' '	_ = cmp.Compare[int]; _ = slices.Sort[[]int]'
}

mutant status-direct-now "/status shows direct mode's requests in flight and resident memory" \
	"direct mode reports only its counters" \
	"TestStatusJSONHasTheDocumentedFields"
m_status-direct-now() {
	edit status.go '	st.Inflight, st.Memory = d.rt.srv.inflight.Load(), residentBytes()' ''
}

mutant bench-exit "the bench exits 3 when its report lists problems, as bench/README.md says" \
	"a run with problems exits 0" \
	"bench/TestExitStatusesAreTheREADMEs"
m_bench-exit() {
	edit bench/main.go '	if len(b.rep.problems) > 0 {
		return 3
	}' '	if len(b.rep.problems) > 0 {
		return 0
	}'
}

mutant gzip-cap "a compressible file up to 8 MiB (an eighth of the cache budget at most) is gzipped without a sidecar" \
	"the gzip cap is the 1 MiB entry cap" \
	"TestModernJSBundleIsGzippedWithoutASidecar"
m_gzip-cap() {
	edit static.go '	maxGzipEntryBytes = 8 << 20' '	maxGzipEntryBytes = 1 << 20'
}

mutant size-units "every unit a size flag accepts is named by its error and README" \
	"T accepted, undocumented" \
	"TestSizeErrorAndREADMEListEveryAcceptedUnit"
m_size-units() {
	edit config.go '	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},' '	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},'
}

mutant version-hint "-version names -buildvcs=false and GOFLAGS, not go run, for a build without a revision that go run did not make" \
	"every unstamped build blamed on go run" \
	"TestVersionSaysWhenTheBuildHasNoRevision"
m_version-hint() {
	edit config.go '	if strings.Contains(filepath.ToSlash(exe), "/go-build") {' '	if true {'
}

# The log catalogue: each way a message could escape DESIGN.md's list.
for kind in log logattrs context const var concat word prepared ready; do
	mutant "catalogue-$kind" "every message servery logs is in DESIGN.md's catalogue, and every one listed is logged" \
		"a message by $kind" "TestEveryLogMessageIsCatalogued"
done
nl_at='func nameLogger(log *slog.Logger, name string) *slog.Logger {'
m_catalogue-log() { edit worker.go "$nl_at" "$nl_at"' log.Log(context.Background(), slog.LevelInfo, "an uncatalogued message")'; }
m_catalogue-logattrs() { edit worker.go "$nl_at" "$nl_at"' log.LogAttrs(context.Background(), slog.LevelInfo, "an uncatalogued message")'; }
m_catalogue-context() { edit worker.go "$nl_at" "$nl_at"' log.InfoContext(context.Background(), "an uncatalogued message")'; }
m_catalogue-const() { edit worker.go "$nl_at" "$nl_at"' const m = "an uncatalogued message"; log.Info(m)'; }
m_catalogue-var() { edit worker.go "$nl_at" "$nl_at"' m := "worker " + name; log.Info(m)'; }
m_catalogue-concat() { edit worker.go "$nl_at" "$nl_at"' log.Info("worker " + name)'; }
m_catalogue-word() { edit barrier.go '	s.log.Info("committing", "workers", len(procs), "prepared_in", since(began))' ''; }
m_catalogue-prepared() { edit barrier.go '	return [...]string{"started", "prepared", "ready"}[st]' '	return [...]string{"started", "prepped", "ready"}[st]'; }
m_catalogue-ready() { edit barrier.go '	return [...]string{"started", "prepared", "ready"}[st]' '	return [...]string{"started", "prepared", "all ready"}[st]'; }

mutant scale-reload "a scaled count holds across reloads" \
	"a reload builds its generation with -workers" \
	"TestScaledCountHoldsAcrossAReload"
m_scale-reload() {
	edit lifecycle.go '	gen = v.build(l.numbered, l.target, keys, v.reportsOf(&gen))' '	gen = v.build(l.numbered, v.workers, keys, v.reportsOf(&gen))'
}

mutant scale-retire "a removed slot's worker drains and exits" \
	"the removed worker is left running" \
	"TestSIGTTINAndSIGTTOUAddAndRemoveAWorker"
m_scale-retire() {
	edit scale.go '	s.count.Store(int64(count))
	s.retire(p, s.cfg.DrainTimeout)' '	s.count.Store(int64(count))'
}

mutant scale-failed "a scale that cannot start a worker keeps the count that serves, and says which worker" \
	"the target stays at the count asked for" \
	"TestScaleThatCannotStartAWorkerKeepsTheCountThatServes"
m_scale-failed() {
	edit scale.go '		l.target = min(l.target, h.count) // a later scale may have asked for fewer
' ''
}

mutant scale-bounds "a worker-mode service scales only within 2 to -workers' bound" \
	"a scale to 1 or 0 workers is taken" \
	"TestScaleOutsideTheWorkerBoundsIsRefused"
m_scale-bounds() {
	edit scale.go '	case n < 2 || n > maxWorkers:' '	case n > maxWorkers:'
}

mutant scale-direct "SIGTTIN in direct mode says it cannot, and the process serves on" \
	"SIGTTIN and SIGTTOU keep their default action, which stops the process" \
	"TestSIGTTINInDirectModeSaysItCannotAndServesOn"
m_scale-direct() {
	edit command.go '	watchScaling(fe)
' ''
}

mutant scale-backoff "a scale down removes a slot whose lost worker waits for its respawn's backoff" \
	"the scale waits for the backoff and the respawn" \
	"TestScaleDownRemovesASlotWaitingForItsRespawn"
m_scale-backoff() {
	edit scale.go '	if s.busy && s.respawn == nil {' '	if s.busy {'
}

mutant scale-metrics "a removed slot's counters stay in /metrics, so no series vanishes or goes backwards" \
	"/metrics lists only the slots that serve now" \
	"TestCountersNeverGoBackwardsAcrossRespawnRecycleReloadAndScale"
m_scale-metrics() {
	edit status.go '	p.slots, p.exits = st.counts.read()
' '	p.slots, p.exits = st.counts.read()
	for i := range p.slots {
		if i >= s.Workers && s.Workers > 0 {
			delete(p.slots, i)
		}
	}
'
}

mutant sigusr2 "SIGUSR2 upgrades the parent, or says it cannot; it never ends the parent" \
	"SIGUSR2 keeps Go's default, which takes it and does nothing" \
	"TestSIGUSR2InDirectModeSaysItCannotAndServesOn TestTwentyUpgradesUnderLoadKeepThePidAndFailNothing"
m_sigusr2() {
	edit command.go '	watchUpgrades(fe)
' ''
}

mutant upgrade-resume "an upgrade whose exec fails gives every worker its lines back" \
	"the old image serves on with its workers' lines still held" \
	"TestUpgradeWhoseExecFailsLeavesTheOldCodeServing"
m_upgrade-resume() {
	edit handover.go '		p.out.send(message{Type: msgResume})
	}
	s.keyMu.Unlock()' '	}
	s.keyMu.Unlock()'
}

mutant upgrade-tally "the counters cross the exec: Prometheus sees no reset" \
	"the handover leaves out the workers gone, by slot" \
	"TestTwentyUpgradesUnderLoadKeepThePidAndFailNothing"
m_upgrade-tally() {
	edit handover.go '		st.gone, st.lastExit, st.hangs = s.Gone, s.LastExit, s.Hangs' '		st.lastExit, st.hangs = s.LastExit, s.Hangs'
}

mutant upgrade-keys "the ticket keys cross the exec, so sessions resume" \
	"the new image makes keys of its own" \
	"TestAHundredUpgradesResumeSessionsAndLeaveNoDescriptorBehind"
m_upgrade-keys() {
	edit command.go '		cfg.TicketKeys = &ticketKeys{keys: h.Keys}
		cfg.Runtime.TicketKeys = h.Keys' '		cfg.TicketKeys, _ = newTicketKeys()
		cfg.Runtime.TicketKeys = cfg.TicketKeys.current()'
}

mutant upgrade-listener "the listeners cross the exec with the workers' pipes: the address stays bound" \
	"only the workers' pipes and the handover file lose close-on-exec" \
	"TestTwentyUpgradesUnderLoadKeepThePidAndFailNothing TestAHundredUpgradesResumeSessionsAndLeaveNoDescriptorBehind"
m_upgrade-listener() {
	edit exec_unix.go '	inherit := append(files.all(), f)' '	inherit := append(files.kept, f)'
}

mutant upgrade-target "the worker count a scale set holds across an upgrade" \
	"the new image runs -workers again" \
	"TestScaledCountHoldsAcrossAnUpgrade"
m_upgrade-target() {
	edit upgrade.go '	l.started, l.target, l.keySeq, l.stats = true, h.Target, h.KeySeq, h.Stats' '	l.started, l.target, l.keySeq, l.stats = true, v.workers, h.KeySeq, h.Stats'
}

mutant upgrade-check "the new executable must name the handover version this build writes" \
	"the check takes any answer that exits 0, or any exit" \
	"TestUpgradeWhoseCheckFailsLeavesTheOldCodeServing"
m_upgrade-check() {
	edit upgrade.go '	case err != nil && stderr.Len() > 0:
		return fmt.Errorf("check %s: %w (it said %q): %s", path, err, said, oneLine(stderr.String()))
	case err != nil:
		return fmt.Errorf("check %s: %w (it said %q)", path, err, said)
	case said != want:
		return fmt.Errorf("check %s: it said %q, want %q", path, said, want)
	}' '	}
	_, _, _ = want, said, err'
}

mutant date-set "every response's Date is set as its header is committed, so net/http formats none" \
	"net/http formats a Date per response" \
	"TestServerySetsTheDateSoNetHTTPNeedNot"
m_date-set() {
	edit drain.go '	stampDate(h)
' ''
}

mutant date-second "the Date is the second the response is committed in, formatted again each second" \
	"the first Date formatted is kept for ever" \
	"TestEveryResponseCarriesTheDateOfTheSecondItIsAnswered"
m_date-second() {
	edit date.go 'v != nil && v.sec == sec {' 'v != nil {'
}

mutant read-lazy "a read deadline later than the one on the socket waits, so keep-alive requests move no timer" \
	"every read deadline net/http sets reaches the socket" \
	"TestReadDeadlinesLaterThanTheOneInForceReachNoTimer"
m_read-lazy() {
	edit readdeadline.go '	case r.want != 0 && (r.armed == 0 || r.want < r.armed):' '	case r.want != 0:'
}

mutant read-early "a read deadline earlier than the one on the socket is put on at once" \
	"an earlier read deadline waits for the one on the socket" \
	"TestAnEarlierReadDeadlineEndsABlockedReadAtOnce"
m_read-early() {
	edit readdeadline.go '	case r.want != 0 && (r.armed == 0 || r.want < r.armed):' '	case r.want != 0 && r.armed == 0:'
}

mutant read-rearm "a deadline that fires before the one wanted is put right and the read tried again" \
	"an early deadline ends the read" \
	"TestAReadDeadlineMovedLaterEndsTheReadNeitherSoonerNorLater TestAClearedReadDeadlineNoLongerEndsAnyRead"
m_read-rearm() {
	edit readdeadline.go '	if r.armed == r.want {' '	if true {'
}

mutant read-span "the deadline after a background read ends is put on at once, a header timeout ahead, so a keep-alive request puts two read deadlines on the socket" \
	"it is a clear, and the idle and header timeouts reach the socket" \
	"TestAKeepAliveRequestPutsAtMostTwoReadDeadlinesOnTheSocket"
m_read-span() {
	edit readdeadline.go '	if r.span > 0 && r.want == 0 && ahead {' '	if false {'
}

mutant read-step-late "a deadline stepped on is never later than the one wanted" \
	"a step is always a whole span" \
	"TestAReadDeadlineMovedLaterEndsTheReadNeitherSoonerNorLater"
m_read-step-late() {
	edit readdeadline.go '		r.armed = min(r.want, now+r.span)' '		r.armed = now + r.span'
}

mutant read-known-past "the deadline after a background read ends is put on as it is asked for, the past one known to have passed, so no read fails for want of a re-arm" \
	"it waits for a read to fail on the past deadline" \
	"TestAKeepAliveRequestPutsAtMostTwoReadDeadlinesOnTheSocket"
m_read-known-past() {
	edit readdeadline.go '	case r.armed != 0 && r.armed < r.seen:' '	case false:'
}

# ------------------------------------------------------------- helpers
# edit FILE FROM TO: replaces the one occurrence of FROM in the mutant's
# FILE with TO, literally; any other count clears $applied, which fails
# the mutant (a function's status would hide all but its last edit).
edit() {
	local n
	n=$(perl -e '
		my ($file, $from, $to) = @ARGV;
		open(my $in, "<", $file) or do { print "no file"; exit };
		local $/; my $s = <$in>; close $in;
		my $n = () = $s =~ /\Q$from\E/g;
		if ($n != 1) { print "$n matches"; exit }
		substr($s, index($s, $from), length $from) = $to;
		open(my $out, ">", $file) or die "$file: $!\n";
		print $out $s; close $out or die "$file: $!\n";
		print "ok";
	' "$mdir/$1" "$2" "$3")
	if [ "$n" != ok ]; then
		echo "      $1: snippet ${2%%$'\n'*}... : $n, want exactly 1" >&2
		applied=0
	fi
}

# copy_tree DEST: the working tree's tracked and untracked, not ignored
# files, as they are now.
copy_tree() {
	mkdir -p "$1"
	git -C "$repo" ls-files -z --cached --others --exclude-standard \
		| while IFS= read -r -d '' f; do if [ -f "$repo/$f" ]; then printf '%s\0' "$f"; fi; done \
		| (cd "$repo" && tar --null -T - -cf -) | tar -xf - -C "$1"
}

# run_tests DIR LOG RUNS TESTS...: builds DIR's test binary and runs
# TESTS in DIR, RUNS times or until one fails; returns 0 if they passed, 1
# if any failed, 2 if it did not build. The limit is per run. A test
# named bench/TestX is the bench package's (bench/*_test.go), run in
# DIR/bench; the log names it TestX.
run_tests() {
	local dir=$1 log=$2 runs=$3
	shift 3
	local t root=() bench=() status=0
	for t in "$@"; do
		case $t in
		bench/*) bench+=("${t#bench/}") ;;
		*) root+=("$t") ;;
		esac
	done
	: >"$log"
	[ ${#root[@]} -gt 0 ] && { run_package "$dir" "$log" "$runs" "${root[@]}" || status=$?; }
	[ $status -ne 2 ] && [ ${#bench[@]} -gt 0 ] && { run_package "$dir/bench" "$log" "$runs" "${bench[@]}" || status=$(max_status $status $?); }
	return $status
}

# failures LOG prints why LOG's run failed: a compiler's errors, each FAIL
# and panic line, and what each failed test wrote, but for the servery
# logs every test prints as it ends, with a few lines of what follows a
# message. awk reads the whole log (twice: first for the names of the
# failed tests), so no pipe closes early under pipefail.
failures() {
	awk '
		NR == FNR { if ($1 == "---" && $2 == "FAIL:") { split($3, top, "/"); failed[top[1]] = 1 }; next }
		/^=== RUN / { split($3, top, "/"); cur = top[1]; keep = 0; next }
		/^panic/ { keep = 8; say($0); next } # and the tests still running
		/^(--- FAIL|FAIL)/ || /\.go:[0-9]+:[0-9]+: / { keep = 0; say($0); next }
		/_test\.go:[0-9]+: / { keep = (cur in failed && $0 !~ /logs:$/) ? 12 : 0; if (keep) say($0); next }
		keep > 0 { keep--; say($0) }
		function say(l) { if (n++ < 150) print "    | " l }
	' "$1" "$1"
}

max_status() { if [ "$1" -gt "$2" ]; then echo "$1"; else echo "$2"; fi; }

# run_package DIR LOG RUNS TESTS...: run_tests for the one package in DIR,
# appending to LOG.
run_package() {
	local dir=$1 log=$2 runs=$3
	shift 3
	local pattern bin="$dir/servery-mutant.test" failfast=""
	pattern="^($(tr ' ' '|' <<<"$*"))\$"
	[ "$runs" -gt 1 ] && failfast=-test.failfast
	if ! (cd "$dir" && go test -c -o "$bin" .) >>"$log" 2>&1; then
		return 2
	fi
	(cd "$dir" && timeout -k 10 "$((limit * runs))" "$bin" -test.count="$runs" $failfast -test.v \
		-test.timeout "$((limit * runs - 10))s" -test.run "$pattern") >>"$log" 2>&1 || return 1
	return 0
}

row() { printf '| %s | %s | %s | %s |\n' "$@"; }

# ------------------------------------------------------------- main
selected=("$@")
[ ${#selected[@]} -eq 0 ] && selected=("${names[@]}")
for name in "${selected[@]}"; do
	if [ -z "${claim_of[$name]+x}" ]; then
		echo "unknown mutant $name; known: ${names[*]}" >&2
		exit 2
	fi
done

start=$(date +%s)
pristine="$work/pristine"
copy_tree "$pristine"

# The baseline: every named test passes unmutated.
all=$(for name in "${selected[@]}"; do tr ' ' '\n' <<<"${tests_of[$name]}"; done | sort -u | tr '\n' ' ')
echo "baseline: $(wc -w <<<"$all") tests, unmutated" >&2
mdir="$work/base"
cp -a "$pristine" "$mdir"
base_status=0
# All of them in one run: more time than one mutant's (BASELINE_TIMEOUT,
# default 900 s), since it runs every test the mutants name.
limit=${BASELINE_TIMEOUT:-900} run_tests "$mdir" "$work/base.log" 1 $all || base_status=$?
reap baseline
missing=""
for t in $all; do
	grep -q -- "^--- PASS: ${t#bench/} (" "$work/base.log" || missing+=" $t"
done
if [ "$base_status" -ne 0 ] || [ -n "$missing" ]; then
	echo "FAIL  the unmutated tests do not all pass (status $base_status;${missing:- none} missing a PASS):" >&2
	failures "$work/base.log" >&2
	exit 1
fi
echo "baseline: passed in $(($(date +%s) - start))s" >&2
rm -rf "$mdir"

# run_mutant NAME: applies NAME's edits to a copy, runs its tests, kills
# what they left behind, and writes the result to $work/NAME.result: a
# first line "ok" or "FAIL", then the table cell.
run_mutant() {
	local name=$1 began status result by passed
	began=$(date +%s)
	mdir="$work/m-$name"
	local log="$work/$name.log"
	cp -a "$pristine" "$mdir"
	applied=1
	"m_$name"
	if [ "$applied" -ne 1 ]; then
		printf 'FAIL\nmutation did not apply\n' >"$work/$name.result"
		return
	fi
	status=0
	run_tests "$mdir" "$log" "${runs_of[$name]}" ${tests_of[$name]} || status=$?
	reap "$name" "$mdir/"
	case $status in
	0) result="FAIL"$'\n'"NOT CAUGHT" ;;
	2)
		result="FAIL"$'\n'"mutation does not compile"
		awk 'NR <= 20 { print "    | " $0 }' "$log" >&2
		;;
	*)
		# the top-level tests that failed (subtests are indented)
		by=$(sed -n 's/^--- FAIL: \(Test[A-Za-z0-9_]*\) .*/\1/p' "$log" | paste -sd, - | sed 's/,/, /g')
		if grep -q '^panic: test timed out' "$log"; then
			result="caught (timed out)"
		else
			result="caught by ${by:-exit status $status}"
		fi
		if [ "${runs_of[$name]}" -gt 1 ]; then
			passed=$(grep -c '^--- PASS: Test' "$log" || true)
			result+=" (run $((passed + 1)) of up to ${runs_of[$name]})"
		fi
		result="ok"$'\n'"$result"
		;;
	esac
	rm -rf "$mdir"
	printf '%s\n' "$result" >"$work/$name.result"
	echo "      $name: $(tail -n 1 "$work/$name.result"), $(($(date +%s) - began))s" >&2
}

# Mutants run JOBS at a time (default 3): most of a test's time is spent
# waiting for deadlines, not computing. Each kills only what its own copy
# left behind.
jobs_max=${JOBS:-3}
for name in "${selected[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
	run_mutant "$name" &
done
wait

failed=0
results=()
for name in "${selected[@]}"; do
	verdict=$(head -n 1 "$work/$name.result" 2>/dev/null || echo FAIL)
	result=$(tail -n 1 "$work/$name.result" 2>/dev/null || echo "no result")
	[ "$verdict" = ok ] || failed=1
	results+=("$(row "${claim_of[$name]}" "$name: ${mutation_of[$name]}" "${tests_of[$name]// /, }" "$result")")
done

echo
row claim mutation "test(s)" result
row --- --- --- ---
printf '%s\n' "${results[@]}"
echo
echo "total $(($(date +%s) - start))s"
if [ "$failed" -ne 0 ]; then
	echo "mutation check FAILED"
	exit 1
fi
echo "mutation check passed: every mutant was caught"
