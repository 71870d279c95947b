package vfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

// osFile is a file of the operating system.
type osFile struct{ *os.File }

func (f osFile) Datasync() error { return datasync(f.File) }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenRW(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
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
	slices.Sort(names)
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

func (osFS) Lock(dir string) (io.Closer, error) { return lockDir(filepath.Clean(dir)) }
