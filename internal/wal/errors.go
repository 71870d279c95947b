package wal

import (
	"errors"
	"fmt"
)

// CorruptError reports damage in a log directory that is not a torn
// tail: a frame or record that fails its checksum or does not decode
// with valid data after it, a segment or checkpoint that ends early, or a
// file that is missing (Offset is then -1, and Reason starts "missing").
type CorruptError struct {
	File   string // the file's path
	Offset int64  // where the damaged frame starts; -1 for a missing file
	Reason string
}

func (e *CorruptError) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("%s is corrupt at offset %d: %s", e.File, e.Offset, e.Reason)
}

// ErrClosed is the error of waiting on a log that was closed.
var ErrClosed = errors.New("wal: the log is closed")

// FailedError is the log's failure: a write or sync that failed. It is
// sticky: after a failed fsync the kernel may have dropped the dirty pages
// and cleared the error, so a retry that succeeds would prove nothing
// (fsyncgate), and every later wait returns the same FailedError.
type FailedError struct {
	Op   string // what failed: "write", "sync", ...
	File string
	Err  error
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("wal: %s %s: %v", e.Op, e.File, e.Err)
}

func (e *FailedError) Unwrap() error { return e.Err }
