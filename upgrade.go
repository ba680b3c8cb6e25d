package main

// upgrade.go upgrades the parent itself in place, keeping its pid:
// SIGUSR2, or a program's Control.Upgrade. A reload already runs the
// executable on disk in new workers; an upgrade runs it in the parent
// too. The parent checks the new executable in a child first, then
// holds every worker's lines, writes what it knows to a handover file,
// and execs the executable in its own process, with the listener, the
// status listener, the workers' pipes and the handover file inherited.
// The new image adopts the serving generation as its own (handover.go)
// and at once replaces it through the barrier, as a reload does, so the
// workers run the new code too.
//
// Why exec in place, where nginx, gunicorn, tableflip and Envoy start a
// second parent beside the first: the pid stays. systemd's main pid, a
// container's PID 1, a PID file and a supervisor's idea of the process
// stay true, and no second parent holds the listener while the first
// drains. The workers hold every connection, so the parent's exec cuts
// no request: they serve on while it happens.
//
// Like every other decision, the loop decides (onUpgrade, nextUpgrade,
// onUpgradeChecked), and the check, which blocks, runs in a goroutine
// that reports evUpgradeChecked. The handover itself runs in the loop:
// it must see no decision change under it, and it is short.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// handoverVersion is the version of the handover file's format
// (handover.go). The old image asks the new executable which version it
// reads (upgradeCheckEnv) and execs it only if the two agree.
const handoverVersion = 1

// upgradeCheckEnv, when set, makes the executable say which handover
// version it reads and exit, before anything else: the old image runs
// the new executable so before it execs it. Its value is the version
// the old image writes.
const upgradeCheckEnv = "SERVERY_UPGRADE_CHECK"

// upgradeCheckTimeout bounds the check of the new executable.
const upgradeCheckTimeout = 10 * time.Second

// errUpgradeDirect is the answer to an upgrade in direct mode.
var errUpgradeDirect = errors.New("upgrade: direct mode (-workers 1) serves its connections in this process, which an exec would cut; restart it to run new code")

// checkAnswer is what the new executable says in its check mode: the
// handover format it reads and the protocol it speaks to the workers it
// will adopt.
var checkAnswer = fmt.Sprintf("handover %d protocol %d", handoverVersion, protocolVersion)

// answerUpgradeCheck is the new executable's side of the check, with the
// parent's command line: it says what it reads (checkAnswer), and exits
// 0 only if the old image writes the same handover version and the
// command line is one it would serve in worker mode, the App's Check
// included. So a flag it no longer knows, or a Check that now fails,
// fails the upgrade while the old image still serves, not after.
func answerUpgradeCheck(theirs string, args []string, appFlags *flag.FlagSet, app App) int {
	fmt.Println(checkAnswer)
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "%s: %s\n", programName(), fmt.Sprintf(format, a...))
		return exitFailure
	}
	if theirs != strconv.Itoa(handoverVersion) {
		return fail("handover version %s, this build reads %d", theirs, handoverVersion)
	}
	cfg, err := parseConfig(args, io.Discard, appFlags, app.Check)
	switch {
	case err != nil:
		return fail("%v", err)
	case cfg.Workers < 2:
		return fail("this build runs the command line in direct mode (-workers %d), which cannot adopt workers", cfg.Workers)
	}
	return exitOK
}

