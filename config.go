package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

// config is everything the command line says.
type config struct {
	Addr           string
	AddrSet        bool // -addr was given, not defaulted
	Workers        int
	StartupTimeout time.Duration
	ForceTimeout   time.Duration
	TLSCert        string
	TLSKey         string
	TLSSelfSigned  bool
	Runtime        runtimeConfig
	Args           []string    // the command line, which every worker parses again
	TicketKeys     *ticketKeys // with TLS: the keyring shared by every worker
	Version        bool        // -version: print the build and exit
	// What a lost worker means, and when a worker is recycled (heal.go).
	MaxRestarts   int
	RestartWindow time.Duration
	MaxRequests   int64
	MaxWorkerAge  time.Duration
	// A worker silent for WorkerTimeout is hung, and one whose memory
	// exceeds MaxWorkerMemory bytes is recycled (memory.go); 0: never.
	WorkerTimeout   time.Duration
	MaxWorkerMemory int64
	healSet         []string // those of these flags the command line gave
	// The status listener, off when empty (status.go), and how long a
	// stop first serves on while it says not ready.
	StatusAddr    string
	ShutdownDelay time.Duration
	LogFormat     string // text or json, for the parent and every worker (logging.go)
	LogLevel      string // info, or debug: the parent logs every protocol line too (logging.go)
}

// usageError is a configuration problem, named by its flag.
type usageError struct {
	flag    string
	problem string
}

func (e *usageError) Error() string { return "-" + e.flag + ": " + e.problem }

func bad(name, format string, args ...any) error {
	return &usageError{flag: name, problem: fmt.Sprintf(format, args...)}
}

// parseConfig parses and validates args, whose flags are servery's own and
// those defined on appFlags, then runs the App's check. Help goes to out
// and returns flag.ErrHelp; every other problem is one error naming the
// flag.
func parseConfig(args []string, out io.Writer, appFlags *flag.FlagSet, check func() error) (*config, error) {
	cfg, err := parseFlags(args, out, appFlags)
	if err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// parseFlags parses args into a config and into appFlags' variables,
// without validating them. Workers parse their command line with it, so
// the App's flags hold the same values in every process.
func parseFlags(args []string, out io.Writer, appFlags *flag.FlagSet) (*config, error) {
	cfg := &config{Args: args}
	fs, err := newFlagSet(cfg, appFlags)
	if err != nil {
		return nil, err
	}
	fs.SetOutput(io.Discard) // one line of our own instead of the usage dump
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(out)
			fs.Usage()
		}
		return nil, err
	}
	fs.Visit(func(f *flag.Flag) {
		cfg.AddrSet = cfg.AddrSet || f.Name == "addr"
		switch f.Name {
		case "max-restarts", "restart-window", "max-requests", "max-worker-age", "worker-timeout", "max-worker-memory":
			cfg.healSet = append(cfg.healSet, f.Name)
		}
	})
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags only; see -help)", fs.Arg(0))
	}
	if cfg.Version {
		bi, _ := debug.ReadBuildInfo()
		exe, _ := os.Executable()
		fmt.Fprintln(out, versionLine(programName(), bi, exe))
		return nil, errVersionShown
	}
	return cfg, nil
}

// errVersionShown is parseFlags' answer to -version, once it has printed
// the version: like -help, a request that ends the program with exit 0.
var errVersionShown = errors.New("version shown")

// versionLine describes the build bi of the program called name: its
// module path and version, the VCS revision and time it was built from
// (and whether the tree had changes), and the Go release. A build
// without a revision says why it may have none (noStamp), exe being the
// running executable's path.
func versionLine(name string, bi *debug.BuildInfo, exe string) string {
	if bi == nil {
		return name + ": no build information (built without module support)"
	}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	rev := "revision unknown (no VCS stamp: " + noStamp(exe) + ")"
	if r := vcs["vcs.revision"]; r != "" {
		rev = "revision " + r
		if t := vcs["vcs.time"]; t != "" {
			rev += " of " + t
		}
		if vcs["vcs.modified"] == "true" {
			rev += " with uncommitted changes"
		}
	}
	return fmt.Sprintf("%s %s %s, %s, %s", name, bi.Main.Path, bi.Main.Version, rev, bi.GoVersion)
}

// noStamp says why the executable at exe carries no VCS revision. The
// build information cannot tell: go run and -buildvcs=false record the
// same settings. But go run's binary lives in the go command's temporary
// go-build directory; any other was built with -buildvcs=false, most
// often from a GOFLAGS that go env -w keeps in the go command's own
// config (so not in the environment), or outside a repository.
func noStamp(exe string) string {
	if strings.Contains(filepath.ToSlash(exe), "/go-build") {
		return "go run"
	}
	return "built with -buildvcs=false, perhaps from GOFLAGS (go env GOFLAGS), or outside a repository"
}

