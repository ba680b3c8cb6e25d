package main

import (
	"io/fs"
	"os"
)

// inode returns 0: a Windows FileInfo from Stat does not carry the file index,
// so there a file replaced by rename is recognised by its size and
// modification time alone.
func inode(fs.FileInfo) uint64 {
	return 0
}

// openFlags opens a served path. Windows has no FIFOs in a directory (its
// named pipes live under \\.\pipe\), so openServed's stat is enough there.
const openFlags = os.O_RDONLY
