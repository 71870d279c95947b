//go:build !unix

package azq

import (
	"fmt"
	"io"
	"os"
)

// lockFile creates name exclusively where flock is not available. Unlike
// flock, the file outlives a crash: remove it by hand once sure no process
// has the directory open.
func lockFile(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s exists: another process has the directory open, or one crashed (%w)", name, err)
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
