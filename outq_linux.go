package main

import (
	"net"
	"syscall"
	"unsafe"
)

const siocOUTQ = 0x5411 // SIOCOUTQ (TIOCOUTQ): bytes in a socket's send queue, sent or not, not yet acknowledged

// unsent returns how many bytes of what was written to c the peer has
// not yet acknowledged: still in the kernel's send queue. 0 where it
// cannot tell.
func unsent(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	var n int32
	raw.Control(func(fd uintptr) {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, siocOUTQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
			n = 0
		}
	})
	return int(n)
}
