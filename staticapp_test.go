package main

import (
	"os"
	"path/filepath"
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
