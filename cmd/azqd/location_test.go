package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// azuriteFiles writes a small Azurite workspace into dir: the queue
// service's databases and an extent, as Azurite leaves them.
func azuriteFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{
		"__azurite_db_queue__.json":        []byte(`{"filename":"/data/__azurite_db_queue__.json","collections":[{"name":"$QUEUES_COLLECTION$"}]}`),
		"__azurite_db_queue_extent__.json": []byte(`{"filename":"/data/__azurite_db_queue_extent__.json","collections":[]}`),
		"__queuestorage__/0f3c2a":          []byte("extent bytes"),
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestAzuriteWorkspaceIsReported starts azqd with Azurite's --location on
// a directory Azurite used: azqd says so, with what to do, serves, keeps
// its own data beside Azurite's, and leaves Azurite's files as they were.
// Before, it said only "recovered 0 queues".
func TestAzuriteWorkspaceIsReported(t *testing.T) {
	dir := t.TempDir()
	files := azuriteFiles(t, dir)
	before := map[string]fs.FileInfo{}
	for name := range files {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		before[name] = fi
	}

	d := start(t, "--location", dir)
	stderr := d.stderr.String()
	for _, want := range []string{
		"azqd: warning: " + dir + " is an Azurite workspace (it holds __azurite_db_queue__.json, __azurite_db_queue_extent__.json, __queuestorage__)",
		"azqd cannot read Azurite's data",
		filepath.Join(dir, "devstoreaccount1"),
		"never changes Azurite's files",
		"give --location (or -data) an empty directory or a new volume",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	roundTrip(t, queueClient(t, d.conns["devstoreaccount1"], "afterazurite"))
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: %q, %v; want it untouched", name, got, err)
		}
		fi, err := os.Stat(p)
		if err != nil || !fi.ModTime().Equal(before[name].ModTime()) || fi.Mode() != before[name].Mode() {
			t.Errorf("%s changed: %v, %v", name, fi, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "devstoreaccount1")); err != nil {
		t.Errorf("azqd's own data is not beside Azurite's: %v", err)
	}

	// An empty directory, or one of azqd's own, is no Azurite workspace.
	d = start(t, "-data", t.TempDir())
	if strings.Contains(d.stderr.String(), "Azurite workspace") {
		t.Errorf("warned about an empty directory: %s", d.stderr.String())
	}
}

// TestDataDirErrorSaysWhoAndWhat: a data directory azqd may not write
// stops it with who it runs as, who owns the directory, and what to do;
// it never goes on in memory.
func TestDataDirErrorSaysWhoAndWhat(t *testing.T) {
	dir := t.TempDir()
	denied := &fs.PathError{Op: "mkdir", Path: filepath.Join(dir, "devstoreaccount1"), Err: syscall.EACCES}
	err := dataDirError(dir, denied)
	var h *hintError
	if !errors.As(err, &h) || !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("got %#v, want a hintError wrapping the permission error", err)
	}
	for _, want := range []string{"azqd runs as ", "may not write " + dir, ", which belongs to ", "chown ", "AZQD_USER"} {
		if !strings.Contains(h.hint, want) {
			t.Errorf("hint lacks %q: %s", want, h.hint)
		}
	}
	other := errors.New("disk on fire")
	if got := dataDirError(dir, other); got != other {
		t.Errorf("a non-permission error became %v", got)
	}
}
