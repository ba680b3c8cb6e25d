//go:build !linux

package main

// processLimits names no limit where reading them is not this
// platform's way: the error itself says what was refused.
func processLimits() string { return "the host's limit on processes per user" }

// fileLimit names the parent's limit on open files.
func fileLimit() string { return "the limit on open files (ulimit -n)" }
