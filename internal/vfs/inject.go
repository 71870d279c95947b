package vfs

import (
	"errors"
	"io"
)

// OpKind is a kind of file system operation, as Inject's hook sees it.
type OpKind int

// The operations of an FS and its files.
const (
	OpCreate OpKind = iota + 1
	OpOpen
	OpRead
	OpList
	OpRename
	OpRemove
	OpMkdir
	OpSyncDir
	OpLock
	OpWrite
	OpSync
	OpDatasync
	OpTruncate
)

var opNames = [...]string{"", "create", "open", "read", "list", "rename", "remove", "mkdir", "syncdir", "lock", "write", "sync", "datasync", "truncate"}

func (k OpKind) String() string {
	if k > 0 && int(k) < len(opNames) {
		return opNames[k]
	}
	return "op?"
}

// Mutates reports whether operations of kind k change what is stored or
// make it durable: the points where a crash can fall.
func (k OpKind) Mutates() bool {
	switch k {
	case OpCreate, OpRename, OpRemove, OpMkdir, OpSyncDir, OpWrite, OpSync, OpDatasync, OpTruncate:
		return true
	}
	return false
}

// Op is one operation, as Inject's hook sees it.
type Op struct {
	Kind OpKind
	Name string // the file or directory
	Len  int    // the bytes of a write
}

// Torn, returned by Inject's hook for a write, makes the write store the
// first half of its bytes and then fail with Err.
type Torn struct{ Err error }

func (t *Torn) Error() string { return "torn write: " + t.Err.Error() }
func (t *Torn) Unwrap() error { return t.Err }

// Inject returns fs with hook called before each operation. If the hook
// returns an error, the operation fails with it and does nothing, except a
// write given a *Torn, which writes part of its bytes first.
func Inject(fs FS, hook func(Op) error) FS { return &injectFS{fs, hook} }

type injectFS struct {
	fs   FS
	hook func(Op) error
}

type injectFile struct {
	f    File
	name string
	hook func(Op) error
}

func (i *injectFS) file(f File, name string, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &injectFile{f, name, i.hook}, nil
}

func (i *injectFS) Create(name string) (File, error) {
	if err := i.hook(Op{Kind: OpCreate, Name: name}); err != nil {
		return nil, err
	}
	f, err := i.fs.Create(name)
	return i.file(f, name, err)
}

func (i *injectFS) OpenRW(name string) (File, error) {
	if err := i.hook(Op{Kind: OpOpen, Name: name}); err != nil {
		return nil, err
	}
	f, err := i.fs.OpenRW(name)
	return i.file(f, name, err)
}

func (i *injectFS) ReadFile(name string) ([]byte, error) {
	if err := i.hook(Op{Kind: OpRead, Name: name}); err != nil {
		return nil, err
	}
	return i.fs.ReadFile(name)
}

func (i *injectFS) List(dir string) ([]string, error) {
	if err := i.hook(Op{Kind: OpList, Name: dir}); err != nil {
		return nil, err
	}
	return i.fs.List(dir)
}

func (i *injectFS) Rename(from, to string) error {
	if err := i.hook(Op{Kind: OpRename, Name: from}); err != nil {
		return err
	}
	return i.fs.Rename(from, to)
}

func (i *injectFS) Remove(name string) error {
	if err := i.hook(Op{Kind: OpRemove, Name: name}); err != nil {
		return err
	}
	return i.fs.Remove(name)
}

func (i *injectFS) MkdirAll(dir string) error {
	if err := i.hook(Op{Kind: OpMkdir, Name: dir}); err != nil {
		return err
	}
	return i.fs.MkdirAll(dir)
}

func (i *injectFS) SyncDir(dir string) error {
	if err := i.hook(Op{Kind: OpSyncDir, Name: dir}); err != nil {
		return err
	}
	return i.fs.SyncDir(dir)
}

func (i *injectFS) Lock(dir string) (io.Closer, error) {
	if err := i.hook(Op{Kind: OpLock, Name: dir}); err != nil {
		return nil, err
	}
	return i.fs.Lock(dir)
}

func (f *injectFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.hook(Op{Kind: OpWrite, Name: f.name, Len: len(p)}); err != nil {
		var t *Torn
		if errors.As(err, &t) && len(p) > 1 {
			n, _ := f.f.WriteAt(p[:len(p)/2], off)
			return n, err
		}
		return 0, err
	}
	return f.f.WriteAt(p, off)
}

func (f *injectFile) Sync() error {
	if err := f.hook(Op{Kind: OpSync, Name: f.name}); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *injectFile) Datasync() error {
	if err := f.hook(Op{Kind: OpDatasync, Name: f.name}); err != nil {
		return err
	}
	return f.f.Datasync()
}

func (f *injectFile) Truncate(size int64) error {
	if err := f.hook(Op{Kind: OpTruncate, Name: f.name}); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *injectFile) Size() (int64, error) { return f.f.Size() }
func (f *injectFile) Close() error         { return f.f.Close() }
