//go:build linux

package main

import (
	"math"
	"os"
	"strings"
	"syscall"
	"testing"
)

// wrkErrors is wrk's report of a run with socket errors and non-2xx
// answers, as wrk 4.1 prints it.
const wrkErrors = `Running 1s test @ http://127.0.0.1:18180/1k.html
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.99ms    1.11ms   6.34ms   60.42%
    Req/Sec    32.36k     0.94k   34.00k    54.55%
  Latency Distribution
     50%    2.02ms
     75%    2.87ms
     90%    3.48ms
     99%    1.20s
  35301 requests in 1.10s, 43.70MB read
  Socket errors: connect 1, read 2, write 3, timeout 4
  Non-2xx or 3xx responses: 5
Requests/sec:  32119.35
Transfer/sec:     39.76MB
`

const h2loadReport = `TLS Protocol: TLSv1.3
Cipher: TLS_AES_128_GCM_SHA256
Server Temp Key: X25519 253 bits
Application protocol: h2
finished in 2.00s, 15264.00 req/s, 15.30MB/s
requests: 15264 total, 15264 started, 15264 done, 15260 succeeded, 1 failed, 2 errored, 3 timeout
status codes: 15255 2xx, 4 3xx, 5 4xx, 6 5xx
`

func TestParseWrkCountsEveryKindOfError(t *testing.T) {
	r := parseWrk(wrkErrors)
	if r.rps != 32119.35 || r.p99ms != 1200 || r.errors != 15 {
		t.Errorf("parseWrk = rps %v p99 %v ms errors %d; want 32119.35, 1200, 15", r.rps, r.p99ms, r.errors)
	}
	if r := parseWrk("wrk: cannot connect"); !math.IsNaN(r.rps) {
		t.Errorf("parseWrk of no report: rps %v; want NaN", r.rps)
	}
}

func TestParseH2loadReadsRateErrorsAndNegotiation(t *testing.T) {
	r := parseH2load(h2loadReport)
	if r.rps != 15264 || r.errors != 1+2+3+4+5+6 || r.alpn != "h2" || r.tls != "TLSv1.3 TLS_AES_128_GCM_SHA256" {
		t.Errorf("parseH2load = %+v; want 15264 req/s, 21 errors, h2, TLSv1.3 TLS_AES_128_GCM_SHA256", r)
	}
}

func TestMedianAndDispersion(t *testing.T) {
	if m := median([]float64{3, 1, math.NaN(), 2, 10}); m != 2.5 {
		t.Errorf("median = %v; want 2.5 (NaN left out)", m)
	}
	// Deviations from 100: 10, 0, 20 -> median 10, 10% of 100.
	if d := madPct([]float64{90, 100, 120}); d != 10 {
		t.Errorf("madPct = %v; want 10", d)
	}
	if !math.IsNaN(median(nil)) || num("%.1f", math.NaN()) != "n/a" {
		t.Error("no figures must read n/a")
	}
}

func TestVerdictNamesTargetAndStretch(t *testing.T) {
	for _, tc := range []struct {
		v, target, stretch float64
		op, want           string
	}{
		{2.1, 2.0, none, ">=", "**PASS**"},
		{0.8, 0.75, 0.85, ">=", "**PASS** (stretch 0.85: not met)"},
		{40, 250, 50, "<", "**PASS** (stretch 50: PASS)"},
		{math.NaN(), 1.5, none, "<=", "**FAIL**"},
	} {
		if got := verdict(tc.v, tc.op, tc.target, tc.stretch); got != tc.want {
			t.Errorf("verdict(%v %s %v, %v) = %q; want %q", tc.v, tc.op, tc.target, tc.stretch, got, tc.want)
		}
	}
}

func TestMaxOverFairOfWorkerCounts(t *testing.T) {
	if v := maxOverFair([]string{"10", "30"}); v != 1.5 {
		t.Errorf("maxOverFair = %v; want 1.5", v)
	}
	if v := maxOverFair([]string{"?", "3"}); !math.IsNaN(v) {
		t.Errorf("maxOverFair with an unreported worker = %v; want NaN", v)
	}
}

// TestExitStatusesAreTheREADMEs holds the bench to bench/README.md: 0, or
// 3 when the report lists problems, 1 when a run cannot finish, 128 + N
// on signal N, and 2 for bad flags (0 for -help).
func TestExitStatusesAreTheREADMEs(t *testing.T) {
	for name, tc := range map[string]struct {
		measure func(b *bench)
		want    int
	}{
		"finished":      {func(b *bench) {}, 0},
		"problems":      {func(b *bench) { b.rep.problem("a wrk error") }, 3},
		"cannot finish": {func(b *bench) { die("no nginx") }, 1},
	} {
		b := &bench{procs: newTracker(), rep: newReport()}
		if got := b.finish(func() { tc.measure(b) }); got != tc.want {
			t.Errorf("%s: finish = %d; want %d", name, got, tc.want)
		}
	}
	if got := signalStatus(syscall.SIGTERM); got != 143 {
		t.Errorf("signalStatus(SIGTERM) = %d; want 143", got)
	}
	if got := exitStatus([]string{"-help"}); got != 0 {
		t.Errorf("exitStatus(-help) = %d; want 0", got)
	}
	if got := exitStatus([]string{"-no-such-flag"}); got != 2 {
		t.Errorf("exitStatus(-no-such-flag) = %d; want 2", got)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), "It exits 0, or 3 when the report lists problems, or 1 when a run cannot finish, or 128 + N on signal N") {
		t.Error("bench/README.md no longer states the exit statuses this test holds")
	}
}

func TestSpeedSpreadIsTheProbesRangeOverTheirMedian(t *testing.T) {
	for _, tc := range []struct {
		ms   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{20}, 0},
		{[]float64{20, 20, 20}, 0},
		{[]float64{18, 20, 22}, 20},
		{[]float64{20, 40, 20, 20}, 100},
	} {
		if got := speedSpread(tc.ms); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("speedSpread(%v) = %v, want %v", tc.ms, got, tc.want)
		}
	}
}
