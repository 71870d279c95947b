package azq

import (
	"errors"
	"io"
	"os"
	"path/filepath"
)

// fsys is the handful of file operations the durable mode uses. It exists
// so that tests can put a layer between the queues and the disk that fails
// or tears writes and syncs, or drops what was never synced, as a crash or
// a failing disk would.
type fsys interface {
	// OpenRW opens name for reading and writing, creating it if need be.
	OpenRW(name string) (file, error)
	// Create creates name, truncating it if it exists.
	Create(name string) (file, error)
	ReadFile(name string) ([]byte, error)
	// List returns the names of the entries of dir.
	List(dir string) ([]string, error)
	Rename(from, to string) error
	Remove(name string) error
	// SyncDir makes the entries of dir (creations, renames, removals)
	// durable.
	SyncDir(dir string) error
	MkdirAll(dir string) error
	// Lock takes an exclusive lock on the file name, so that a second
	// process cannot open the same directory, and returns its release.
	Lock(name string) (io.Closer, error)
}

// file is an open file of an fsys.
type file interface {
	io.Writer
	io.WriterAt
	// Sync makes the file's data and metadata durable (fsync).
	Sync() error
	// Datasync makes the file's data durable, and its metadata only as far
	// as reading the data back needs it (fdatasync where there is one).
	Datasync() error
	Truncate(size int64) error
	Close() error
}

// osFS is the real file system.
type osFS struct{}

// osFile is a file of the real file system.
type osFile struct{ *os.File }

func (f osFile) Datasync() error { return datasync(f.File) }

func (osFS) OpenRW(name string) (file, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Create(name string) (file, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_TRUNC|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

func (osFS) List(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) Rename(from, to string) error { return os.Rename(from, to) }
func (osFS) Remove(name string) error     { return os.Remove(name) }
func (osFS) MkdirAll(dir string) error    { return os.MkdirAll(dir, 0o755) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	// Some systems cannot sync a directory; their renames are then as
	// durable as they get.
	if errors.Is(err, os.ErrInvalid) {
		err = nil
	}
	return err
}

func (osFS) Lock(name string) (io.Closer, error) { return lockFile(filepath.Clean(name)) }