// newFlagSet binds servery's flags to cfg, with the defaults, and adds
// every flag defined on appFlags, so one command line carries both. A
// program's flag that reuses one of servery's names is refused rather
// than silently shadowed.
func newFlagSet(cfg *config, appFlags *flag.FlagSet) (*flag.FlagSet, error) {
	fs := flag.NewFlagSet(programName(), flag.ContinueOnError)
	rt := &cfg.Runtime
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:8000", "listen `address`: host:port, [::1]:port or :port")
	fs.IntVar(&cfg.Workers, "workers", 1, fmt.Sprintf("worker processes; 1 serves in this process (direct mode); at most %d: each is a whole process, and the host's process and file limits (ulimit -u, -n) bite before more would serve faster", maxWorkers))
	fs.DurationVar(&rt.DrainTimeout, "drain-timeout", 10*time.Second, "stop: time in-flight requests get before survivors are terminated")
	fs.DurationVar(&cfg.ForceTimeout, "force-timeout", 15*time.Second, "stop: deadline, from the start of the stop, after which survivors are killed; must exceed -drain-timeout")
	fs.DurationVar(&cfg.StartupTimeout, "startup-timeout", 30*time.Second, "start: the whole startup barrier, the app's start step in every worker included, must complete within this")
	fs.IntVar(&rt.MaxConns, "max-conns", 1024, "open connections PER WORKER (N workers: up to N times this); at the cap a new client gets the slot of the connection idle longest; 0 = unlimited")
	fs.DurationVar(&rt.HeaderTimeout, "header-timeout", 10*time.Second, "time a client gets to send its request headers (per connection)")
	fs.DurationVar(&rt.IdleTimeout, "idle-timeout", 60*time.Second, "how long an idle keep-alive connection is kept open (per connection)")
	fs.DurationVar(&rt.WriteTimeout, "write-timeout", 60*time.Second, "a response that makes no write progress for this long is cut off, so a client that stops reading frees its connection slot (per connection)")
	fs.DurationVar(&rt.BodyTimeout, "body-timeout", 60*time.Second, "a request body that makes no progress for this long is cut off, so a client that stalls mid-body frees its connection slot (nginx's client_body_timeout; per connection)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "serve HTTPS with this certificate `file` (PEM; needs -tls-key)")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "serve HTTPS with this private key `file` (PEM; needs -tls-cert)")
	fs.BoolVar(&cfg.TLSSelfSigned, "tls-self-signed", false, "serve HTTPS with one self-signed identity generated at start, shared by every worker")
	fs.StringVar(&rt.AccessLog, "access-log", "", "log requests: - for stderr, or a file `path`, which the parent writes for every worker and SIGUSR1 reopens (logrotate); combined format, or JSON with -log-format json")
	fs.Func("access-log-skip", "leave requests for these `paths` out of the access log, comma-separated (a load balancer's health check: /livez,/healthz)", func(v string) error {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); !strings.HasPrefix(p, "/") {
				return fmt.Errorf("%q: a path begins with /", p)
			}
			rt.AccessLogSkip = append(rt.AccessLogSkip, p)
		}
		return nil
	})
	fs.IntVar(&cfg.MaxRestarts, "max-restarts", defaultPolicy.MaxRestarts, "a lost worker is replaced in its slot; past this many losses within -restart-window servery gives up (exit 1). 0: the first loss ends the service. Not in direct mode (-workers 1), which has no worker to replace: its service manager restarts it")
	fs.DurationVar(&cfg.RestartWindow, "restart-window", defaultPolicy.Window, "the window -max-restarts counts losses in")
	fs.Int64Var(&cfg.MaxRequests, "max-requests", 0, "recycle a worker after it answered this many requests, plus up to 10% jitter drawn per worker: its replacement starts first (-workers 2 or more); 0: never")
	fs.StringVar(&cfg.LogFormat, "log-format", "text", "log lines as text (key=value) or json (one object a line, the same keys), from the parent and every worker")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "info, or debug: the parent also logs every protocol line it sends to a worker and reads from one (generation, worker, pid; TLS keys left out), to follow a startup, a reload or a respawn message by message; an App's debug lines appear too")
	fs.DurationVar(&cfg.WorkerTimeout, "worker-timeout", defaultWorkerTimeout, fmt.Sprintf("a worker whose requests in flight make no progress (none answered, nothing written) for this long, or that neither answers the parent's probe (the app's health check passing) nor runs, is hung: its goroutines' stacks go to the log (SIGQUIT), it is killed and respawned (-workers 2 or more); a request running this long is named in the log; at least %v, or 0: never", minWorkerTimeout))
	fs.Var((*byteSize)(&cfg.MaxWorkerMemory), "max-worker-memory", fmt.Sprintf("recycle a worker whose resident memory exceeds this `size` (its replacement starts first), and give each worker a Go memory limit a tenth below it unless GOMEMLIMIT is set (-workers 2 or more); at least %s, or 0: never", sizeString(minWorkerMemory)))
	fs.DurationVar(&cfg.MaxWorkerAge, "max-worker-age", 0, "recycle a worker after it served this long, plus up to 10% jitter drawn per worker (-workers 2 or more); 0: never")
	fs.StringVar(&cfg.StatusAddr, "status-addr", "", "serve /livez, /readyz, /status (JSON) and /metrics (Prometheus) on this `address`, from the parent process; empty: off")
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay", 0, "stop: for this long after the first SIGTERM, SIGINT or program stop, /readyz answers 503 and STOPPING=1 is sent while every worker serves on; then the usual stop. It adds to the stop's total: up to this plus -force-timeout. A second signal skips it; a reload never applies it")
	fs.BoolVar(&cfg.Version, "version", false, "print the module, its version, the VCS revision it was built from and the Go release, and exit")
	var clash error
	appFlags.VisitAll(func(f *flag.Flag) {
		if fs.Lookup(f.Name) != nil {
			clash = errors.Join(clash, fmt.Errorf("the program defines flag -%s, which is servery's own", f.Name))
			return
		}
		fs.Var(f.Value, f.Name, f.Usage)
	})
	if clash != nil {
		return nil, clash
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\nServes over HTTP(S) from one process or from -workers processes sharing one listener.\nEvery limit and cache is per worker process: with N workers, totals are N times the value.\n\n", filepath.Base(os.Args[0]))
		fs.PrintDefaults()
	}
	return fs, nil
}

