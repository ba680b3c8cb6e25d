//go:build !linux || mips || mipsle || mips64 || mips64le

package main

import "errors"

// awaitExit cannot wait without a thread here: the caller's cmd.Wait
// holds one per worker while it waits, and -workers's bound (maxWorkers)
// keeps their number within what a host allows.
func awaitExit(int) error { return errors.ErrUnsupported }
