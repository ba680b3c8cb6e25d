//go:build unix

package main

// scale_test.go: the worker count changes while the service serves
// (scale.go), by Control.Scale (Service.Scale) and by SIGTTIN and
// SIGTTOU, and holds across reloads.

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// scaleWithin calls Scale(n) with a deadline a busy box meets.
func (h *serviceHarness) scaleWithin(n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return h.svc.Scale(ctx, n)
}

func TestScalingTwoToFourToTwoUnderLoadFailsNothing(t *testing.T) {
	h := newServiceHarness(t, 2, nil)
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := h.servingPIDs()
	l := startLoad(t, h.addr, "/", 32)
	waitAnswered(t, l, 200)
	if err := h.scaleWithin(4); err != nil {
		t.Fatalf("Scale(4): %v", err)
	}
	grown := h.servingPIDs()
	if len(grown) != 4 || !slices.Equal(grown[:2], first) {
		t.Fatalf("after Scale(4) the workers are %v; want %v and two more", grown, first)
	}
	waitAnswered(t, l, l.ok.Load()+200)
	if err := h.scaleWithin(2); err != nil {
		t.Fatalf("Scale(2): %v", err)
	}
	if got := h.servingPIDs(); !slices.Equal(got, first) {
		t.Errorf("after Scale(2) the workers are %v; want the first two, %v", got, first)
	}
	for _, pid := range grown[2:] {
		if !waitGone(pid, 30*time.Second) {
			t.Errorf("removed worker %d still runs 30 s after its slot went", pid)
		}
	}
	waitAnswered(t, l, l.ok.Load()+200)
	l.stopLoad()
	if l.truncated.Load()+l.refused.Load()+l.other.Load()+l.retried.Load() != 0 {
		first := ""
		if p := l.firstErr.Load(); p != nil {
			first = *p
		}
		t.Errorf("scaling 2 -> 4 -> 2 under 32 keep-alive clients: %d complete, %d truncated, %d refused, %d other, %d met a closed keep-alive connection (first: %s); want none",
			l.ok.Load(), l.truncated.Load(), l.refused.Load(), l.other.Load(), l.retried.Load(), first)
	}
	t.Logf("%d requests complete across the scaling", l.ok.Load())
}

// waitAnswered waits until the load has had n answers.
func waitAnswered(t *testing.T, l *load, n int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); l.ok.Load() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the load had %d answers after a minute; want %d", l.ok.Load(), n)
		}
	}
}

func TestScaledCountHoldsAcrossAReload(t *testing.T) {
	h := newServiceHarness(t, 2, nil)
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.scaleWithin(3); err != nil {
		t.Fatalf("Scale(3): %v", err)
	}
	if err := h.svc.Reload(context.Background()); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if st := h.svc.state(); st.Serving != 2 || len(st.ServingPIDs) != 3 {
		t.Errorf("after Scale(3) and a reload: generation %d serves with workers %v; want generation 2 with 3", st.Serving, st.ServingPIDs)
	}
}

