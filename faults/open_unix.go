//go:build unix

package faults

import "syscall"

// openNonblock opens a named pipe without waiting for a writer, so that
// Load can refuse one that took a regular file's place after it looked.
const openNonblock = syscall.O_NONBLOCK
