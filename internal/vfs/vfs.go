package vfs

import (
	"errors"
	"io"
)

// FS is the file system the durable mode works on. Names are paths, as
// for package os.
type FS interface {
	// Create creates the file name, or truncates it if it exists, and
	// opens it for reading and writing.
	Create(name string) (File, error)
	// OpenRW opens the existing file name for reading and writing.
	OpenRW(name string) (File, error)
	// ReadFile returns the contents of the file name.
	ReadFile(name string) ([]byte, error)
	// List returns the names of the entries of the directory dir, sorted.
	List(dir string) ([]string, error)
	// Rename renames from to to, replacing to if it exists. Both are in
	// the same directory.
	Rename(from, to string) error
	// Remove removes the file name.
	Remove(name string) error
	// MkdirAll creates the directory dir and any parents it lacks.
	MkdirAll(dir string) error
	// SyncDir makes the entries of the directory dir durable: the files
	// created, renamed and removed in it since its last sync.
	SyncDir(dir string) error
	// Lock takes an exclusive lock on the directory dir, so that a second
	// process (or a second user in this one) cannot open it, and returns
	// its release. It fails with an error matching ErrLocked while
	// someone else holds it.
	Lock(dir string) (io.Closer, error)
}

// File is an open file of an FS.
type File interface {
	io.WriterAt
	// Sync makes the file's data and metadata durable (fsync).
	Sync() error
	// Datasync makes the file's data durable, and its metadata only as
	// far as reading the data back needs it (fdatasync where there is
	// one): cheaper than Sync when the file's size has not changed.
	Datasync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Size returns the file's size.
	Size() (int64, error)
	Close() error
}

// RangeWriter is implemented by a File that can write back a range of
// its dirty pages and wait for that (sync_file_range on Linux). It makes
// nothing durable, the disk's cache and the file's metadata aside, but
// lets a large file reach the disk in steps instead of in one burst at
// its final sync, which every other sync on the disk would queue behind.
type RangeWriter interface {
	WriteBack(off, n int64) error
}

// ErrLocked is the error of Lock while the directory is locked.
var ErrLocked = errors.New("locked: another process, or another Service of this one, has the directory open")

// ErrCrashed is the error of every operation of a MemFS after a simulated
// crash.
var ErrCrashed = errors.New("vfs: the file system crashed (simulated)")