// validate checks the whole configuration before anything is bound or
// started, and loads the TLS pair so a bad one is a usage error.
func (cfg *config) validate() error {
	rt := &cfg.Runtime
	checks := []func() error{
		cfg.checkWorkers,
		cfg.checkLogFormat,
		cfg.checkLogLevel,
		func() error { return checkAddr(cfg.Addr) },
		cfg.checkDurations,
		func() error {
			if rt.MaxConns < 0 {
				return bad("max-conns", "must not be negative, got %d", rt.MaxConns)
			}
			return nil
		},
		cfg.checkTLS,
		cfg.checkAccessLog,
		cfg.checkHeal,
		cfg.checkStatusAddr,
		func() error {
			if cfg.ShutdownDelay < 0 {
				return bad("shutdown-delay", "must not be negative, got %v", cfg.ShutdownDelay)
			}
			return nil
		},
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// maxWorkers bounds -workers. Each worker is a whole process with its
// own runtime, caches and threads, and the parent holds four descriptors
// for each; far below this a host's cores are shared too thinly to serve
// faster, and past it its limits on processes and open files (ulimit -u,
// -n, a container's pids.max) are what a start meets.
const maxWorkers = 1024

// checkLogLevel requires one of logLevels.
func (cfg *config) checkLogLevel() error {
	if !slices.Contains(logLevels, cfg.LogLevel) {
		return bad("log-level", "%q: want info or debug", cfg.LogLevel)
	}
	return nil
}

// checkLogFormat requires one of logFormats.
func (cfg *config) checkLogFormat() error {
	if !slices.Contains(logFormats, cfg.LogFormat) {
		return bad("log-format", "%q: want text or json", cfg.LogFormat)
	}
	return nil
}

func (cfg *config) checkWorkers() error {
	switch {
	case cfg.Workers < 1:
		return bad("workers", "must be at least 1, got %d", cfg.Workers)
	case cfg.Workers > maxWorkers:
		return bad("workers", "at most %d, got %d", maxWorkers, cfg.Workers)
	case cfg.Workers > 1 && !multiWorker:
		return bad("workers", "more than 1 needs Unix: this platform cannot pass a listener to a child process")
	}
	return nil
}

// checkAddr requires host:port with a numeric port and a host that is
// empty, an IP address or a name.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return bad("addr", "%q: %v", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return bad("addr", "%q: port must be a number from 0 to 65535", addr)
	}
	if strings.ContainsAny(host, " /%") {
		return bad("addr", "%q: invalid host", addr)
	}
	return nil
}

