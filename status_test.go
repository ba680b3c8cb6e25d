package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var statusRe = regexp.MustCompile(`msg="status listener" url=http://([^/ ]+)/`)

// startWithStatus starts servery with args and its status listener on a
// free port, and returns it with the status listener's address.
func startWithStatus(t *testing.T, args ...string) (*servery, string) {
	t.Helper()
	s := startServery(t, append([]string{"-status-addr", "127.0.0.1:0"}, args...)...)
	m := statusRe.FindStringSubmatch(s.logs())
	if m == nil {
		t.Fatalf("no status listener in the log:\n%s", s.logs())
	}
	return s, m[1]
}

// statusGet fetches path from the status listener and returns the
// response with its body read.
func statusGet(t *testing.T, addr, method, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp, string(b)
}

// scrape returns /metrics as a map from each sample's name and labels,
// as written, to its value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, body := statusGet(t, addr, "GET", "/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s %s", resp.Status, body)
	}
	samples := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("/metrics line %q is not a sample", line)
		}
		samples[line[:i]] = v
	}
	return samples
}

// requestsTotal is the sum of servery_requests_total over the slots.
func requestsTotal(m map[string]float64) float64 {
	var n float64
	for k, v := range m {
		if strings.HasPrefix(k, "servery_requests_total{") {
			n += v
		}
	}
	return n
}

// readStatus returns /status, decoded.
func readStatus(t *testing.T, addr string) statusDoc {
	t.Helper()
	resp, body := statusGet(t, addr, "GET", "/status")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("/status: %s, %q: %s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	var doc statusDoc
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("/status is not its JSON: %v\n%s", err, body)
	}
	return doc
}

// getN makes n requests to the service, each over its own connection, so
// they spread over the workers.
func getN(t *testing.T, addr string, n int) {
	t.Helper()
	for range n {
		if code, _, err := get(addr, "/"); err != nil || code != http.StatusOK {
			t.Fatalf("GET /: %d, %v", code, err)
		}
	}
}

// counterWatch scrapes again and again, failing the test if any counter
// ever goes backwards between two scrapes.
type counterWatch struct {
	t    *testing.T
	addr string
	last map[string]float64
}

func (w *counterWatch) scrape() map[string]float64 {
	w.t.Helper()
	m := scrape(w.t, w.addr)
	for k, v := range m {
		name, _, _ := strings.Cut(k, "{")
		counter := strings.HasSuffix(name, "_total") || strings.HasSuffix(name, "_bucket") ||
			strings.HasSuffix(name, "_count") || strings.HasSuffix(name, "_sum") // a histogram's too
		if counter && v < w.last[k] {
			w.t.Errorf("%s went backwards: %v, then %v", k, w.last[k], v)
		}
	}
	for k := range w.last {
		if _, ok := m[k]; !ok {
			w.t.Errorf("%s vanished from /metrics", k)
		}
	}
	w.last = m
	return m
}

