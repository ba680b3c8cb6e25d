package main

import (
	"os"
	"strconv"
)

// runPath is the path that runs the open executable f: Linux execs the
// file an open descriptor names, whatever has become of its path since,
// as fexecve does. The child resolves it between fork and exec, while it
// still holds the parent's descriptor.
func runPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }
