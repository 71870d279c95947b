//go:build unix

package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// lockDir takes an advisory exclusive lock (flock) on the directory
// itself, not on a file in it: a lock file can be deleted while its lock
// is held, and then a second process creates a new one and locks that,
// but a directory cannot be replaced while its contents are in use. The
// kernel drops the lock when the process dies, so a crash never leaves a
// stale one.
func lockDir(dir string) (io.Closer, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return f, nil
}
