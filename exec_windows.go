package main

import "errors"

// execImage cannot replace a running process on Windows, which has no
// exec, and no workers to hand over.
func execImage(string, *handover, handoverFiles) error { return errors.ErrUnsupported }

// setCloseOnExec does nothing: no descriptor is handed over on Windows.
func setCloseOnExec(int, bool) error { return nil }
