//go:build linux

// load.go runs the load generators, wrk for HTTP/1.1 and h2load for
// HTTP/2, and reads their results.

package main

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// loadResult is what one load run measured. errors counts wrk's socket
// errors and non-2xx/3xx answers, or h2load's failed, errored and timed
// out requests and 3xx, 4xx and 5xx answers.
type loadResult struct {
	rps    float64
	p99ms  float64 // wrk only
	errors int
	alpn   string // h2load only
	tls    string // h2load only: "TLSv1.3 TLS_AES_128_GCM_SHA256"
	cpu    time.Duration
}

// runLoad runs a load generator pinned to cpus (unless empty), its output
// to out, killed after limit; it returns the CPU time the generator used.
// A failed run is a problem of the report, not the end of the run.
func (b *bench) runLoad(out, cpus string, limit time.Duration, argv ...string) time.Duration {
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	st, err := b.runBounded(out, limit, argv...)
	if err != nil {
		b.rep.problem("%s failed: %v (%s): %s", strings.Join(argv, " "), err, out, tail(out, 3))
	}
	if st == nil {
		return 0
	}
	return st.UserTime() + st.SystemTime()
}

// wrk runs wrk -t1 against url for dur, with the run's connections and
// any extra arguments, and parses its report.
func (b *bench) wrk(out, cpus string, dur time.Duration, url string, extra ...string) loadResult {
	argv := append([]string{"wrk", "-t1", fmt.Sprintf("-c%d", b.cfg.conns), fmt.Sprintf("-d%ds", int(dur.Seconds())), "--latency"}, extra...)
	cpu := b.runLoad(out, cpus, dur+30*time.Second, append(argv, url)...)
	r := parseWrk(string(mustRead(out)))
	r.cpu = cpu
	return r
}

// h2load runs h2load over TLS (ALPN h2): one thread, -h2-conns
// connections with -h2-streams streams each, -warmup on the same
// connections first, then dur measured.
func (b *bench) h2load(out, cpus string, dur time.Duration, url string) loadResult {
	cpu := b.runLoad(out, cpus, dur+b.cfg.warmup+30*time.Second, "h2load", "-t1",
		fmt.Sprintf("-c%d", b.cfg.h2Conns), fmt.Sprintf("-m%d", b.cfg.h2Streams),
		fmt.Sprintf("--warm-up-time=%ds", int(b.cfg.warmup.Seconds())), "-D", fmt.Sprintf("%ds", int(dur.Seconds())), url)
	r := parseH2load(string(mustRead(out)))
	r.cpu = cpu
	return r
}

var (
	wrkRPS     = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	wrkP99     = regexp.MustCompile(`(?m)^\s+99%\s+([0-9.]+)(us|ms|s|m|h)\b`)
	wrkSocket  = regexp.MustCompile(`(?m)^\s+Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	wrkNon2xx  = regexp.MustCompile(`(?m)^\s+Non-2xx or 3xx responses: (\d+)`)
	h2Finished = regexp.MustCompile(`(?m)^finished in .*?, ([0-9.]+) req/s`)
	h2Requests = regexp.MustCompile(`(?m)^requests: .*?(\d+) failed, (\d+) errored, (\d+) timeout`)
	h2Codes    = regexp.MustCompile(`(?m)^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
	h2ALPN     = regexp.MustCompile(`(?m)^Application protocol: (\S+)`)
	h2TLS      = regexp.MustCompile(`(?m)^TLS Protocol: (\S+)`)
	h2Cipher   = regexp.MustCompile(`(?m)^Cipher: (\S+)`)
)

// parseWrk reads wrk's report: requests per second, the 99th percentile
// latency in milliseconds, and the errors.
func parseWrk(out string) loadResult {
	r := loadResult{rps: math.NaN(), p99ms: math.NaN()}
	if m := wrkRPS.FindStringSubmatch(out); m != nil {
		r.rps, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := wrkP99.FindStringSubmatch(out); m != nil {
		v, _ := strconv.ParseFloat(m[1], 64)
		r.p99ms = v * map[string]float64{"us": 0.001, "ms": 1, "s": 1000, "m": 60000, "h": 3600000}[m[2]]
	}
	if m := wrkSocket.FindStringSubmatch(out); m != nil {
		r.errors += atoi(m[1]) + atoi(m[2]) + atoi(m[3]) + atoi(m[4])
	}
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		r.errors += atoi(m[1])
	}
	return r
}

// parseH2load reads h2load's report: requests per second over the
// measured time, the errors, and what TLS and ALPN negotiated.
func parseH2load(out string) loadResult {
	r := loadResult{rps: math.NaN(), p99ms: math.NaN(), alpn: "none"}
	if m := h2Finished.FindStringSubmatch(out); m != nil {
		r.rps, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := h2Requests.FindStringSubmatch(out); m != nil {
		r.errors += atoi(m[1]) + atoi(m[2]) + atoi(m[3])
	}
	if m := h2Codes.FindStringSubmatch(out); m != nil {
		r.errors += atoi(m[2]) + atoi(m[3]) + atoi(m[4]) // 3xx, 4xx, 5xx
	}
	if m := h2ALPN.FindStringSubmatch(out); m != nil {
		r.alpn = m[1]
	}
	if p, c := h2TLS.FindStringSubmatch(out), h2Cipher.FindStringSubmatch(out); p != nil && c != nil {
		r.tls = p[1] + " " + c[1]
	}
	return r
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }
