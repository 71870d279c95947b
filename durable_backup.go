package azq

import (
	"bytes"
	"context"
	"io"

	"github.com/azqlib/azq/internal/durable"
	"github.com/azqlib/azq/internal/vfs"
)

// Backup writes a consistent copy of the Service's state (queues,
// metadata, access policies, messages with their IDs, times, dequeue
// counts and current pop receipts) to w, in the format of the durable
// mode's checkpoints. It may run while the Service is in use, in memory or
// durable: the state is copied in one brief stop of every queue, long
// enough to copy every message's node (contents are shared, not copied),
// then written with no lock held. Restore reads it back, for test
// fixtures and back-ups.
func (s *Service) Backup(ctx context.Context, w io.Writer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed || s.failure != nil {
		defer s.mu.Unlock()
		return s.closedErr()
	}
	var qs []*Queue
	s.queues.Scan(func(_ string, q *Queue) bool { qs = append(qs, q); return true })
	for _, q := range qs {
		q.mu.Lock()
	}
	images := make([]durable.Image, 0, len(qs))
	for _, q := range qs {
		if q.closed {
			continue
		}
		v := (*queueView)(q)
		images = append(images, durable.Image{Header: v.Header(),
			Messages: v.AppendMessages(make([]durable.Message, 0, q.count), 0, q.store.next)})
	}
	nextQID := s.nextQID
	for _, q := range qs {
		q.mu.Unlock()
	}
	s.mu.Unlock()
	return durable.WriteBackup(w, nextQID, images)
}

// Restore returns an in-memory Service holding the state a Backup wrote
// to r: the same queues and messages, and pop receipts that still work.
// Options set the clock and limits as for NewService. A damaged or cut
// backup gives a *CorruptError and no Service. To start a durable Service
// from a backup, see RestoreDir.
func Restore(r io.Reader, opts ...Option) (*Service, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	cfg := newConfig(opts)
	res, err := durable.ReadBackup(data, rebuilder{cfg})
	if err != nil {
		return nil, durableError(err)
	}
	s, _, err := rebuilt(cfg, res)
	if err != nil {
		return nil, &CorruptError{File: "backup", Offset: -1, Reason: err.Error()}
	}
	return s, nil
}

// RestoreDir writes the backup that r holds into the directory dir
// (created if need be) as the state a durable Service starts from: Open
// then opens it with the backup's queues and messages, pop receipts
// included. dir must not hold a durable Service's log yet. A damaged or
// cut backup gives a *CorruptError and writes nothing.
func RestoreDir(dir string, r io.Reader) error { return restoreDir(dir, r, nil) }

func restoreDir(dir string, r io.Reader, fs vfs.FS) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s, err := Restore(bytes.NewReader(data))
	if err != nil {
		return err
	}
	s.mu.Lock()
	qs, nextQID := s.queueStates(), s.nextQID
	s.mu.Unlock()
	return durableError(durable.WriteDir(dir, fs, qs, nextQID))
}
