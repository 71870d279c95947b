//go:build unix

package azq

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// lockFile takes an advisory exclusive lock (flock) on name. The kernel
// drops it when the process dies, so a crash never leaves a stale lock.
func lockFile(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is locked: another process has the directory open", name)
		}
		return nil, fmt.Errorf("locking %s: %w", name, err)
	}
	return f, nil
}
