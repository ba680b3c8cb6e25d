//go:build !linux

package main

// nameProcess does nothing: elsewhere a worker runs its executable by its
// path (runPath), and the kernel names it after that file already.
func nameProcess(string) {}
