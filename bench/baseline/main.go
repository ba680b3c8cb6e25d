//go:build linux

// baseline is the benchmarks' set of plain net/http servers, run by go run ./bench:
//
//	baseline fileserver ADDR DIR: a plain net/http FileServer.
//	baseline bare ADDR FILE: the net/http ceiling: the same http.Server with no
//	  timeouts, whose handler only writes FILE's bytes (read once) with the
//	  headers servery sends for it, precomputed and set by direct map assignment.
//	baseline baretls ADDR CERT KEY FILE...: the same handler for every FILE (at
//	  /BASENAME) over TLS with servery's tls.Config, served as servery serves it
//	  (tls.NewListener, Serve): the net/http HTTPS and HTTP/2 ceiling.
//
// GOMAXPROCS comes from the environment; SIGTERM or SIGINT shuts it down
// gracefully, so its stop time compares with servery's drain.
package main

import (
	"context"
	"crypto/tls"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
)

func main() {
	usage := "usage: baseline fileserver ADDR DIR | baseline bare ADDR FILE | baseline baretls ADDR CERT KEY FILE..."
	if len(os.Args) < 4 {
		log.Fatal(usage)
	}
	var handler http.Handler
	var tlsConfig *tls.Config
	switch os.Args[1] {
	case "fileserver":
		handler = http.FileServer(http.Dir(os.Args[3]))
	case "bare":
		handler = bare(os.Args[3])
	case "baretls":
		if len(os.Args) < 6 {
			log.Fatal(usage)
		}
		cert, err := tls.LoadX509KeyPair(os.Args[3], os.Args[4])
		if err != nil {
			log.Fatal(err)
		}
		tlsConfig = &tls.Config{
			Certificates: []tls.Certificate{cert},
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"h2", "http/1.1"},
		}
		handler = bare(os.Args[5:]...)
	default:
		log.Fatalf("unknown baseline %q", os.Args[1])
	}
	srv := &http.Server{Addr: os.Args[2], Handler: handler, TLSConfig: tlsConfig}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	if tlsConfig == nil {
		go func() { errc <- srv.ListenAndServe() }()
	} else {
		ln, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			log.Fatal(err)
		}
		go func() { errc <- srv.Serve(tls.NewListener(ln, tlsConfig)) }()
	}
	select {
	case err := <-errc:
		log.Fatal(err)
	case <-ctx.Done():
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// bare answers GET /BASENAME of each file with its bytes and servery's
// headers, all precomputed.
func bare(files ...string) http.Handler {
	type reply struct {
		body                []byte
		contentLength, etag []string
	}
	replies := map[string]*reply{}
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			log.Fatal(err)
		}
		name := filepath.Base(file)
		replies["/"+name] = &reply{
			body:          body,
			contentLength: []string{strconv.Itoa(len(body))},
			etag:          []string{`"servery-bench-` + name + `"`},
		}
	}
	var (
		acceptRanges = []string{"bytes"}
		contentType  = []string{"text/html; charset=utf-8"}
		lastModified = []string{"Mon, 01 Jan 2024 00:00:00 GMT"}
		vary         = []string{"Accept-Encoding"}
		nosniff      = []string{"nosniff"}
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rp := replies[r.URL.Path]
		if rp == nil {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h["Accept-Ranges"] = acceptRanges
		h["Content-Length"] = rp.contentLength
		h["Content-Type"] = contentType
		h["Etag"] = rp.etag
		h["Last-Modified"] = lastModified
		h["Vary"] = vary
		h["X-Content-Type-Options"] = nosniff
		w.WriteHeader(http.StatusOK)
		w.Write(rp.body)
	})
}
