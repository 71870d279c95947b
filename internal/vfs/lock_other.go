//go:build !unix

package vfs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// lockDir creates dir/LOCK exclusively where flock is not available.
// Unlike flock, the file outlives a crash: remove it by hand once sure no
// process has the directory open.
func lockDir(dir string) (io.Closer, error) {
	name := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if os.IsExist(err) {
			return nil, fmt.Errorf("%s exists: %w, or one crashed", name, ErrLocked)
		}
		return nil, err
	}
	return removeOnClose{f}, nil
}

type removeOnClose struct{ *os.File }

func (r removeOnClose) Close() error {
	err := r.File.Close()
	if rerr := os.Remove(r.Name()); err == nil {
		err = rerr
	}
	return err
}