func (cfg *config) checkDurations() error {
	rt := &cfg.Runtime
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"drain-timeout", rt.DrainTimeout}, {"force-timeout", cfg.ForceTimeout},
	} {
		if d.v < 0 {
			return bad(d.name, "must not be negative, got %v", d.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"startup-timeout", cfg.StartupTimeout}, {"header-timeout", rt.HeaderTimeout}, {"idle-timeout", rt.IdleTimeout},
		{"write-timeout", rt.WriteTimeout}, {"body-timeout", rt.BodyTimeout},
	} {
		if d.v <= 0 {
			return bad(d.name, "must be positive, got %v", d.v)
		}
	}
	if cfg.ForceTimeout <= rt.DrainTimeout {
		return bad("force-timeout", "%v must exceed -drain-timeout %v", cfg.ForceTimeout, rt.DrainTimeout)
	}
	return nil
}

// checkTLS requires both files or neither, not with -tls-self-signed, and
// a pair that loads and matches.
func (cfg *config) checkTLS() error {
	switch {
	case (cfg.TLSCert == "") != (cfg.TLSKey == ""):
		if cfg.TLSCert == "" {
			return bad("tls-cert", "missing: -tls-key needs -tls-cert")
		}
		return bad("tls-key", "missing: -tls-cert needs -tls-key")
	case cfg.TLSSelfSigned && cfg.TLSCert != "":
		return bad("tls-self-signed", "cannot be combined with -tls-cert/-tls-key")
	case cfg.TLSCert == "":
		return nil
	}
	id, err := loadTLSIdentity(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return bad("tls-cert", "%v", err)
	}
	cfg.Runtime.TLS = id
	return nil
}

func (cfg *config) checkAccessLog() error {
	if len(cfg.Runtime.AccessLogSkip) > 0 && cfg.Runtime.AccessLog == "" {
		return bad("access-log-skip", "needs -access-log")
	}
	cfg.Runtime.AccessLogJSON = cfg.LogFormat == "json"
	return nil
}

// checkHeal checks the flags of healing and recycling, which only worker
// processes have: direct mode's one process is the service itself.
func (cfg *config) checkHeal() error {
	switch {
	case cfg.MaxRestarts < 0:
		return bad("max-restarts", "must not be negative, got %d", cfg.MaxRestarts)
	case cfg.RestartWindow <= 0:
		return bad("restart-window", "must be positive, got %v", cfg.RestartWindow)
	case cfg.MaxRequests < 0:
		return bad("max-requests", "must not be negative, got %d", cfg.MaxRequests)
	case cfg.MaxWorkerAge < 0:
		return bad("max-worker-age", "must not be negative, got %v", cfg.MaxWorkerAge)
	case cfg.WorkerTimeout < 0:
		return bad("worker-timeout", "must not be negative, got %v", cfg.WorkerTimeout)
	case cfg.WorkerTimeout > 0 && cfg.WorkerTimeout < minWorkerTimeout:
		return bad("worker-timeout", "at least %v, or 0 for never, got %v: a healthy worker on a busy host can take longer than that to answer", minWorkerTimeout, cfg.WorkerTimeout)
	case cfg.MaxWorkerMemory < 0:
		return bad("max-worker-memory", "must not be negative, got %d", cfg.MaxWorkerMemory)
	case cfg.MaxWorkerMemory > 0 && cfg.MaxWorkerMemory < minWorkerMemory:
		return bad("max-worker-memory", "at least %s, or 0 for never, got %s: a fresh worker would be over it and recycled again and again", sizeString(minWorkerMemory), sizeString(cfg.MaxWorkerMemory))
	case cfg.Workers == 1 && len(cfg.healSet) > 0:
		return bad(cfg.healSet[0], "direct mode (-workers 1) has no worker to replace or recycle: its service manager restarts the process; use -workers 2 or more")
	}
	return nil
}

// The floors of -worker-timeout and -max-worker-memory, unless 0 (off):
// the least a real worker can meet.
//
// A healthy worker answers a probe within milliseconds, but a busy host
// delays it: the scheduler behind CPU-bound requests, a garbage
// collection, page faults on a swapping host, the race detector. Under
// -race a 400 ms timeout killed a healthy worker under load that answered
// in 410 ms, and 2 ms killed idle ones; a second is the least that keeps
// such delays from reading as a hang, and still finds a hung worker
// within seconds.
//
// A fresh static worker is about 9 MiB resident (VmRSS of each worker of
// -workers 2 at rest, and after 300 requests), 25 MiB built with -race and
// serving TLS. Below its own size a worker is over its bound from its
// start and recycled without end (4 MiB: 168 recycles in 10 s). 32 MiB is
// the least that leaves a fresh worker room to serve: its connections'
// buffers and goroutines, up to -max-conns of them.
const (
	minWorkerTimeout = time.Second
	minWorkerMemory  = 32 << 20
)

