package vfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// write creates name in m with data, syncing the file (syncFile) and its
// directory (syncDir) as asked.
func write(t *testing.T, m *MemFS, name, data string, syncFile, syncDir bool) File {
	t.Helper()
	f, err := m.Create(name)
	must(t, err)
	_, err = f.WriteAt([]byte(data), 0)
	must(t, err)
	if syncFile {
		must(t, f.Sync())
	}
	if syncDir {
		must(t, m.SyncDir(filepath.Dir(name)))
	}
	return f
}

// after returns what m holds at name after a crash ("<none>" if nothing).
func after(t *testing.T, m *MemFS, name string) string {
	t.Helper()
	m.Crash()
	b, err := m.CrashImage().ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return "<none>"
	}
	must(t, err)
	return string(b)
}

func TestMemFSCrashKeepsWhatWasSynced(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, m *MemFS)
		want string
	}{
		{"file and entry synced", func(t *testing.T, m *MemFS) { write(t, m, "/d/f", "data", true, true) }, "data"},
		{"entry never synced", func(t *testing.T, m *MemFS) { write(t, m, "/d/f", "data", true, false) }, "<none>"},
		{"data never synced", func(t *testing.T, m *MemFS) { write(t, m, "/d/f", "data", false, true) }, ""},
		{"write after the sync", func(t *testing.T, m *MemFS) {
			f := write(t, m, "/d/f", "data", true, true)
			f.WriteAt([]byte("more"), 4)
		}, "data"},
		{"datasync", func(t *testing.T, m *MemFS) {
			f := write(t, m, "/d/f", "data", true, true)
			f.WriteAt([]byte("more"), 4)
			must(t, f.Datasync())
		}, "datamore"},
		{"truncate never synced", func(t *testing.T, m *MemFS) {
			f := write(t, m, "/d/f", "data", true, true)
			must(t, f.Truncate(1))
		}, "data"},
		{"remove never synced", func(t *testing.T, m *MemFS) {
			write(t, m, "/d/f", "data", true, true)
			must(t, m.Remove("/d/f"))
		}, "data"},
		{"remove synced", func(t *testing.T, m *MemFS) {
			write(t, m, "/d/f", "data", true, true)
			must(t, m.Remove("/d/f"))
			must(t, m.SyncDir("/d"))
		}, "<none>"},
		{"rename never synced", func(t *testing.T, m *MemFS) {
			write(t, m, "/d/tmp", "new", true, false)
			must(t, m.Rename("/d/tmp", "/d/f"))
		}, "<none>"},
		{"rename synced over an old file", func(t *testing.T, m *MemFS) {
			write(t, m, "/d/f", "old", true, true)
			write(t, m, "/d/tmp", "new", true, false)
			must(t, m.Rename("/d/tmp", "/d/f"))
			must(t, m.SyncDir("/d"))
		}, "new"},
		{"file syncs ignored", func(t *testing.T, m *MemFS) {
			m.IgnoreSyncs(true, false)
			write(t, m, "/d/f", "data", true, true)
		}, ""},
		{"directory syncs ignored", func(t *testing.T, m *MemFS) {
			m.IgnoreSyncs(false, true)
			write(t, m, "/d/f", "data", true, true)
		}, "<none>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMem()
			must(t, m.MkdirAll("/d"))
			must(t, m.SyncDir("/"))
			tc.run(t, m)
			if got := after(t, m, "/d/f"); got != tc.want {
				t.Fatalf("after the crash: %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMemFSUnsyncedDirectoryLosesItsFiles(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/a/b"))
	write(t, m, "/a/b/f", "data", true, true) // /a/b synced, but not / or /a
	if got := after(t, m, "/a/b/f"); got != "<none>" {
		t.Fatalf("a file in a directory whose own entry was never synced survived: %q", got)
	}
}

func TestMemFSTornWritesKeepAPrefix(t *testing.T) {
	seen := map[string]bool{}
	for seed := uint64(0); seed < 200; seed++ {
		m := NewMem()
		m.SetTornWrites(rand.New(rand.NewPCG(seed, 0)))
		f := write(t, m, "/f", "", true, true)
		for i, s := range []string{"aaaa", "bbbb", "cccc"} {
			f.WriteAt([]byte(s), int64(4*i))
		}
		got := after(t, m, "/f")
		if !bytes.HasPrefix([]byte("aaaabbbbcccc"), []byte(got)) {
			t.Fatalf("seed %d: %q is not a prefix of the writes", seed, got)
		}
		seen[got] = true
	}
	for _, want := range []string{"", "aaaa", "aaaabbbb", "aaaabbbbcccc"} {
		if !seen[want] {
			t.Errorf("no crash kept exactly %q; kept %v", want, slices.Sorted(mapsKeys(seen)))
		}
	}
	if len(seen) <= 4 {
		t.Errorf("no crash tore a write: %v", seen)
	}
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestMemFSCrashStopsEverything(t *testing.T) {
	m := NewMem()
	f := write(t, m, "/f", "data", true, true)
	m.Crash()
	if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("write after the crash: %v", err)
	}
	if err := f.Sync(); !errors.Is(err, ErrCrashed) {
		t.Fatalf("sync after the crash: %v", err)
	}
	if _, err := m.Create("/g"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("create after the crash: %v", err)
	}
	img := m.CrashImage()
	// The image is a file system of its own, and each call gives a fresh one.
	g := write(t, img, "/g", "x", true, true)
	g.Close()
	if _, err := m.CrashImage().ReadFile("/g"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a change to one image shows in the next: %v", err)
	}
}

func TestLockIsExclusive(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   FS
		dir  string
	}{
		{"os", OS, t.TempDir()},
		{"mem", NewMem(), "/d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			must(t, tc.fs.MkdirAll(tc.dir))
			l, err := tc.fs.Lock(tc.dir)
			must(t, err)
			if _, err := tc.fs.Lock(tc.dir); !errors.Is(err, ErrLocked) {
				t.Fatalf("second Lock: %v, want ErrLocked", err)
			}
			// The lock is the directory's, not a file's that could be
			// removed from under it.
			names, err := tc.fs.List(tc.dir)
			must(t, err)
			for _, n := range names {
				must(t, tc.fs.Remove(filepath.Join(tc.dir, n)))
			}
			if _, err := tc.fs.Lock(tc.dir); !errors.Is(err, ErrLocked) {
				t.Fatalf("Lock after emptying the directory: %v, want ErrLocked", err)
			}
			must(t, l.Close())
			l, err = tc.fs.Lock(tc.dir)
			must(t, err)
			l.Close()
		})
	}
}