// scrapeUntilCounted scrapes until the requests counted reach at least
// want, and fails if they do not within 30 s. One scrape may not show the
// last requests: it waits for an answer to its question or to one asked
// just before it (nextReply), whose counters are a little older.
func scrapeUntilCounted(t *testing.T, scrape func() map[string]float64, want float64) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := scrape()
		if requestsTotal(m) >= want {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v requests counted after 30 s; %v were answered", requestsTotal(m), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRequests scrapes until the requests counted reach want, and fails
// if they pass it or do not reach it within 10 s.
func (w *counterWatch) waitRequests(want float64) map[string]float64 {
	w.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := w.scrape()
		got := requestsTotal(m)
		if got > want {
			w.t.Fatalf("%v requests counted; only %v were made", got, want)
		}
		if got == want {
			return m
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%v requests counted; want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStatusListenerServesTheFourEndpoints(t *testing.T) {
	skipWithoutWorkers(t)
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	s, addr := startWithStatus(t, "-dir", site, "-workers", "2")
	getN(t, s.addr, 5)

	for _, path := range []string{"/livez", "/readyz"} {
		if resp, body := statusGet(t, addr, "GET", path); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %s %q while serving; want 200", path, resp.Status, body)
		}
		if resp, body := statusGet(t, addr, "HEAD", path); resp.StatusCode != http.StatusOK || body != "" {
			t.Errorf("HEAD %s = %s %q; want 200 without a body", path, resp.Status, body)
		}
	}

	doc := readStatus(t, addr)
	pids := s.workerPIDs()
	if doc.Generation != 1 || !doc.Ready || doc.Stopping || doc.PID != s.cmd.Process.Pid || doc.UptimeSeconds <= 0 {
		t.Errorf("/status = %+v; want generation 1, ready, not stopping, pid %d, an uptime", doc, s.cmd.Process.Pid)
	}
	if len(doc.Slots) != 2 {
		t.Fatalf("/status has %d slots; want 2", len(doc.Slots))
	}
	var served int64
	for i, slot := range doc.Slots {
		if slot.Index != i || slot.State != stateServing || slot.ReadySince == nil || !slices.Contains(pids, slot.PID) {
			t.Errorf("slot %d = %+v; want serving, ready since a time, with one of the pids %v", i, slot, pids)
		}
		served += slot.Requests
	}
	if served != 5 {
		t.Errorf("/status counts %d requests over the slots; want the 5 made", served)
	}
	if len(doc.Generations) != 1 || doc.Generations[0].Role != "serving" || len(doc.Generations[0].PIDs) != 2 {
		t.Errorf("/status generations = %+v; want generation 1 serving with 2 workers", doc.Generations)
	}

	resp, body := statusGet(t, addr, "GET", "/metrics")
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("/metrics Content-Type = %q; want text/plain; version=0.0.4", ct)
	}
	checkExposition(t, body)
	m := scrape(t, addr)
	for sample, want := range map[string]float64{
		`servery_workers{state="serving"}`:   2,
		`servery_workers{state="starting"}`:  0,
		`servery_generation`:                 1,
		`servery_ready`:                      1,
		`servery_reloads_total{result="ok"}`: 0,
	} {
		if got, ok := m[sample]; !ok || got != want {
			t.Errorf("%s = %v (present: %v); want %v", sample, got, ok, want)
		}
	}
	if got := requestsTotal(m); got != 5 {
		t.Errorf("servery_requests_total sums to %v; want the 5 made", got)
	}
	if start := m["servery_start_time_seconds"]; start <= 0 || start > float64(time.Now().Add(time.Second).Unix()) {
		t.Errorf("servery_start_time_seconds = %v; want a time in the past, in seconds", start)
	}

	if resp, _ := statusGet(t, addr, "GET", "/nope"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope = %s; want 404", resp.Status)
	}
	for _, method := range []string{"POST", "PUT", "DELETE"} {
		resp, _ := statusGet(t, addr, method, "/status")
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /status = %s, Allow %q; want 405 with Allow: GET, HEAD", method, resp.Status, resp.Header.Get("Allow"))
		}
	}
}

// checkExposition checks what promtool cannot be relied on to be here
// for: every sample follows its family's HELP and TYPE lines, counters
// end in _total, and every name is servery's.
func checkExposition(t *testing.T, body string) {
	t.Helper()
	typ := map[string]string{}
	help := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 4 && f[0] == "#" && f[1] == "HELP":
			help[f[2]] = true
		case len(f) == 4 && f[0] == "#" && f[1] == "TYPE":
			if typ[f[2]] != "" {
				t.Errorf("second TYPE line for %s", f[2])
			}
			typ[f[2]] = f[3]
			if f[3] == "counter" && !strings.HasSuffix(f[2], "_total") {
				t.Errorf("counter %s does not end in _total", f[2])
			}
		default:
			name, _, _ := strings.Cut(f[0], "{")
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && typ[base] == "histogram" {
					name = base // a histogram's series
				}
			}
			if !strings.HasPrefix(name, "servery_") || typ[name] == "" || !help[name] {
				t.Errorf("sample %q without its HELP and TYPE before it", line)
			}
		}
	}
}

