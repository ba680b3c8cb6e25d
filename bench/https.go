//go:build linux

// https.go is section 5: HTTP/1.1 over TLS (wrk) and HTTP/2 (h2load)
// against nginx, caddy and the bare net/http TLS ceiling, one certificate
// for all.

package main

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// handshakeEOF is the line a Go TLS server logs for a connection closed
// before its handshake: wrk makes one such connection per run to test the
// address, so up to one per wrk run is wrk's, not a fault. Any other
// handshake error is one.
var handshakeEOF = regexp.MustCompile(`TLS handshake error from 127\.0\.0\.1:\d+: EOF`)

// httpsCheck requires both files over HTTP/1.1 and HTTP/2 (ALPN), with the
// site's exact bytes, verified against the run's certificate.
func (b *bench) httpsCheck(name string, port int) {
	for _, file := range []string{"1k", "64k"} {
		want := mustRead(filepath.Join(b.site, file+".html"))
		for _, h2 := range []bool{false, true} {
			code, major, body, err := get(b.client(h2), fmt.Sprintf("https://127.0.0.1:%d/%s.html", port, file))
			wantMajor := map[bool]int{false: 1, true: 2}[h2]
			if err != nil || code != 200 || major != wantMajor {
				die("%s: GET /%s.html over HTTP/%d answered %d over HTTP/%d, %v", name, file, wantMajor, code, major, err)
			}
			if !bytes.Equal(body, want) {
				die("%s: /%s.html over HTTP/%d answered 200 with wrong bytes", name, file, wantMajor)
			}
		}
	}
}

// httpsServer is one server of the HTTPS table.
type httpsServer struct {
	id, label, kind string
	w               int
}

// httpsLoad is one load of the HTTPS table: protocol h1 or h2, file 1k or 64k.
type httpsLoad struct{ proto, size string }

// https runs section 5's round-robin: each server, fresh for each trial,
// checked over HTTP/1.1 and HTTP/2, then loaded four ways.
func (b *bench) https() {
	c := b.cfg
	configs := []httpsServer{
		{"sv1", "servery -workers 1 (direct)", "servery-tls", 1},
		{"svn", fmt.Sprintf("servery -workers %d", c.httpsWorkers), "servery-tls", c.httpsWorkers},
		{"ng", "nginx (1 worker)", "nginx-tls", 1},
		{"cd", "caddy file_server", "caddy", 1},
		{"bt", "bare net/http TLS (ceiling)", "baretls", 1},
	}
	loads := []httpsLoad{{"h1", "1k"}, {"h1", "64k"}, {"h2", "1k"}, {"h2", "64k"}}
	results := map[string][]trial{} // id/proto/size
	tlsInfo, eofs, wrkRuns := map[string]string{}, map[string]int{}, map[string]int{}
	for t := 1; t <= c.trials; t++ {
		for k := range configs {
			idx := (k + t - 1) % len(configs) // round-robin, rotated per trial
			sc := configs[idx]
			name := fmt.Sprintf("https-%s-t%d", sc.id, t)
			port := c.basePort + 50 + idx
			say("https trial %d/%d: %s (%s on cpu %s, load on %s)", t, c.trials, sc.id, sc.label, c.serverCPU, c.wrkCPU)
			b.box.waitQuiet()
			s := b.startServer(name, sc.kind, sc.w, c.serverCPU, port)
			b.httpsCheck(name, port)
			nwrk := 0
			for _, ld := range loads {
				url := fmt.Sprintf("https://127.0.0.1:%d/%s.html", port, ld.size)
				out := b.logPath(fmt.Sprintf("https-%s-%s-%s-t%d.txt", ld.proto, ld.size, sc.id, t))
				if ld.proto == "h1" {
					b.wrk(b.logPath(fmt.Sprintf("https-warm-%s-%s-%s-t%d.txt", ld.proto, ld.size, sc.id, t)), c.wrkCPU, c.warmup, url)
					nwrk++
				}
				var res loadResult
				u := b.box.measure(s.pid, func() time.Duration {
					if ld.proto == "h1" {
						res = b.wrk(out, c.wrkCPU, c.dur, url)
						res.alpn = "http/1.1"
						nwrk++
					} else {
						res = b.h2load(out, c.wrkCPU, c.dur, url)
					}
					return res.cpu
				})
				if ld.proto == "h2" {
					if res.alpn != "h2" {
						b.rep.problem("%s %s %s: h2load negotiated %q, not h2", name, ld.proto, ld.size, res.alpn)
					}
					if tlsInfo[sc.id] == "" {
						tlsInfo[sc.id] = res.tls
					}
				}
				if math.IsNaN(res.rps) {
					b.rep.problem("%s %s %s: no req/s in the load generator's output (%s)", name, ld.proto, ld.size, out)
				}
				if res.errors != 0 {
					b.rep.problem("%s %s %s: %d errors (socket errors, failed requests, non-2xx) (%s)", name, ld.proto, ld.size, res.errors, out)
				}
				key := sc.id + "/" + ld.proto + "/" + ld.size
				results[key] = append(results[key], trial{res, u})
				say("  %s %s: %s req/s, errors %d, server CPU %.0f%% of a core, other work %.1f%%", ld.proto, ld.size, num("%.0f", res.rps), res.errors, u.serverPct, u.otherPct)
			}
			b.stop(s)
			n := len(handshakeEOF.FindAllIndex(mustRead(s.log), -1))
			eofs[sc.id] += n
			wrkRuns[sc.id] += nwrk
			if n > nwrk {
				b.rep.problem("%s: %d 'TLS handshake error ... EOF' log lines, more than the %d wrk runs that explain one each", name, n, nwrk)
			}
			if sc.kind == "servery-tls" {
				b.logIssues(name, s.log, handshakeEOF)
			}
		}
	}
	b.httpsTable(configs, loads, results, tlsInfo, eofs, wrkRuns)
}

