//go:build unix

package main

import (
	"io/fs"
	"os"
	"syscall"
)

// inode returns the file serial number behind fi, or 0 if fi carries none.
// It lets the cache see a file replaced by rename as a new version even when
// the replacement has the same size and modification time.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

// openFlags opens a served path without blocking: O_NONBLOCK makes open(2)
// of a FIFO return at once (openServed then refuses it), and O_NOCTTY keeps
// a terminal device from becoming the worker's controlling terminal.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY
