//go:build !linux

package main

import "time"

// hog computes for d. Only Linux's test makes the worker's runtime run
// nothing else meanwhile (hang_linux_test.go).
func hog(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}
