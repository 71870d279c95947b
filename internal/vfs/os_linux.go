//go:build linux

package vfs

import (
	"os"
	"syscall"
)

// datasync is fdatasync: it skips the journal commit that fsync makes for
// timestamps, which the log does not need.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