func TestStatusSwitchesGenerationsInOneStep(t *testing.T) {
	// Generation 1's workers ignore their drain, so they live on for a
	// while after the reload retires them.
	h := newServiceHarness(t, 2, map[int]string{0: faultDeaf, 1: faultDeaf})
	h.later = map[int]map[int]string{2: {}}
	h.start()
	ctx := context.Background()
	before, err := h.svc.status(ctx) // generation 1 serves
	if err != nil {
		t.Fatal(err)
	}
	if err := h.svc.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := h.svc.status(ctx) // generation 2 serves; 1 retires
	if err != nil {
		t.Fatal(err)
	}
	// A scrape reads the snapshot, then the workers: one that read its
	// snapshot just before the promotion reads the workers after it.
	serving := func(s statusSnapshot) (n int) {
		for _, g := range s.gens {
			for _, v := range g.gen.workers(g.role == "serving") {
				if v.State == stateServing {
					n++
				}
			}
		}
		return n
	}
	if b, a := serving(before), serving(after); b != 2 || a != 2 {
		t.Errorf("workers serving: %d by the snapshot before the promotion, %d by the one after, both read after it; want 2 and 2", b, a)
	}
}

// TestStatusJSONHasTheDocumentedFields reads /status as raw JSON, so a
// field renamed in statusDoc fails here, and checks that each field
// README's "Status and metrics" names is there and means what it says:
// inflight counts a request being answered, memory_bytes a worker's
// resident memory (its own process's in direct mode), last_exit and
// restarts a slot's loss, reloads.* the last reload, and each
// generation's workers come in slot order, a respawned slot included.
func TestStatusJSONHasTheDocumentedFields(t *testing.T) {
	inBothModes(t, func(t *testing.T, workers string) {
		s, addr := startProbeWithStatus(t, "-workers", workers, "-slow", "3s")
		if workers != "1" {
			// Slot 0's worker lost and respawned: spawned after slot 1's.
			pid := s.workerPIDs()[0]
			kill(pid)
			waitLog(t, s, fmt.Sprintf(`msg="worker respawned" generation=1 worker=0 old_pid=%d`, pid))
			doc := rawStatus(t, addr)
			slot0 := doc["slots"].([]any)[0].(map[string]any)
			if slot0["last_exit"] != "signal: killed" || slot0["restarts"] != 1.0 || doc["workers_lost"] != 1.0 || doc["respawns"] != 1.0 {
				t.Errorf("after slot 0's worker was killed and respawned: last_exit %v, restarts %v, workers_lost %v, respawns %v; want \"signal: killed\", 1, 1, 1",
					slot0["last_exit"], slot0["restarts"], doc["workers_lost"], doc["respawns"])
			}
			var slots []float64
			for _, w := range doc["generations"].([]any)[0].(map[string]any)["workers"].([]any) {
				slots = append(slots, w.(map[string]any)["slot"].(float64))
			}
			if !slices.Equal(slots, []float64{0, 1}) {
				t.Errorf("generations[0].workers by slot: %v; want slot order, [0 1]", slots)
			}
		}
		// A request in flight, counted by its slot while it runs.
		go get(s.addr, "/slow")
		var doc map[string]any
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			doc = rawStatus(t, addr)
			inflight := 0.0
			for _, slot := range doc["slots"].([]any) {
				inflight += slot.(map[string]any)["inflight"].(float64)
			}
			if inflight == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("/status never counted the request in flight: %v", doc["slots"])
			}
		}
		for _, slot := range doc["slots"].([]any) {
			if m := slot.(map[string]any)["memory_bytes"].(float64); m < 1<<20 {
				t.Errorf("slot %v: memory_bytes %v; want its worker's resident memory, over 1 MiB", slot.(map[string]any)["index"], m)
			}
		}
		s.signal(syscall.SIGHUP)
		waitLog(t, s, `msg=reloaded generation=2`)
		doc = rawStatus(t, addr)
		reloads := doc["reloads"].(map[string]any)
		last, _ := reloads["last"].(map[string]any)
		if reloads["ok"] != 1.0 || reloads["failed"] != 0.0 || last == nil || last["generation"] != 2.0 || last["result"] != "ok" || last["at"] == nil {
			t.Errorf("/status reloads after one reload to generation 2: %v; want ok 1, failed 0, last generation 2, result ok, at", reloads)
		}
		// README.md, "Status and metrics", names these; recycle_failures of
		// a slot only when it has any, last_exit once it has lost a worker,
		// reloads.last.error only for a failed one.
		has(t, "/status", doc, "generation", "ready", "stopping", "pid", "started", "uptime_seconds", "goroutines", "slots", "generations",
			"reloads", "workers_lost", "respawns", "recycles", "recycles_by_limit", "recycle_failures", "spawn_refusals", "worker_exits")
		has(t, "reloads", reloads, "ok", "failed", "last")
		has(t, "reloads.last", last, "generation", "result", "at")
		for _, limit := range []string{"requests", "age", "memory"} {
			if _, ok := doc["recycles_by_limit"].(map[string]any)[limit]; !ok {
				t.Errorf("/status recycles_by_limit has no %q: %v", limit, doc["recycles_by_limit"])
			}
		}
		for _, reason := range []string{"clean", "error", "signal"} {
			if _, ok := doc["worker_exits"].(map[string]any)[reason]; !ok {
				t.Errorf("/status worker_exits has no %q: %v", reason, doc["worker_exits"])
			}
		}
		for i, slot := range doc["slots"].([]any) {
			want := []string{"index", "pid", "state", "ready_since", "requests", "connections", "restarts", "inflight", "memory_bytes", "hangs", "stuck_requests"}
			if workers != "1" && i == 0 {
				want = append(want, "last_exit")
			}
			has(t, "slot", slot.(map[string]any), want...)
		}
		for _, g := range doc["generations"].([]any) {
			has(t, "generation", g.(map[string]any), "number", "role", "workers")
			for _, w := range g.(map[string]any)["workers"].([]any) {
				has(t, "generation's worker", w.(map[string]any), "slot", "pid", "state")
			}
		}
		if n, _ := strconv.Atoi(workers); len(doc["slots"].([]any)) != n {
			t.Errorf("/status: %d slots; want %d", len(doc["slots"].([]any)), n)
		}
	})
}

