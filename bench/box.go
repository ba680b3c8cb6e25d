//go:build linux

// box.go keeps measurements honest on a shared machine: it waits for the
// box to go quiet before each one, and accounts who used the CPUs during
// it (the server's process tree, the load generator, and other work).

package main

import (
	"crypto/sha256"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every
// architecture Linux runs Go on (sysconf needs cgo to ask).
const clockTicks = 100

// box is the machine's CPUs as the run sees them.
type box struct {
	cfg     config
	ncpu    int
	waited  time.Duration // spent waiting for quiet, in all
	retried int           // measurements repeated because other work disturbed them
	probes  []float64     // each speed probe's time, in ms (probe)
}

func newBox(cfg config) *box { return &box{cfg: cfg, ncpu: runtime.NumCPU()} }

// cpuBusy is the machine's user+nice+system+steal time, in ticks.
// irq and softirq time is left out: loopback TCP work runs in softirq and
// is charged to no task, so it would count as other work although the
// run's own traffic caused it.
func cpuBusy() uint64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var t uint64
	for _, i := range []int{1, 2, 3, 8} {
		n, _ := strconv.ParseUint(f[i], 10, 64)
		t += n
	}
	return t
}

// waitQuiet waits, with none of the run's servers running, until other
// work uses at most -quiet-pct of the CPUs, within -quiet-wait each time
// and -quiet-budget in all.
func (x *box) waitQuiet() {
	if x.cfg.quietWait <= 0 {
		return
	}
	t0 := time.Now()
	said := false
	for {
		b0 := cpuBusy()
		time.Sleep(500 * time.Millisecond)
		pct := 100 * float64(cpuBusy()-b0) / (clockTicks * 0.5 * float64(x.ncpu))
		if pct <= x.cfg.quietPct {
			break
		}
		if time.Since(t0) >= x.cfg.quietWait || x.waited+time.Since(t0) >= x.cfg.quietBudget {
			say("  box still busy (%.0f%% of the CPUs used by other work); going on", pct)
			break
		}
		if !said {
			say("  box busy (%.0f%% of the CPUs used by other work); waiting up to %v", pct, x.cfg.quietWait)
			said = true
		}
	}
	x.waited += time.Since(t0)
	x.probe()
}

// probeBytes is the fixed work of one speed probe: hashing it takes about
// 21 ms on one core of the development VM (SHA-NI).
const probeBytes = 32 << 20

// probe times a fixed amount of CPU work on one thread, once the box is
// quiet, so the report can say whether the box's own speed moved during
// the run: a VM whose host is busy runs slower with no other work to
// see in /proc/stat, and a ratio of two measurements taken at two speeds
// is the speeds' ratio as much as the servers'.
func (x *box) probe() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	block := make([]byte, 64<<10)
	h := sha256.New()
	t0 := time.Now()
	for range probeBytes / len(block) {
		h.Write(block)
	}
	h.Sum(nil)
	x.probes = append(x.probes, float64(time.Since(t0).Microseconds())/1000)
}

// maxSpeedSpread is the most the probes may spread, in percent, before
// the report names it a problem: twice the 5% a target is checked to.
const maxSpeedSpread = 10

// speedSpread is how far the probes' times spread: (slowest - fastest) /
// median, in percent; 0 without probes.
func speedSpread(ms []float64) float64 {
	if len(ms) == 0 {
		return 0
	}
	return 100 * (slices.Max(ms) - slices.Min(ms)) / median(ms)
}

// usage is who used the CPUs during one measured run.
type usage struct {
	serverPct float64 // the server's process tree, % of one core
	otherPct  float64 // neither the server nor the load generator, % of all cores
}

// account runs load, which returns the CPU time its load generator used,
// and says who used the CPUs meanwhile.
func (x *box) account(serverPID int, load func() time.Duration) usage {
	b0, s0, t0 := cpuBusy(), treeTicks(serverPID), time.Now()
	loadCPU := load()
	el := time.Since(t0).Seconds()
	busy, srv := float64(cpuBusy()-b0), float64(treeTicks(serverPID)-s0)
	other := max(0, busy-srv-loadCPU.Seconds()*clockTicks)
	return usage{serverPct: 100 * srv / (clockTicks * el), otherPct: 100 * other / (clockTicks * el * float64(x.ncpu))}
}

// measure runs load under account, again (up to -noisy-retries times)
// while other work took more than -noisy-pct of the CPUs.
func (x *box) measure(serverPID int, load func() time.Duration) usage {
	for attempt := 0; ; attempt++ {
		u := x.account(serverPID, load)
		if u.otherPct <= x.cfg.noisyPct || attempt >= x.cfg.noisyRetries {
			return u
		}
		say("  other work took %.1f%% of the CPUs during the run; measuring again", u.otherPct)
		x.retried++
		time.Sleep(time.Second)
	}
}
