//go:build unix

package main

import "syscall"

// setUmask sets this process's umask, which the processes it starts
// inherit, and returns the one it had.
func setUmask(mask int) int { return syscall.Umask(mask) }