func TestInjectFailsAndTears(t *testing.T) {
	m := NewMem()
	fail := errors.New("injected")
	var seen []OpKind
	fs := Inject(m, func(op Op) error {
		seen = append(seen, op.Kind)
		switch {
		case op.Kind == OpWrite && op.Len == 8:
			return &Torn{Err: fail}
		case op.Kind == OpSync:
			return fail
		}
		return nil
	})
	f, err := fs.Create("/f")
	must(t, err)
	if _, err := f.WriteAt([]byte("abcdefgh"), 0); !errors.Is(err, fail) {
		t.Fatalf("torn write: %v", err)
	}
	if b, _ := m.ReadFile("/f"); string(b) != "abcd" {
		t.Fatalf("a torn write left %q, want its first half", b)
	}
	if err := f.Sync(); !errors.Is(err, fail) {
		t.Fatalf("sync: %v", err)
	}
	must(t, f.Datasync())
	if want := []OpKind{OpCreate, OpWrite, OpSync, OpDatasync}; !slices.Equal(seen, want) {
		t.Fatalf("hook saw %v, want %v", seen, want)
	}
}

// TestOSWriteBack: where the operating system's files can write back a
// range (Linux), doing so succeeds and leaves the contents as they were.
func TestOSWriteBack(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	f, err := OS.Create(name)
	must(t, err)
	defer f.Close()
	data := bytes.Repeat([]byte("x"), 3<<20)
	_, err = f.WriteAt(data, 0)
	must(t, err)
	wb, ok := f.(RangeWriter)
	if !ok {
		t.Skip("this system's files cannot write back a range")
	}
	must(t, wb.WriteBack(0, 1<<20))
	must(t, wb.WriteBack(1<<20, 2<<20))
	got, err := OS.ReadFile(name)
	must(t, err)
	if !bytes.Equal(got, data) {
		t.Fatal("the contents changed")
	}
}
