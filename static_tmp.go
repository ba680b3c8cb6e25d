package main

import (
	"net/http"
	"os"
	"time"
)

type staticOptions struct {
	CacheBytes int64
	Revalidate time.Duration
}

type staticHandler struct {
	root *os.Root
	h    http.Handler
}

func newStaticHandler(dir string, opts staticOptions) (*staticHandler, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &staticHandler{root: root, h: http.FileServerFS(root.FS())}, nil
}
func (h *staticHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.h.ServeHTTP(w, r) }
func (h *staticHandler) Close() error                                     { return h.root.Close() }
