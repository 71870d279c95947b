//go:build !linux

package vfs

import "os"

// datasync falls back to a full sync where fdatasync is not at hand.
func datasync(f *os.File) error { return f.Sync() }