// checkExecutable runs the executable at path in its check mode, with
// this parent's command line (args), and fails unless it exits 0 naming this
// build's handover version and protocol: a missing or unreadable file,
// another architecture, a build that crashes at start, reads another
// version, or refuses the command line. Only then is anything changed.
func checkExecutable(ctx context.Context, path string, args []string) error {
	ctx, cancel := context.WithTimeout(ctx, upgradeCheckTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Args[0] = os.Args[0]
	// Nothing of the parent's that the service manager gave it: a build
	// without the check mode (older than it) would start a server, which
	// must not notify, nor take a socket; it fails on the bound address.
	for _, kv := range os.Environ() {
		if !parentOnlyEnv(kv) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, upgradeCheckEnv+"="+strconv.Itoa(handoverVersion))
	cmd.WaitDelay = time.Second // a descendant holding its output does not hold the check
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	want := checkAnswer
	said := strings.TrimSpace(string(out))
	switch {
	case err != nil && stderr.Len() > 0:
		return fmt.Errorf("check %s: %w (it said %q): %s", path, err, said, oneLine(stderr.String()))
	case err != nil:
		return fmt.Errorf("check %s: %w (it said %q)", path, err, said)
	case said != want:
		return fmt.Errorf("check %s: it said %q, want %q", path, said, want)
	}
	return nil
}

// Upgrade runs the executable on disk in this process in place of the
// running one, keeping the pid, and then in new workers (a reload). It
// blocks until the upgrade is under way: it returns an error only if the
// upgrade failed before the exec, or could not begin, and the running
// code serves on; once the exec succeeds this process runs the new
// image, and the call never returns. An upgrade asked for while a
// reload, a scale, a replacement or another upgrade runs waits for it;
// those asked for meanwhile are one upgrade. ctx bounds only the wait.
func (v *Service) Upgrade(ctx context.Context) error {
	r := make(chan error, 1)
	if !v.send(evUpgrade{reply: r}) {
		return fmt.Errorf("upgrade: %w", errNotServing)
	}
	select {
	case err := <-r:
		return err
	case <-ctx.Done():
		return fmt.Errorf("upgrade: %w", context.Cause(ctx))
	}
}

// requestUpgrade asks for an upgrade, as SIGUSR2 does, without waiting.
func (v *Service) requestUpgrade() { v.send(evUpgrade{}) }

// onUpgrade queues an upgrade, if this service can be upgraded, and
// begins it once the service is steady (nextUpgrade).
func (v *Service) onUpgrade(l *life, ev evUpgrade) {
	var err error
	switch {
	case v.workers == 1:
		err = errUpgradeDirect
	case v.upgrades == nil:
		err = errors.New("upgrade: not supported on this platform")
	case l.ending || l.leaving || l.serving == nil:
		err = fmt.Errorf("upgrade: %w", errNotServing)
	}
	if err != nil {
		if ev.reply == nil {
			v.log.Warn("upgrade ignored", "generation", l.number(l.serving), "err", err)
		}
		reply(ev.reply, err)
		return
	}
	if !l.upgrade {
		v.log.Info("upgrade requested", "generation", l.serving.number())
	}
	l.upgrade = true
	l.upgrades = append(l.upgrades, ev.reply)
}

// steady reports whether nothing is under way that an exec would cut:
// no generation starts or stops, no slot is replaced, recycled, added or
// waits for its backoff, and the count is the target.
func (l *life) steady() bool {
	h := l.slots
	if l.serving == nil || l.ending || l.leaving || l.starting != nil || l.retiring != nil || len(l.stopping) > 0 || h == nil {
		return false
	}
	if h.growing || h.recycling || len(h.queued) > 0 || h.count != l.target {
		return false
	}
	for _, s := range h.byIndex {
		if s.busy || s.retry != nil {
			return false
		}
	}
	return true
}

// nextUpgrade begins the check of the new executable once an upgrade is
// queued and the service is steady; run calls it after every event.
func (v *Service) nextUpgrade(l *life) {
	if !l.upgrade || l.checking || !l.steady() {
		return
	}
	l.checking = true
	path, err := os.Executable()
	ctx, cancel := context.WithCancel(context.Background())
	l.cancelCheck = cancel // by the end: the check's child is killed
	go func() {
		defer cancel()
		if err == nil {
			err = checkExecutable(ctx, path, v.upgrades.args)
		}
		v.send(evUpgradeChecked{path: path, err: err})
	}()
}

// onUpgradeChecked hands over to the checked executable, if the service
// is still steady; otherwise the check runs again once it is.
func (v *Service) onUpgradeChecked(l *life, ev evUpgradeChecked) {
	l.checking = false
	if !l.upgrade {
		return // the stop came meanwhile, and answered it
	}
	if ev.err != nil {
		v.upgradeFailed(l, ev.err)
		return
	}
	if !l.steady() {
		return
	}
	v.upgradeFailed(l, v.handOver(l, ev.path))
}

// upgradeFailed says that the upgrade failed and the running code serves
// on, and answers every caller.
func (v *Service) upgradeFailed(l *life, err error) {
	err = fmt.Errorf("upgrade: %w", err)
	v.log.Error("upgrade failed, still serving", "generation", l.serving.number(), "err", err)
	v.notify(oneLine(fmt.Sprintf("STATUS=upgrade failed, generation %d still serving: %v", l.serving.number(), err)))
	v.answerUpgrades(l, err)
}

// answerUpgrades answers every upgrade waiting with err, and forgets
// them.
func (v *Service) answerUpgrades(l *life, err error) {
	for _, r := range l.upgrades {
		reply(r, err)
	}
	l.upgrade, l.upgrades = false, nil
	if l.cancelCheck != nil {
		l.cancelCheck()
	}
}

// handOver holds the serving generation's lines, writes the handover
// and execs path in this process. It returns only if something failed
// before the exec took, after giving the workers their lines back: the
// running image serves on as before.
func (v *Service) handOver(l *life, path string) error {
	gen, ok := l.serving.(*Supervisor)
	if !ok {
		return errUpgradeDirect
	}
	if err := gen.holdLines(time.Second); err != nil {
		return err
	}
	defer gen.resumeLines()
	h, files, err := v.handoverState(l, gen)
	if err != nil {
		return err
	}
	v.log.Info("upgrading: exec", "generation", gen.number(), "path", path, "pid", os.Getpid())
	v.output.settle(time.Now().Add(time.Second)) // what the workers wrote before their hold, written out
	defer closeAll(files.own...)
	if v.upgrades.quiet != nil {
		if err := v.upgrades.quiet(); err != nil {
			return err
		}
	}
	err = v.upgrades.exec(path, h, files)
	if v.upgrades.loud != nil {
		v.upgrades.loud()
	}
	return err
}

// upgrader is what an upgrade needs beyond the loop's state, set by
// runService in worker mode: the status listener, handed over too, and
// the exec (execImage), which a test may swap for one that fails.
type upgrader struct {
	statusLn net.Listener // nil: none
	args     []string     // the parent's command line, which the check is run with
	exec     func(path string, h *handover, files handoverFiles) error
	// quiet, when set, is called just before the exec, and loud if the
	// exec failed: the front end's stop signals (frontEnd.quietStops).
	quiet func() error
	loud  func()
}

// takeOver restores, before the service starts, the counters an
// upgrade's old image handed over (h), and when the service began.
func (v *Service) takeOver(h *handover) {
	processStart = h.Started
	v.counts.takeOver(h.Tally)
	if v.output != nil {
		v.output.logs.dropped.Add(h.Dropped)
	}
}

// adopt starts the service from what an upgrade's old image handed over
// (h): a generation built for it adopts the serving one and serves, and
// a reload replaces it at once, so the workers run the new code too. It
// blocks until gen serves; the reload goes on.
func (v *Service) adopt(h *handover) error {
	r := make(chan error, 1)
	if !v.send(evAdopt{h: h, reply: r}) {
		return errStoppedFirst
	}
	return <-r
}

// onAdopt takes over the old image's state, makes gen, with the workers
// it handed over, the serving generation, and begins the reload that
// replaces them.
func (v *Service) onAdopt(l *life, ev evAdopt) {
	h := ev.h
	if l.started || l.ending {
		reply(ev.reply, errStartedTwice)
		return
	}
	l.started, l.target, l.keySeq, l.stats = true, h.Target, h.KeySeq, h.Stats
	l.numbered = max(h.Numbered, h.Serving.Number) // a failed reload's number is spent too
	now := time.Now()
	for _, age := range h.Losses {
		l.losses = append(l.losses, now.Add(-age))
	}
	if v.keys != nil {
		l.rotateIn = max(h.RotateIn, time.Millisecond)
	}
	var gen generation
	gen = v.build(h.Serving.Number, len(h.Serving.Workers), h.Keys, v.reportsOf(&gen))
	s, ok := gen.(*Supervisor)
	if !ok {
		reply(ev.reply, errUpgradeDirect)
		return
	}
	s.adopt(h.Serving)
	if err := v.promote(l, gen); err != nil {
		reply(ev.reply, err) // not reached: an adopted generation is promoted already
		return
	}
	for _, w := range h.Serving.Workers {
		l.slots.slot(w.Index).failures = w.Failures
	}
	v.log.Info("upgraded", "generation", gen.number(), "pid", os.Getpid(), "workers", len(h.Serving.Workers),
		"exec_took", time.Since(h.ExecAt).Round(100*time.Microsecond))
	l.reload = true
	v.next(l)
	reply(ev.reply, nil)
}