// rawStatus reads /status as JSON without statusDoc, so it sees the
// field names a client sees.
func rawStatus(t *testing.T, addr string) map[string]any {
	t.Helper()
	_, body := statusGet(t, addr, "GET", "/status")
	var doc map[string]any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("/status: %v:\n%s", err, body)
	}
	return doc
}

// has reports each of keys that m lacks.
func has(t *testing.T, what string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s has no %q: %v", what, k, m)
		}
	}
}

func TestCountersNeverGoBackwardsAcrossRespawnRecycleReloadAndScale(t *testing.T) {
	skipWithoutWorkers(t)
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	s, addr := startWithStatus(t, "-dir", site, "-workers", "2", "-max-requests", "30")
	w := &counterWatch{t: t, addr: addr}
	made := 10
	getN(t, s.addr, made)
	w.waitRequests(float64(made))

	// Respawn: a killed worker's last report is all it can give, and
	// nothing was served since.
	killed := s.workerPIDs()[0]
	killGroup(killed)
	waitLog(t, s, `msg="worker respawned"`)
	m := w.waitRequests(float64(made))
	if m[`servery_worker_respawns_total`] != 1 || m[`servery_workers_lost_total`] != 1 || m[`servery_worker_exits_total{reason="signal"}`] != 1 {
		t.Errorf("after one kill: respawns %v, lost %v, exits by signal %v; want 1 each", m[`servery_worker_respawns_total`],
			m[`servery_workers_lost_total`], m[`servery_worker_exits_total{reason="signal"}`])
	}

	// Recycle: past -max-requests 30 (33 with the jitter), a worker is
	// replaced, and its done message brings its final counters.
	// Requests until a worker asks; then the recycle's own time, which a
	// busy box stretches (its replacement goes through the barrier).
	for deadline := time.Now().Add(time.Minute); !strings.Contains(s.logs(), `msg="worker recycled"`); w.scrape() {
		if time.Now().After(deadline) {
			t.Fatalf("no worker recycled within a minute, after %d requests:\n%s", made, s.logs())
		}
		if !strings.Contains(s.logs(), `msg="worker recycling"`) {
			getN(t, s.addr, 5)
			made += 5
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	m = w.waitRequests(float64(made))
	if m[`servery_worker_recycles_total{limit="requests"}`] < 1 {
		t.Errorf("servery_worker_recycles_total{limit=\"requests\"} = %v after a recycle at -max-requests", m[`servery_worker_recycles_total{limit="requests"}`])
	}

	// Reload: the whole generation exits, and its counts stay.
	getN(t, s.addr, 7)
	made += 7
	s.signal(syscall.SIGHUP)
	waitLog(t, s, `msg="generation retired" generation=1`)
	m = w.waitRequests(float64(made))
	if m[`servery_reloads_total{result="ok"}`] != 1 || m[`servery_generation`] != 2 || m[`servery_worker_exits_total{reason="clean"}`] < 2 {
		t.Errorf("after a reload: reloads ok %v, generation %v, clean exits %v; want 1, 2, at least 2",
			m[`servery_reloads_total{result="ok"}`], m[`servery_generation`], m[`servery_worker_exits_total{reason="clean"}`])
	}
	// Scale: a slot added, then removed; what its worker counted stays,
	// under its slot's label.
	s.signal(sigMore)
	waitLog(t, s, `msg="worker added" generation=2 worker=2`)
	getN(t, s.addr, 6)
	made += 6
	w.waitRequests(float64(made))
	s.signal(sigFewer)
	waitLog(t, s, `msg="worker removed" generation=2 worker=2`)
	getN(t, s.addr, 3)
	made += 3
	m = w.waitRequests(float64(made))
	if _, ok := m[`servery_requests_total{slot="2"}`]; !ok || m[`servery_worker_slots`] != 2 {
		t.Errorf("after a slot was added and removed: its requests series present %v, slots %v; want present, 2", ok, m[`servery_worker_slots`])
	}
	// The request metrics count the same requests, all 200s, in the
	// histogram as in the classes, through the kill, recycle and reload.
	var classes float64
	for _, c := range statusClasses {
		classes += m[`servery_http_responses_total{code="`+c+`"}`]
	}
	if ok, n, inf := m[`servery_http_responses_total{code="2xx"}`], m[`servery_http_request_duration_seconds_count`], m[`servery_http_request_duration_seconds_bucket{le="+Inf"}`]; ok != float64(made) || classes != ok || n != ok || inf != ok {
		t.Errorf("2xx %v of %v classes, duration count %v, +Inf bucket %v; want each %d, the requests made", ok, classes, n, inf, made)
	}
	doc := readStatus(t, addr)
	if doc.Reloads.OK != 1 || doc.Reloads.Last == nil || doc.Reloads.Last.Result != "ok" || doc.Reloads.Last.Generation != 2 {
		t.Errorf("/status reloads = %+v; want 1 ok, the last one generation 2's", doc.Reloads)
	}
	var restarts int64
	for _, slot := range doc.Slots {
		restarts += slot.Restarts
	}
	if restarts != 1 || doc.Respawns != 1 || doc.Recycles < 1 {
		t.Errorf("/status restarts %d, respawns %d, recycles %d; want 1, 1, at least 1", restarts, doc.Respawns, doc.Recycles)
	}
}

func TestDirectModeCountsItsRequestsAcrossReloads(t *testing.T) {
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	s, addr := startWithStatus(t, "-dir", site, "-workers", "1")
	w := &counterWatch{t: t, addr: addr}
	getN(t, s.addr, 4)
	w.waitRequests(4)
	s.signal(syscall.SIGHUP)
	waitLog(t, s, `msg=reloaded generation=2`)
	getN(t, s.addr, 2)
	m := w.waitRequests(6)
	if m[`servery_workers{state="serving"}`] != 1 || m[`servery_generation`] != 2 {
		t.Errorf("serving workers %v, generation %v; want 1 and 2", m[`servery_workers{state="serving"}`], m[`servery_generation`])
	}
	doc := readStatus(t, addr)
	if len(doc.Slots) != 1 || doc.Slots[0].PID != s.cmd.Process.Pid || doc.Slots[0].Requests != 6 {
		t.Errorf("/status slots = %+v; want one, served by servery's own pid %d, with 6 requests", doc.Slots, s.cmd.Process.Pid)
	}
}

func TestShutdownDelayIsNotReadyWhileServingOn(t *testing.T) {
	skipWithoutWorkers(t)
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	s, addr := startWithStatus(t, "-dir", site, "-workers", "2", "-shutdown-delay", "2s")
	s.signal(syscall.SIGTERM)
	waitLog(t, s, `msg="shutdown delay: not ready, serving on" delay=2s`)
	if resp, body := statusGet(t, addr, "GET", "/readyz"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %s %q during the shutdown delay; want 503", resp.Status, body)
	}
	if resp, _ := statusGet(t, addr, "GET", "/livez"); resp.StatusCode != http.StatusOK {
		t.Errorf("/livez = %s during the shutdown delay; want 200", resp.Status)
	}
	// New connections are still accepted and answered.
	getN(t, s.addr, 10)
	if m := scrape(t, addr); m["servery_ready"] != 0 || m[`servery_workers{state="serving"}`] != 2 {
		t.Errorf("servery_ready %v, serving workers %v during the delay; want 0 and 2", m["servery_ready"], m[`servery_workers{state="serving"}`])
	}
	if doc := readStatus(t, addr); doc.Ready || !doc.Stopping {
		t.Errorf("/status ready %v, stopping %v during the delay; want not ready, stopping", doc.Ready, doc.Stopping)
	}
	// A reload is never applied during the delay.
	s.signal(syscall.SIGHUP)
	waitLog(t, s, `msg="reload ignored: the service is stopping"`)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Fatalf("exit status %d; want 0", code)
	}
	logs := s.logs()
	over, stop := strings.Index(logs, `msg="shutdown delay over"`), strings.Index(logs, `msg="stop begun"`)
	if over < 0 || stop < over || strings.Contains(logs, "generation=2") {
		t.Errorf("want the delay over before the stop begins, and no generation 2:\n%s", logs)
	}
	s.assertNoWorkersLeft()
}

func TestSecondSignalDuringStartupHurriesTheRollback(t *testing.T) {
	// The first signal comes before any generation serves: there is no
	// shutdown delay to skip, so the second must go to the drain.
	fe := newFrontEnd(slog.New(slog.NewTextHandler(io.Discard, nil)))
	fe.delay = time.Minute
	fe.requestStop("signal", "test")
	if fe.skipDelay() {
		t.Error("a second signal during startup was spent on skipping a shutdown delay that never runs")
	}
	served := newFrontEnd(slog.New(slog.NewTextHandler(io.Discard, nil)))
	served.delay = time.Minute
	served.served.Store(true)
	served.requestStop("signal", "test")
	if !served.skipDelay() {
		t.Error("once a generation serves, a second signal does not skip the shutdown delay")
	}
}

func TestSecondSignalSkipsTheShutdownDelay(t *testing.T) {
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	s, _ := startWithStatus(t, "-dir", site, "-shutdown-delay", "1h")
	s.signal(syscall.SIGTERM)
	waitLog(t, s, `msg="shutdown delay: not ready, serving on"`)
	getN(t, s.addr, 1)
	s.signal(syscall.SIGINT)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Fatalf("exit status %d; want 0", code)
	}
	logs := s.logs()
	if !strings.Contains(logs, `msg="second signal: skipping the rest of the shutdown delay"`) ||
		strings.Contains(logs, "skipping the rest of the drain") {
		t.Errorf("want the second signal to skip the delay, not the drain:\n%s", logs)
	}
}

