package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// MemFS is a strict in-memory file system, for tests: Crash simulates a
// power cut, after which CrashImage holds only what was made durable. A
// file keeps the contents it had at its last Sync or Datasync; a directory
// keeps the entries (files created, renamed, removed; directories made) it
// had at its last SyncDir. A file whose directory entry was never synced is
// gone, whatever was synced of its data; a removal or rename that was never
// synced is undone.
//
// With SetTornWrites a crash keeps, of each file and directory, a random
// prefix of the changes made since its last sync (the last one kept
// possibly cut short), as a disk that writes back in order but was stopped
// midway would; without it, no unsynced change survives.
//
// IgnoreSyncs makes syncs succeed without making anything durable: a
// mutation that tests whether a test notices a missing sync.
//
// Paths are slash-separated and relative to the root whether or not they
// start with a slash. All methods are safe for concurrent use.
type MemFS struct {
	mu             sync.Mutex // guards everything below, and every node
	root           *memNode
	locks          map[string]bool // directories locked
	torn           *rand.Rand      // nil: a crash keeps no unsynced change
	ignoreFileSync bool
	ignoreDirSync  bool
	crashed        bool
	image          *MemFS // what the crash left; set by Crash
}

// memNode is a file or a directory.
type memNode struct {
	dir bool

	// A file's contents now and as of its last sync, and the changes
	// since, in order.
	data    []byte
	synced  []byte
	pending []fileChange

	// A directory's entries now and as of its last sync, and the changes
	// since, in order.
	entries        map[string]*memNode
	syncedEntries  map[string]*memNode
	pendingEntries []dirChange
}

// fileChange is a write of data at off, or a truncation to size.
type fileChange struct {
	off      int64
	data     []byte
	truncate bool
	size     int64
}

// dirChange sets the entry name to node, or removes it (node nil).
// A rename is one change that does both, so a crash keeps all of it or
// none.
type dirChange struct {
	name string
	node *memNode
	from string // a rename: the entry removed
}

// NewMem returns an empty MemFS.
func NewMem() *MemFS {
	root := newDir()
	root.syncedEntries = map[string]*memNode{}
	return &MemFS{root: root, locks: map[string]bool{}}
}

func newDir() *memNode {
	return &memNode{dir: true, entries: map[string]*memNode{}, syncedEntries: map[string]*memNode{}}
}

// SetTornWrites makes a crash keep a random prefix, drawn from rng, of
// each file's and directory's unsynced changes; nil keeps none.
func (m *MemFS) SetTornWrites(rng *rand.Rand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.torn = rng
}

// IgnoreSyncs makes file syncs (files) or directory syncs (dirs) report
// success without making anything durable.
func (m *MemFS) IgnoreSyncs(files, dirs bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ignoreFileSync, m.ignoreDirSync = files, dirs
}

// Crash simulates a power cut: what is durable now is set aside for
// CrashImage, and every later operation fails with ErrCrashed. A second
// Crash does nothing.
func (m *MemFS) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.crashed {
		m.crashed = true
		m.image = m.imageLocked()
	}
}

// CrashImage returns a new MemFS holding what the crash left, or nil
// before Crash.
func (m *MemFS) CrashImage() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.image == nil {
		return nil
	}
	// A copy, so that the image can be opened more than once.
	img := m.image
	img.mu.Lock()
	defer img.mu.Unlock()
	c := &MemFS{locks: map[string]bool{}}
	c.root = copyTree(img.root, false, nil, map[*memNode]*memNode{})
	return c
}

// imageLocked builds the file system that survives a crash now.
func (m *MemFS) imageLocked() *MemFS {
	return &MemFS{root: copyTree(m.root, true, m.torn, map[*memNode]*memNode{}), locks: map[string]bool{}}
}

