//go:build unix

package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestNothingUnderTheRootThatIsNotAFileBlocksAnOpen: a FIFO, a socket or
// a device under -dir, named as a file, an index, a sidecar or the 404
// page, gets a 404 (or the file the sidecar belongs to) at once, with the
// cache on and off. A FIFO's open(2) waits for a writer: the answer must
// come within 10 s, or the client gives up and the test fails.
func TestNothingUnderTheRootThatIsNotAFileBlocksAnOpen(t *testing.T) {
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"app.js": "console.log('identity');\n", "d/.keep": ""})
			for _, name := range []string{"pipe", "pipe.html", "d/index.html", "404.html", "app.js.br"} {
				mkfifo(t, filepath.Join(dir, name))
			}
			ln, err := net.Listen("unix", filepath.Join(dir, "sock"))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			// A character device, /dev/null's numbers, where allowed.
			device := syscall.Mknod(filepath.Join(dir, "null"), syscall.S_IFCHR|0o666, 1<<8|3) == nil

			addr := serveOpts(t, dir, cfg.opts)
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			cases := []struct{ path, accept, body string }{
				{"/pipe", "", ""},
				{"/pipe.html", "", ""},
				{"/d/", "", ""},           // its index.html is a FIFO
				{"/missing.html", "", ""}, // the 404 page is a FIFO
				{"/sock", "", ""},
				{"/app.js", "br", "console.log('identity');\n"}, // its .br sidecar is a FIFO
			}
			if device {
				cases = append(cases, struct{ path, accept, body string }{"/null", "", ""})
			}
			// All at once, so a server that blocks fails in 10 s, not
			// 10 s a case.
			var wg sync.WaitGroup
			for _, tc := range cases {
				req, _ := http.NewRequest("GET", "http://"+addr+tc.path, nil)
				if tc.accept != "" {
					req.Header.Set("Accept-Encoding", tc.accept)
				}
				wg.Go(func() {
					began := time.Now()
					code, body, err := do(client, req)
					want := http.StatusNotFound
					if tc.body != "" {
						want = http.StatusOK
					}
					if err != nil || code != want || tc.body != "" && body != tc.body {
						t.Errorf("GET %s: %d %q, %v after %v; want %d at once", tc.path, code, body, err, time.Since(began).Round(time.Millisecond), want)
					}
				})
			}
			wg.Wait()
		})
	}
}

// serveOpts serves the static site in dir, with opts, on a loopback
// listener until the test ends.
func serveOpts(t *testing.T, dir string, opts staticOptions) string {
	t.Helper()
	h := newTestHandler(t, dir, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveHandler(t, ln, h, runtimeConfig{HeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, DrainTimeout: time.Second})
	return ln.Addr().String()
}

// do sends req through c and returns the status and body.
func do(c *http.Client, req *http.Request) (int, string, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// mkfifo makes a FIFO at p. When the test ends it opens it for writing
// once, which releases a handler still blocked opening it for reading (a
// server that failed the test), so the test ends rather than hangs.
func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Without a reader this fails with ENXIO, and nothing was blocked.
		if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		} else if !errors.Is(err, syscall.ENXIO) {
			t.Logf("releasing %s: %v", p, err)
		}
	})
}
