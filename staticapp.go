package main

// staticapp.go is the static site as one App: its flags, its check in the
// parent, and the handler each worker builds. The supervisor, the protocol
// and the drain know nothing of it.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
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
	fs.BoolVar(&sf.opts.Listing, "listing", false, "list the files of a directory that has no index.html (off: such a directory is 404)")
	fs.StringVar(&sf.opts.Fallback, "fallback", "", "for a single-page app: a file in -dir, such as /index.html, served with status 200 for a missing GET or HEAD path whose last segment has no extension (missing assets stay 404)")
	fs.BoolVar(&sf.opts.Immutable, "immutable-assets", false, "send fingerprinted assets (name.HASH.ext, name-HASH.ext; HASH 8+ letters, digits and underscores, with at least one letter and one digit) with Cache-Control: public, max-age=31536000, immutable, and HTML with Cache-Control: no-cache (off: no Cache-Control)")
	return App{Check: sf.check, Start: sf.start, Stop: stopStatic, Health: staticHealth}
}

// check validates the static flags in the parent.
func (sf *staticFlags) check() error {
	if sf.opts.Revalidate < 0 {
		return bad("cache-revalidate", "must not be negative, got %v", sf.opts.Revalidate)
	}
	if err := checkDir(sf.dir); err != nil {
		return err
	}
	return checkFallback(sf.dir, sf.opts.Fallback)
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

// staticHealth is the static site's health check: its root directory
// still answers a stat. A hung NFS or FUSE mount blocks the stat, and
// every request with it, so the worker stops answering the parent's probe
// and is found hung instead of queueing requests for ever.
func staticHealth(_ context.Context, h http.Handler) error {
	if _, err := h.(*staticHandler).root.Stat("."); err != nil {
		return fmt.Errorf("stat -dir: %w", err)
	}
	return nil
}

// checkDir requires a readable directory. It stats before it opens, so a
// FIFO named as -dir is refused rather than blocking the open.
func checkDir(dir string) error {
	if info, err := os.Stat(dir); err == nil && !info.IsDir() {
		return bad("dir", "%s is not a directory", linkedName(dir))
	}
	f, err := os.Open(dir)
	if err != nil {
		return dirProblem(dir, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return dirProblem(dir, err)
	}
	if !info.IsDir() {
		return bad("dir", "%s is not a directory", linkedName(dir))
	}
	if _, err := f.Readdirnames(1); err != nil && err != io.EOF {
		return bad("dir", "cannot read %s: %v", linkedName(dir), err)
	}
	return nil
}

// dirProblem returns the -dir error for err, a failure to open dir, naming
// where dir leads when it is a symlink.
func dirProblem(dir string, err error) error {
	if name := linkedName(dir); name != dir {
		return bad("dir", "%s: %v", name, err)
	}
	return bad("dir", "%v", err)
}

// linkedName returns dir as an error should name it: with where it leads
// when it is a symlink, "/srv/site/current (-> /srv/site/releases/X)",
// since the problem is usually in the release the link points at, and the
// link's own name does not say which one that is. A missing target is
// named as the link names it, taken from the link's directory when
// relative. Symlinks above dir (/var on macOS) are left unsaid: they are
// not what a deploy switches.
func linkedName(dir string) string {
	if fi, err := os.Lstat(dir); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return dir
	}
	target, err := filepath.EvalSymlinks(dir)
	if err != nil {
		if target, err = os.Readlink(dir); err != nil {
			return dir
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(dir), target)
		}
	}
	if abs, err := filepath.Abs(target); err == nil {
		target = abs
	}
	return dir + " (-> " + target + ")"
}

// checkFallback requires -fallback, when set, to name a regular file in
// dir that the site would serve: not above the root, not a dotfile, and
// not through a symlink that leaves it (os.Root refuses that).
func checkFallback(dir, p string) error {
	if p == "" {
		return nil
	}
	if strings.ContainsAny(p, "\\\x00") || slices.Contains(strings.Split(p, "/"), "..") {
		return bad("fallback", "%s is outside -dir", p)
	}
	clean := path.Clean("/" + p)
	if hiddenPath(clean) {
		return bad("fallback", "%s is a dotfile, which is never served", p)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return dirProblem(dir, err)
	}
	defer root.Close()
	return fallbackIn(root, dir, clean[1:])
}

// fallbackIn requires name, the cleaned -fallback without its leading
// slash, to be a regular file in root, the -dir as opened. The parent
// checks it at startup, and each worker again in the root it serves, so a
// reload to a release without it fails instead of turning every route of
// a single-page app into a 404.
func fallbackIn(root *os.Root, dir, name string) error {
	fi, err := root.Stat(name)
	switch {
	case err != nil:
		return bad("fallback", "/%s in -dir %s: %v", name, linkedName(dir), err)
	case !fi.Mode().IsRegular():
		return bad("fallback", "/%s in -dir %s is not a regular file", name, linkedName(dir))
	}
	return nil
}