func TestStatusAddressInUseExitsOneNamingIt(t *testing.T) {
	busy := busyAddress(t)
	var stdout, stderr bytes.Buffer
	code := runStatic([]string{"-dir", t.TempDir(), "-addr", "127.0.0.1:0", "-status-addr", busy}, &stdout, &stderr)
	msg := stderr.String()
	if code != exitFailure || !strings.Contains(msg, "status_addr="+busy) || !strings.Contains(msg, "in use") || strings.Count(msg, "\n") != 1 {
		t.Errorf("run with a busy -status-addr = %d, %q; want %d and one line naming %s", code, msg, exitFailure, busy)
	}
}

// TestHostileStatusClientsHoldNothingButTheirConnections fills the status
// listener with clients that never finish a request: the service serves,
// reloads and stops as ever, the listener takes no more than its limit,
// and its header timeout frees it.
func TestHostileStatusClientsHoldNothingButTheirConnections(t *testing.T) {
	skipWithoutWorkers(t)
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	s, addr := startWithStatus(t, "-dir", site, "-workers", "2")
	var conns []net.Conn
	for range statusMaxConns + 4 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("GET /status HTTP/1.1\r\nHost: x\r\n")) // never ends its headers
		conns = append(conns, c)
	}
	getN(t, s.addr, 3)
	s.signal(syscall.SIGHUP)
	waitLog(t, s, `msg=reloaded generation=2`)
	start := time.Now()
	if resp, _ := statusGet(t, addr, "GET", "/livez"); resp.StatusCode != http.StatusOK {
		t.Errorf("/livez = %s once the hostile clients timed out", resp.Status)
	}
	if waited := time.Since(start); waited > statusHeaderTimeout+5*time.Second {
		t.Errorf("/livez answered after %v; the header timeout is %v", waited, statusHeaderTimeout)
	}
	// Each hostile connection was cut by the header timeout.
	for _, c := range conns[:statusMaxConns] {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
			continue // net/http's 408, then the close
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("a hostile status client still holds its connection after 10 s")
		}
	}
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != exitOK {
		t.Fatalf("exit status %d; want 0", code)
	}
}