func TestScaleThatCannotStartAWorkerKeepsTheCountThatServes(t *testing.T) {
	h := newServiceHarness(t, 2, map[int]string{2: faultFail})
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := h.servingPIDs()
	err := h.scaleWithin(3)
	if err == nil || !strings.Contains(err.Error(), "worker 2") {
		t.Fatalf("Scale(3) with a third worker that fails = %v; want its error, naming worker 2", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, serr := h.svc.status(ctx)
	if got := h.servingPIDs(); !slices.Equal(got, before) || serr != nil || s.Workers != 2 || s.Target != 2 {
		t.Errorf("after the failed Scale(3): workers %v (want %v), status %d of target %d (%v); want 2 of 2",
			got, before, s.Workers, s.Target, serr)
	}
	if !strings.Contains(h.readLogs(), `msg="worker add failed" generation=1 worker=2 workers=2`) {
		t.Errorf("no worker add failed line:\n%s", h.readLogs())
	}
}

func TestScaleDownRemovesASlotWaitingForItsRespawn(t *testing.T) {
	policy := testHeal
	policy.Backoff, policy.BackoffCap = time.Hour, time.Hour // the lost worker's respawn waits
	h := newHealHarness(t, 3, nil, policy)
	h.start()
	pids := h.servingPIDs()
	kill(pids[2]) // within Steady of its start: a failure, so the slot backs off
	h.waitLog(`msg="worker respawning" generation=1 worker=2 delay=\S+ failures=1`)
	if err := h.scaleWithin(2); err != nil {
		t.Fatalf("Scale(2) with slot 2 waiting an hour for its respawn: %v", err)
	}
	if got := h.servingPIDs(); !slices.Equal(got, pids[:2]) {
		t.Errorf("after Scale(2) the workers are %v; want %v", got, pids[:2])
	}
	if strings.Contains(h.readLogs(), "worker respawned") {
		t.Errorf("slot 2 was respawned after its removal:\n%s", h.readLogs())
	}
}

func TestScaleOutsideTheWorkerBoundsIsRefused(t *testing.T) {
	h := newServiceHarness(t, 2, nil)
	if err := h.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 0, maxWorkers + 1} {
		if err := h.scaleWithin(n); err == nil || !strings.Contains(err.Error(), "must be from 2 to 1024") {
			t.Errorf("Scale(%d) = %v; want the bounds named", n, err)
		}
	}
	if got := h.servingPIDs(); len(got) != 2 {
		t.Errorf("after refused scales the workers are %v; want 2", got)
	}
}

func TestSIGTTINAndSIGTTOUAddAndRemoveAWorker(t *testing.T) {
	s, addr := startProbeWithStatus(t, "-workers", "2")
	s.signal(syscall.SIGTTIN)
	m := waitLogMatch(t, s, `msg="worker added" generation=1 worker=2 pid=(\d+) workers=3`)
	if doc := readStatus(t, addr); doc.Workers != 3 || doc.WorkersTarget != 3 || len(doc.Slots) != 3 || doc.Slots[2].PID == 0 {
		t.Errorf("/status after SIGTTIN: workers %d, target %d, slots %+v; want 3, 3 and slot 2 serving", doc.Workers, doc.WorkersTarget, doc.Slots)
	}
	if m := scrape(t, addr); m["servery_worker_slots"] != 3 || m["servery_worker_slots_target"] != 3 {
		t.Errorf("/metrics after SIGTTIN: slots %v, target %v; want 3 and 3", m["servery_worker_slots"], m["servery_worker_slots_target"])
	}
	if code, _, err := get(s.addr, "/"); err != nil || code != 200 {
		t.Errorf("GET / after SIGTTIN: %d, %v", code, err)
	}
	s.signal(syscall.SIGTTOU)
	waitLog(t, s, `msg="worker removed" generation=1 worker=2 pid=`+m[1]+` workers=2`)
	s.signal(syscall.SIGTTOU) // at 2 already: worker mode stays worker mode
	waitLog(t, s, `level=WARN msg="scale ignored" generation=1 workers=2 err="scale to 1: the worker count must be from 2 to 1024`)
	if doc := readStatus(t, addr); doc.Workers != 2 || doc.WorkersTarget != 2 || len(doc.Slots) != 2 {
		t.Errorf("/status after SIGTTOU: workers %d, target %d, %d slots; want 2, 2, 2", doc.Workers, doc.WorkersTarget, len(doc.Slots))
	}
	if pid, _ := strconv.Atoi(m[1]); !waitGone(pid, 30*time.Second) {
		t.Errorf("removed worker %s still runs", m[1])
	}
}

func TestSIGTTINInDirectModeSaysItCannotAndServesOn(t *testing.T) {
	s := startServery(t, "-dir", t.TempDir(), "-workers", "1")
	s.signal(syscall.SIGTTIN)
	waitLog(t, s, `level=WARN msg="scale ignored" generation=1 workers=1 err="scale: direct mode \(-workers 1\)`)
	if code, _, err := get(s.addr, "/"); err != nil || code == 0 {
		t.Errorf("GET / after SIGTTIN in direct mode: %d, %v; want an answer: the process must not stop", code, err)
	}
}
