package main

import "syscall"

// dupTo makes newfd a copy of oldfd; Linux on arm64 has only dup3.
func dupTo(oldfd, newfd int) error { return syscall.Dup3(oldfd, newfd, 0) }
