//go:build !linux

package main

// monotonicUsec has nothing to say where there is no systemd: the
// notification carries an empty field, which no one reads.
func monotonicUsec() string { return "" }
