package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReloadToAReleaseWithoutTheFallbackFails(t *testing.T) {
	for _, workers := range []string{"1", "2"} {
		t.Run("workers="+workers, func(t *testing.T) {
			if workers != "1" {
				skipWithoutWorkers(t)
			}
			current := twoReleases(t) // r1 and r2 each have index.html
			if err := os.Remove(filepath.Join(filepath.Dir(current), "r2", "index.html")); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(filepath.Dir(current), "r2"), "other.html", "two")
			s := startServery(t, "-dir", current, "-workers", workers, "-fallback", "/index.html")
			pointAt(t, current, "r2")
			s.signal(syscall.SIGHUP)
			waitLog(t, s, `msg="reload failed, still serving" generation=2 serving=1 err=.*-fallback: /index.html`)
			// The release it started with still answers the app's routes.
			if code, body, err := get(s.addr, "/some/route"); err != nil || code != 200 || body != "one" {
				t.Errorf("GET /some/route = %d %q %v; want 200 \"one\" from the release still serving", code, body, err)
			}
			s.signal(syscall.SIGTERM)
			if code := s.wait(10 * time.Second); code != exitOK {
				t.Errorf("exit status %d; want 0", code)
			}
		})
	}
}

func TestDirErrorsNameTheSymlinkAndItsTarget(t *testing.T) {
	// Resolved, so the file's target is named as EvalSymlinks names it
	// even where the temporary directory is itself below a symlink.
	site, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, site, map[string]string{"releases/file": "not a directory"})
	for _, tc := range []struct{ link, target, want string }{
		// A release removed under the link: the target the link names.
		{"current", "releases/X", filepath.Join(site, "releases", "X")},
		{"absolute", filepath.Join(site, "releases", "Y"), filepath.Join(site, "releases", "Y")},
		{"to-a-file", "releases/file", filepath.Join(site, "releases", "file")},
	} {
		link := filepath.Join(site, tc.link)
		if err := os.Symlink(tc.target, link); err != nil {
			t.Fatal(err)
		}
		want := link + " (-> " + tc.want + ")"
		if err := checkDir(link); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkDir(%s -> %s) = %v; want it to name %s", tc.link, tc.target, err, want)
		}
		if err := checkFallback(link, "/index.html"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkFallback(%s -> %s) = %v; want it to name %s", tc.link, tc.target, err, want)
		}
		// The worker's own start, as after a reload to a broken release.
		if h, err := newStaticHandler(link, staticOptions{}); err == nil || !strings.Contains(err.Error(), want) {
			if h != nil {
				h.Close()
			}
			t.Errorf("newStaticHandler(%s -> %s) = %v; want it to name %s", tc.link, tc.target, err, want)
		}
	}
	// A plain directory is named as it is.
	missing := filepath.Join(site, "missing")
	if err := checkDir(missing); err == nil || strings.Contains(err.Error(), "->") {
		t.Errorf("checkDir(%s) = %v; want an error without a link", missing, err)
	}
}