// copyTree copies the tree under n: as it is now (durable false), or as a
// crash leaves it (durable true), keeping a random prefix of the unsynced
// changes when rng is set.
func copyTree(n *memNode, durable bool, rng *rand.Rand, memo map[*memNode]*memNode) *memNode {
	if c, ok := memo[n]; ok {
		return c
	}
	c := &memNode{dir: n.dir}
	memo[n] = c
	keep := func(k int) int {
		if !durable {
			return k
		}
		if rng == nil || k == 0 {
			return 0
		}
		return rng.IntN(k + 1)
	}
	if n.dir {
		ents := n.entries
		if durable {
			ents = maps.Clone(n.syncedEntries)
			for _, ch := range n.pendingEntries[:keep(len(n.pendingEntries))] {
				ch.apply(ents)
			}
		}
		c.entries = make(map[string]*memNode, len(ents))
		for name, child := range ents {
			c.entries[name] = copyTree(child, durable, rng, memo)
		}
		c.syncedEntries = maps.Clone(c.entries)
		return c
	}
	data := slices.Clone(n.data)
	if durable {
		data = slices.Clone(n.synced)
		k := keep(len(n.pending))
		for i, ch := range n.pending[:k] {
			if i == k-1 && !ch.truncate && len(ch.data) > 1 && rng.IntN(2) == 0 {
				ch.data = ch.data[:1+rng.IntN(len(ch.data)-1)] // torn
			}
			data = ch.apply(data)
		}
	}
	c.data, c.synced = data, slices.Clone(data)
	return c
}

func (ch dirChange) apply(ents map[string]*memNode) {
	if ch.from != "" {
		delete(ents, ch.from)
	}
	if ch.node == nil {
		delete(ents, ch.name)
	} else {
		ents[ch.name] = ch.node
	}
}

func (ch fileChange) apply(data []byte) []byte {
	if ch.truncate {
		if ch.size <= int64(len(data)) {
			return data[:ch.size]
		}
		return append(data, make([]byte, ch.size-int64(len(data)))...)
	}
	if end := ch.off + int64(len(ch.data)); end > int64(len(data)) {
		data = append(data, make([]byte, end-int64(len(data)))...)
	}
	copy(data[ch.off:], ch.data)
	return data
}

// split returns the components of a path.
func split(name string) []string {
	name = path.Clean("/" + filepath.ToSlash(name))
	if name == "/" {
		return nil
	}
	return strings.Split(name[1:], "/")
}

// lookupLocked returns the node at name, or nil.
func (m *MemFS) lookupLocked(name string) *memNode {
	n := m.root
	for _, c := range split(name) {
		if !n.dir {
			return nil
		}
		if n = n.entries[c]; n == nil {
			return nil
		}
	}
	return n
}

// parentLocked returns the directory holding name and name's last
// component.
func (m *MemFS) parentLocked(op, name string) (*memNode, string, error) {
	cs := split(name)
	if len(cs) == 0 {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	d := m.lookupLocked(strings.Join(cs[:len(cs)-1], "/"))
	if d == nil || !d.dir {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return d, cs[len(cs)-1], nil
}

func (d *memNode) change(ch dirChange) {
	ch.apply(d.entries)
	d.pendingEntries = append(d.pendingEntries, ch)
}

func (m *MemFS) check(op, name string) error {
	if m.crashed {
		return &fs.PathError{Op: op, Path: name, Err: ErrCrashed}
	}
	return nil
}

func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check("create", name); err != nil {
		return nil, err
	}
	d, base, err := m.parentLocked("create", name)
	if err != nil {
		return nil, err
	}
	n := d.entries[base]
	switch {
	case n == nil:
		n = &memNode{}
		d.change(dirChange{name: base, node: n})
	case n.dir:
		return nil, &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
	default:
		n.data = n.data[:0]
		n.pending = append(n.pending, fileChange{truncate: true})
	}
	return &memFile{m: m, n: n, name: name}, nil
}

func (m *MemFS) OpenRW(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check("open", name); err != nil {
		return nil, err
	}
	n := m.lookupLocked(name)
	if n == nil || n.dir {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &memFile{m: m, n: n, name: name}, nil
}

func (m *MemFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check("read", name); err != nil {
		return nil, err
	}
	n := m.lookupLocked(name)
	if n == nil || n.dir {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(n.data), nil
}

func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check("list", dir); err != nil {
		return nil, err
	}
	d := m.lookupLocked(dir)
	if d == nil || !d.dir {
		return nil, &fs.PathError{Op: "list", Path: dir, Err: fs.ErrNotExist}
	}
	return slices.Sorted(maps.Keys(d.entries)), nil
}

func (m *MemFS) Rename(from, to string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check("rename", from); err != nil {
		return err
	}
	d, fb, err := m.parentLocked("rename", from)
	if err != nil {
		return err
	}
	d2, tb, err := m.parentLocked("rename", to)
	if err != nil {
		return err
	}
	if d2 != d {
		return &fs.PathError{Op: "rename", Path: to, Err: fmt.Errorf("not in the directory of %s", from)}
	}
	n := d.entries[fb]
	if n == nil {
		return &fs.PathError{Op: "rename", Path: from, Err: fs.ErrNotExist}
	}
	if fb != tb {
		d.change(dirChange{name: tb, node: n, from: fb})
	}
	return nil
}

func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check("remove", name); err != nil {
		return err
	}
	d, base, err := m.parentLocked("remove", name)
	if err != nil {
		return err
	}
	n := d.entries[base]
	if n == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.entries) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: fmt.Errorf("directory not empty")}
	}
	d.change(dirChange{name: base})
	return nil
}

func (m *MemFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check("mkdir", dir); err != nil {
		return err
	}
	d := m.root
	for _, c := range split(dir) {
		n := d.entries[c]
		if n == nil {
			n = newDir()
			d.change(dirChange{name: c, node: n})
		} else if !n.dir {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: fs.ErrExist}
		}
		d = n
	}
	return nil
}

func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check("syncdir", dir); err != nil {
		return err
	}
	d := m.lookupLocked(dir)
	if d == nil || !d.dir {
		return &fs.PathError{Op: "syncdir", Path: dir, Err: fs.ErrNotExist}
	}
	if !m.ignoreDirSync {
		d.syncedEntries = maps.Clone(d.entries)
		d.pendingEntries = nil
	}
	return nil
}

func (m *MemFS) Lock(dir string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check("lock", dir); err != nil {
		return nil, err
	}
	key := path.Clean("/" + filepath.ToSlash(dir))
	if d := m.lookupLocked(key); d == nil || !d.dir {
		return nil, &fs.PathError{Op: "lock", Path: dir, Err: fs.ErrNotExist}
	}
	if m.locks[key] {
		return nil, fmt.Errorf("%s is %w", dir, ErrLocked)
	}
	m.locks[key] = true
	return &memLock{m: m, key: key}, nil
}

type memLock struct {
	m    *MemFS
	key  string
	once sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() {
		l.m.mu.Lock()
		delete(l.m.locks, l.key)
		l.m.mu.Unlock()
	})
	return nil
}

// memFile is an open file of a MemFS. Like a file of the operating
// system, it still reads and writes its data after its name is removed.
type memFile struct {
	m      *MemFS
	n      *memNode
	name   string
	closed bool
}

func (f *memFile) op(op string) error {
	if f.closed {
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	}
	return f.m.check(op, f.name)
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.op("write"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrInvalid}
	}
	ch := fileChange{off: off, data: slices.Clone(p)}
	f.n.data = ch.apply(f.n.data)
	f.n.pending = append(f.n.pending, ch)
	return len(p), nil
}

func (f *memFile) Sync() error { return f.sync("sync") }

func (f *memFile) Datasync() error { return f.sync("datasync") }

func (f *memFile) sync(op string) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.op(op); err != nil {
		return err
	}
	if !f.m.ignoreFileSync {
		// Bring the synced copy up to date change by change, which
		// costs what was written, not the file's size.
		for _, ch := range f.n.pending {
			f.n.synced = ch.apply(f.n.synced)
		}
		f.n.pending = f.n.pending[:0]
	}
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.op("truncate"); err != nil {
		return err
	}
	ch := fileChange{truncate: true, size: size}
	f.n.data = ch.apply(f.n.data)
	f.n.pending = append(f.n.pending, ch)
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.op("stat"); err != nil {
		return 0, err
	}
	return int64(len(f.n.data)), nil
}

func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	return nil
}
