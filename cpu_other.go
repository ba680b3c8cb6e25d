//go:build !linux

package main

import "time"

// processCPU cannot read another process's CPU time here: the probe
// decides on a worker's silence alone (hang.go).
func processCPU(pid int) (time.Duration, bool) { return 0, false }
