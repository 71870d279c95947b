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

// The flags of sync_file_range(2).
const (
	syncFileRangeWaitBefore = 1
	syncFileRangeWrite      = 2
	syncFileRangeWaitAfter  = 4
)

// WriteBack writes back the dirty pages of the range and waits for them.
func (f osFile) WriteBack(off, n int64) error {
	for {
		err := syscall.SyncFileRange(int(f.Fd()), off, n, syncFileRangeWaitBefore|syncFileRangeWrite|syncFileRangeWaitAfter)
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "sync_file_range", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