// TestProbesAnswerWhateverOtherStatusClientsDo holds the status
// listener with 64 idle keep-alive clients, 64 slowloris clients that
// reconnect once cut, and a scrape that never reads: /readyz answers
// every probe at once all the same.
func TestProbesAnswerWhateverOtherStatusClientsDo(t *testing.T) {
	skipWithoutWorkers(t)
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	_, addr := startWithStatus(t, "-dir", site, "-workers", "2")
	stop := make(chan struct{})
	var hostile sync.WaitGroup
	t.Cleanup(func() { close(stop); hostile.Wait() })
	for range 64 {
		hostile.Go(func() { holdIdle(addr, stop) })
		hostile.Go(func() { slowloris(addr, stop) })
	}
	hostile.Go(func() { scrapeUnread(addr, stop) })
	time.Sleep(300 * time.Millisecond) // every hostile client has connected
	// The slowloris clients reconnect as soon as they are cut, a flood
	// of new connections that can close a probe's before its request
	// is read (README, "Status and metrics"): a cut probe tries once
	// more, as a kubelet's next period does, and its time counts both.
	var took []time.Duration
	cuts := 0
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range 20 {
		began := time.Now()
		resp, err := c.Get("http://" + addr + "/readyz")
		if err != nil {
			cuts++
			resp, err = c.Get("http://" + addr + "/readyz")
		}
		if err != nil {
			t.Fatalf("GET /readyz, twice: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/readyz = %s", resp.Status)
		}
		took = append(took, time.Since(began))
		time.Sleep(50 * time.Millisecond)
	}
	slices.Sort(took)
	t.Logf("/readyz among 129 hostile status clients: median %v, max %v, %d of 20 cut and asked again", took[len(took)/2], took[len(took)-1], cuts)
	if cuts > 2 {
		t.Errorf("%d of 20 probes were cut by the flood; want at most 2", cuts)
	}
	// The target is 100 ms; a held listener answers after the header
	// timeout (2 s) or the idle timeout (30 s), far above either bound.
	if median, worst := took[len(took)/2], took[len(took)-1]; median > 100*time.Millisecond || worst > time.Second {
		t.Errorf("/readyz answered in %v at the median and %v at worst; want under 100 ms and 1 s", median, worst)
	}
}