// httpsTable writes section 5's table against the bare TLS ceiling.
func (b *bench) httpsTable(configs []httpsServer, loads []httpsLoad, results map[string][]trial,
	tlsInfo map[string]string, eofs, wrkRuns map[string]int) {
	c := b.cfg
	nw := c.httpsWorkers
	b.rep.md("## 5. HTTPS: HTTP/1.1 over TLS (wrk) and HTTP/2 (h2load), GET /1k.html and /64k.html", "")
	b.rep.mdf("Each server pinned to CPU %s (children inherit; Go servers get GOMAXPROCS=1 from it, servery's workers their own default), the load generator to CPU %s, %d trial(s) run round-robin across servers, a fresh server per trial running all four loads. Every server has the same self-signed ECDSA P-256 certificate and key; keep-alive throughout, so handshakes are not what is measured.", c.serverCPU, c.wrkCPU, c.trials)
	b.rep.mdf("- h1 TLS: `wrk -t1 -c%d -d%v` after a %v warmup run (wrk offers no ALPN: HTTP/1.1).", c.conns, c.dur, c.warmup)
	b.rep.mdf("- h2: `h2load -t1 -c%d -m%d --warm-up-time=%v -D %v`: %d connections with up to %d streams in flight on each, req/s over the measured %v; ALPN h2 checked.", c.h2Conns, c.h2Streams, c.warmup, c.dur, c.h2Conns, c.h2Streams, c.dur)
	b.rep.mdf("- nginx %s: 1 worker, `ssl_protocols TLSv1.2 TLSv1.3` (servery's range), `keepalive_requests 1000000` (the default 1000 ends HTTP/2 connections, which h2load does not reopen), access_log off, open_file_cache on. caddy: `file_server`, admin off, auto_https off, HTTP/1.1+HTTP/2 only, errors-only log. bare net/http TLS: servery's tls.Config and precomputed replies with servery's headers, default http.Server (no timeouts) and net/http's HTTP/2 defaults.", b.nginxVersion())
	b.rep.mdf("- Cells: median req/s (MAD as %% of the median). Target: servery / bare net/http TLS >= 0.95x in every row, for direct mode and for -workers %d (whose workers share the one core).", nw)
	b.rep.md("")
	b.rep.mdf("| protocol | file | servery w1 | servery w%d | nginx | caddy | bare net/http TLS (ceiling) | servery w1 / ceiling | servery w%d / ceiling | errors | other work on box (max %%) |", nw, nw)
	b.rep.md("|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|")
	var summary []string
	for _, ld := range loads {
		proto := "h1 TLS (wrk)"
		if ld.proto == "h2" {
			proto = "h2 (h2load)"
		}
		cells := []string{proto, ld.size}
		med := map[string]float64{}
		var all []trial
		for _, sc := range configs {
			ts := results[sc.id+"/"+ld.proto+"/"+ld.size]
			all = append(all, ts...)
			med[sc.id] = median(rps(ts))
			cells = append(cells, fmt.Sprintf("%s (±%s)", num("%.0f", med[sc.id]), num("%.1f%%", madPct(rps(ts)))))
		}
		for _, id := range []string{"sv1", "svn"} {
			r := ratio(med[id], med["bt"])
			cells = append(cells, num("%.3fx", r)+" "+verdict(r, ">=", 0.95, none))
			if !(r >= 0.95) {
				who := "w1"
				if id == "svn" {
					who = fmt.Sprintf("w%d", nw)
				}
				summary = append(summary, fmt.Sprintf("- %s %s: servery %s / ceiling %s (%s / %s req/s), below the 0.95x target",
					ld.proto, ld.size, who, num("%.3fx", r), num("%.0f", med[id]), num("%.0f", med["bt"])))
			}
		}
		cells = append(cells, fmt.Sprint(errorsOf(all)), num("%.1f", maxOf(field(all, func(t trial) float64 { return t.otherPct }))))
		b.rep.md("| " + strings.Join(cells, " | ") + " |")
	}
	b.rep.md("")
	var info, eof []string
	for _, sc := range configs {
		info = append(info, sc.label+": "+cmp.Or(tlsInfo[sc.id], "n/a"))
		if sc.id == "sv1" || sc.id == "svn" || sc.id == "bt" {
			eof = append(eof, fmt.Sprintf("%s %d/%d", sc.id, eofs[sc.id], wrkRuns[sc.id]))
		}
	}
	b.rep.mdf("- Negotiated with h2load (TLS version, cipher): %s.", strings.Join(info, "; "))
	b.rep.mdf("- \"TLS handshake error ... EOF\" log lines / wrk runs: %s (sv1/svn = servery w1/w%d, bt = bare net/http TLS). wrk tests the address with one plain TCP connect per run and closes it before any handshake, so up to one such line per wrk run is wrk's, not a server fault, and is left out of the Problems list; more would be reported there.", strings.Join(eof, ", "), nw)
	if len(summary) == 0 {
		summary = []string{"- servery is within 0.95x of the bare net/http TLS ceiling in every row."}
	}
	b.rep.md(summary...)
	b.rep.md("- errors = wrk socket errors + non-2xx/3xx, or h2load failed + errored + timeout + 3xx/4xx/5xx, summed over trials. other work on box: as in section 1; above a few % the row is noisy.", "")
}
