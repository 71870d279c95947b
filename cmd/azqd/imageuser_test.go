package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

func TestParseImageUser(t *testing.T) {
	for _, c := range []struct {
		in   string
		want imageUser
		ok   bool
	}{
		{"65532:65532", imageUser{65532, 65532}, true},
		{"1000:100", imageUser{1000, 100}, true},
		{"0:0", imageUser{0, 0}, true},
		{"nonroot", imageUser{}, false},
		{"65532", imageUser{}, false},
		{"65532:", imageUser{}, false},
		{"-1:5", imageUser{}, false},
		{"a:b", imageUser{}, false},
	} {
		got, err := parseImageUser(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseImageUser(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// fakeInfo is a directory's fs.FileInfo with a chosen owner and mode.
type fakeInfo struct {
	fs.FileInfo
	mode fs.FileMode
}

func (f fakeInfo) Mode() fs.FileMode { return f.mode }

func TestWritableBy(t *testing.T) {
	needRoot(t) // owners are read from real files: a chown needs root
	u := imageUser{65532, 65532}
	for _, c := range []struct {
		owner imageUser
		mode  fs.FileMode
		want  bool
	}{
		{imageUser{0, 0}, 0o755, false},        // a root-owned volume
		{imageUser{0, 0}, 0o777, true},         // world-writable
		{imageUser{0, 0}, 0o1777, true},        // /tmp-like
		{imageUser{65532, 65532}, 0o755, true}, // the image's /data
		{imageUser{65532, 0}, 0o555, false},    // read-only for its owner
		{imageUser{0, 65532}, 0o775, true},     // the group may
		{imageUser{1000, 1000}, 0o755, false},
	} {
		dir := t.TempDir()
		if err := os.Chown(dir, c.owner.uid, c.owner.gid); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := writableBy(fakeInfo{fi, fs.ModeDir | c.mode}, u); got != c.want {
			t.Errorf("owner %v, mode %v: writable %v, want %v", c.owner, c.mode, got, c.want)
		}
	}
}

// needRoot skips a test that changes owners unless it runs as root,
// except under CI, which runs as root (.ci/run), where it fails.
func needRoot(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("file owners are read on Linux only")
	}
	needProgram(t, "changing file owners needs root", os.Geteuid() == 0)
}

// TestPrepareDataDir is what azqd does as root, before it becomes
// AZQD_USER, to a root-owned volume that Azurite and an earlier azqd run
// as root wrote: the directory and azqd's own entries become the user's,
// Azurite's files stay root's.
func TestPrepareDataDir(t *testing.T) {
	needRoot(t)
	u := imageUser{65532, 65532}
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	azuriteFiles(t, dir)
	own := []string{"devstoreaccount1/wal/000001.log", "devstoreaccount1.properties.xml", "clock", "debug.log"}
	for _, name := range own {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, _, err := parseArgs([]string{"--location", dir, "--debug", filepath.Join(dir, "debug.log")})
	if err != nil {
		t.Fatal(err)
	}
	changed, err := prepareDataDir(cfg, u)
	if err != nil {
		t.Fatal(err)
	}
	wantChanged := []string{dir, filepath.Join(dir, "devstoreaccount1"), filepath.Join(dir, "devstoreaccount1.properties.xml"),
		filepath.Join(dir, "clock"), filepath.Join(dir, "debug.log")}
	if !slices.Equal(changed, wantChanged) {
		t.Errorf("changed %q, want %q", changed, wantChanged)
	}
	ownerIs := func(p string, want imageUser) {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := ownerOf(fi); got != want {
			t.Errorf("%s belongs to %v, want %v", p, got, want)
		}
	}
	ownerIs(dir, u)
	for _, name := range append(own, "devstoreaccount1", "devstoreaccount1/wal") {
		ownerIs(filepath.Join(dir, name), u)
	}
	for _, name := range []string{"__azurite_db_queue__.json", "__azurite_db_queue_extent__.json", "__queuestorage__", "__queuestorage__/0f3c2a"} {
		ownerIs(filepath.Join(dir, name), imageUser{0, 0})
	}

	// Prepared once, nothing changes the second time; a fresh volume that
	// is already the user's (the image's /data) changes nothing either.
	if changed, err := prepareDataDir(cfg, u); err != nil || len(changed) != 0 {
		t.Errorf("second time: changed %q, %v", changed, err)
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	if err := os.Mkdir(fresh, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(fresh, u.uid, u.gid); err != nil {
		t.Fatal(err)
	}
	cfg.dataDir, cfg.debugLog = fresh, ""
	if changed, err := prepareDataDir(cfg, u); err != nil || len(changed) != 0 {
		t.Errorf("fresh volume: changed %q, %v", changed, err)
	}
	// A directory the user owns and made read-only stays so: azqd then
	// stops, saying why, rather than say it changed an owner.
	if err := os.Chmod(fresh, 0o555); err != nil {
		t.Fatal(err)
	}
	if changed, err := prepareDataDir(cfg, u); err != nil || len(changed) != 0 {
		t.Errorf("read-only directory of the user's: changed %q, %v", changed, err)
	}
	// A missing directory (a bind mount of a path that does not exist
	// yet) is made, as root, and given to the user.
	cfg.dataDir = filepath.Join(t.TempDir(), "a", "b")
	if changed, err := prepareDataDir(cfg, u); err != nil || !slices.Equal(changed, []string{cfg.dataDir}) {
		t.Errorf("missing directory: changed %q, %v", changed, err)
	}
	ownerIs(cfg.dataDir, u)
}

// FuzzParseImageUser: AZQD_USER comes from outside; any value either
// parses to IDs that print back as the value, or is refused.
func FuzzParseImageUser(f *testing.F) {
	for _, s := range []string{"65532:65532", "0:0", "1000:100", "", ":", "a:b", "-1:1", "2147483648:1", "1:2:3", " 1:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := parseImageUser(s)
		if err != nil {
			return
		}
		if u.uid < 0 || u.gid < 0 {
			t.Fatalf("%q parsed to %v", s, u)
		}
		if again, err := parseImageUser(u.String()); err != nil || again != u {
			t.Fatalf("%q parsed to %v, which parses to %v, %v", s, u, again, err)
		}
	})
}