// holdIdle makes one request to the status listener and keeps the
// connection open and idle, making another once it is cut, until stop.
func holdIdle(addr string, stop <-chan struct{}) {
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Write([]byte("GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"))
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
		select {
		case <-stop:
			if c != nil {
				c.Close()
			}
			return
		case <-time.After(time.Second):
		}
	}
}

// slowloris sends a request's headers a byte every 100 ms, never ending
// them, and reconnects once cut, until stop.
func slowloris(addr string, stop <-chan struct{}) {
	const header = "GET /status HTTP/1.1\r\nX: "
	for {
		c, err := net.Dial("tcp", addr)
		for i := 0; err == nil; i++ {
			_, err = c.Write([]byte{header[i%len(header)]})
			select {
			case <-stop:
				c.Close()
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		if c != nil {
			c.Close()
		}
	}
}

// scrapeUnread asks for /metrics over and over, with a tiny receive
// buffer, and reads nothing, until stop.
func scrapeUnread(addr string, stop <-chan struct{}) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(1024)
	for {
		if _, err := c.Write([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			return
		}
		select {
		case <-stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestMetricsPassPromtool runs Prometheus's own checker over /metrics.
// .ci/run installs it; elsewhere the test is skipped without it, unless
// SERVERY_REQUIRE_PROMTOOL is set, as .ci/run sets it.
func TestMetricsPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("SERVERY_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool not found, and SERVERY_REQUIRE_PROMTOOL is set")
		}
		t.Skip("promtool not installed (Debian: apt-get install prometheus)")
	}
	skipWithoutWorkers(t)
	site := t.TempDir()
	writeFile(t, site, "index.html", "hello")
	s, addr := startWithStatus(t, "-dir", site, "-workers", "2")
	getN(t, s.addr, 3)
	killGroup(s.workerPIDs()[0])
	waitLog(t, s, `msg="worker respawned"`)
	_, body := statusGet(t, addr, "GET", "/metrics")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("promtool check metrics: %v\n%s\non:\n%s", err, out, body)
	}
}

func TestTallyKeepsWhatExitedWorkersCounted(t *testing.T) {
	tl := newTally()
	a, b := new(int), new(int)
	tl.begin(a, 0)
	tl.seen(a, workerStats{Accepted: 3, Served: 5})
	tl.seen(a, workerStats{Accepted: 2, Served: 4}) // an older report changes nothing
	tl.end(a, nil, exitSignal, "signal: killed")    // killed: what it last said
	tl.begin(b, 0)
	tl.seen(b, workerStats{Accepted: 1, Served: 1})
	slots, exits := tl.read()
	if got := slots[0]; got.Served != 6 || got.Accepted != 4 || got.LastExit != "signal: killed" {
		t.Errorf("slot 0 = %+v; want 6 served, 4 accepted, last exit signal: killed", got)
	}
	tl.end(b, &workerStats{Accepted: 2, Served: 7}, exitClean, "exit status 0")
	slots, exits = tl.read()
	if got := slots[0]; got.Served != 12 || got.Accepted != 5 {
		t.Errorf("slot 0 = %+v after its second worker exited; want 12 served, 5 accepted", got)
	}
	if exits[exitSignal] != 1 || exits[exitClean] != 1 || exits[exitError] != 0 {
		t.Errorf("exits = %v; want one by signal, one clean", exits)
	}
	tl.end(b, nil, exitClean, "twice") // a second end changes nothing
	if again, _ := tl.read(); again[0] != slots[0] {
		t.Errorf("a second end changed slot 0: %+v, then %+v", slots[0], again[0])
	}
}
