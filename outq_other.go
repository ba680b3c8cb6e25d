//go:build !linux

package main

import "net"

// unsent cannot tell here: a drain counts an idle connection's grace
// from when its last answer went into the kernel's send buffer, which
// for a large answer to a slow reader is before the client has it.
func unsent(net.Conn) int { return 0 }
