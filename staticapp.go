package main

// staticapp.go is the static site as one App: its flags, its check in the
// parent, and the handler each worker builds. The supervisor, the protocol
// and the drain know nothing of it.

import (
	"context"
	"flag"
	"io"
	"net/http"
	"os"
	"time"
)

// staticFlags are the static site's command-line settings.
type staticFlags struct {
	dir  string
	opts staticOptions
}

// newStaticApp returns the static site as an App and defines its flags
// on fs. Every worker parses the same command line, so each one reads the
// flags' values itself.
func newStaticApp(fs *flag.FlagSet) App {
	sf := &staticFlags{opts: staticOptions{CacheBytes: 64 << 20}}
	fs.StringVar(&sf.dir, "dir", ".", "`directory` to serve, read-only")
	fs.Var((*byteSize)(&sf.opts.CacheBytes), "cache-bytes", "in-memory file cache budget PER WORKER (N workers: up to N times this): a `size` in bytes or with a unit such as 512KiB, 64MiB, 1GB; 0 disables it")
	fs.DurationVar(&sf.opts.Revalidate, "cache-revalidate", time.Second, "how old a cached entry may get before a stat checks it again, so an edited file is served fresh within this window; 0 = every request (per worker cache)")
	return App{Check: sf.check, Start: sf.start, Stop: stopStatic}
}

// check validates the static flags in the parent.
func (sf *staticFlags) check() error {
	if sf.opts.Revalidate < 0 {
		return bad("cache-revalidate", "must not be negative, got %v", sf.opts.Revalidate)
	}
	return checkDir(sf.dir)
}

// start opens the directory as this worker's root. The root is opened
// afresh by every worker, so a -dir that is a symlink is resolved when the
// worker starts, and then held: a worker never mixes two releases.
func (sf *staticFlags) start(context.Context, Worker) (http.Handler, error) {
	return newStaticHandler(sf.dir, sf.opts)
}

// stopStatic closes the root that start opened.
func stopStatic(_ context.Context, h http.Handler) error {
	return h.(*staticHandler).Close()
}

// checkDir requires a readable directory.
func checkDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return bad("dir", "%v", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return bad("dir", "%v", err)
	}
	if !info.IsDir() {
		return bad("dir", "%s is not a directory", dir)
	}
	if _, err := f.Readdirnames(1); err != nil && err != io.EOF {
		return bad("dir", "cannot read %s: %v", dir, err)
	}
	return nil
}
