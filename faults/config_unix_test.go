//go:build unix

package faults

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A named pipe is refused without waiting for a writer: whether Load
// sees it before opening it, or finds it in place of a regular file once
// it has opened it.
func TestLoadRefusesANamedPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "faults.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	want := fifo + ": a named pipe, not a regular file"
	_, err := Load(fifo)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.File != fifo || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Load = %v, want %s…", err, want)
	}
	if _, err := openRules(fifo); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("openRules = %v, want %s…", err, want)
	}
}
