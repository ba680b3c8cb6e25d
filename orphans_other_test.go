//go:build !linux

package main

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// adoptOrphans cannot: only Linux has PR_SET_CHILD_SUBREAPER.
func adoptOrphans(*testing.T) bool { return false }

// orphanExit is never called where adoptOrphans cannot adopt.
func orphanExit(int, time.Duration) (ws syscall.WaitStatus, err error) {
	return ws, errors.New("no subreaper here")
}