// warnCache warns, once, at start, when the App's cache budget alone,
// -cache-bytes (the static site's flag, or a program's own of servery's
// size type), is at or above -max-worker-memory: a worker whose cache
// fills would be over its bound, recycled, and its replacement would
// start again with an empty cache.
func (cfg *config) warnCache(appFlags *flag.FlagSet, log *slog.Logger) {
	f := appFlags.Lookup("cache-bytes")
	if f == nil || cfg.MaxWorkerMemory == 0 {
		return
	}
	cache, ok := f.Value.(*byteSize)
	if ok && int64(*cache) >= cfg.MaxWorkerMemory {
		log.Warn("cache budget at or above -max-worker-memory", "cache_bytes", cache.String(), "max_worker_memory", sizeString(cfg.MaxWorkerMemory))
	}
}

// policy returns the policy for a lost worker that the flags ask for.
func (cfg *config) policy() healPolicy {
	p := defaultPolicy
	p.MaxRestarts, p.Window = cfg.MaxRestarts, cfg.RestartWindow
	return p
}

// makeIdentity generates the self-signed identity when asked, once, in the
// parent, so every worker presents the same certificate, and the session
// ticket keyring, so every worker resumes the same sessions.
func (cfg *config) makeIdentity(log *slog.Logger) error {
	if cfg.TLSSelfSigned {
		host, _, _ := net.SplitHostPort(cfg.Addr)
		id, err := selfSignedIdentity(host, time.Now())
		if err != nil {
			return err
		}
		cfg.Runtime.TLS = id
	}
	if cfg.Runtime.TLS == nil {
		return nil
	}
	fp, err := cfg.Runtime.TLS.fingerprint()
	if err != nil {
		return err
	}
	if cfg.TicketKeys, err = newTicketKeys(); err != nil {
		return err
	}
	cfg.Runtime.TicketKeys = cfg.TicketKeys.current()
	log.Info("tls identity", "self_signed", cfg.TLSSelfSigned, "sha256", fp)
	return nil
}

// reloadTLS returns the TLS identity a reload serves: the -tls-cert and
// -tls-key files read again (a renewed certificate), or the self-signed
// identity made at start, kept so a pinned fingerprint stays valid.
func (cfg *config) reloadTLS() (*tlsIdentity, error) {
	if cfg.TLSCert == "" {
		return cfg.Runtime.TLS, nil
	}
	id, err := loadTLSIdentity(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("-tls-cert %s: %w", cfg.TLSCert, err)
	}
	return id, nil
}

// supervisor returns the supervisor's part of the configuration.
func (cfg *config) supervisor() supervisorConfig {
	return supervisorConfig{
		Workers:        cfg.Workers,
		StartupTimeout: cfg.StartupTimeout,
		DrainTimeout:   cfg.Runtime.DrainTimeout,
		ForceTimeout:   cfg.ForceTimeout,
		Runtime:        cfg.Runtime,
		Args:           cfg.Args,
		MaxRequests:    cfg.MaxRequests,
		MaxAge:         cfg.MaxWorkerAge,
		WorkerTimeout:  cfg.WorkerTimeout,
		MaxMemory:      cfg.MaxWorkerMemory,
	}
}

// url is where the server answers, for the ready log line.
func (cfg *config) url(ln net.Listener) string {
	scheme := "http"
	if cfg.Runtime.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + ln.Addr().String() + "/"
}

// byteSize is a flag.Value for sizes such as 1048576, 512KiB, 64MiB, 1GB:
// a whole number of bytes, or one with a unit of sizeUnits.
type byteSize int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
}

// sizeForms says what byteSize accepts, for its error and README's flag
// tables: every unit of sizeUnits.
const sizeForms = "a whole number of bytes, or one with B, KiB, MiB, GiB (1024s; K, M, G alike) or KB, MB, GB (1000s)"

// sizeString prints n as a byteSize does, with "bytes" when it has no
// unit, for messages.
func sizeString(n int64) string {
	s := (*byteSize)(&n).String()
	if _, err := strconv.ParseInt(s, 10, 64); err == nil && n != 0 {
		s += " bytes"
	}
	return s
}

// String prints the size in the largest binary unit that divides it.
func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func (b *byteSize) Set(s string) error {
	num, mult := s, int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a size: %s", s, sizeForms)
	}
	if n > 0 && mult > (1<<62)/n {
		return fmt.Errorf("%q is too large", s)
	}
	*b = byteSize(n * mult)
	return nil
}
