package azq

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/azqlib/azq/internal/vfs"
	"github.com/azqlib/azq/internal/wal"
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
	type image struct {
		hdr   ckptQueue
		nodes []node
		slots []uint32
	}
	images := make([]image, 0, len(qs))
	for _, q := range qs {
		if q.closed {
			continue
		}
		im := image{hdr: ckptQueue{qid: q.qid, name: q.name, seq: q.seq, next: q.store.next, metadata: q.metadata, policies: q.policies},
			nodes: make([]node, 0, q.count), slots: make([]uint32, 0, q.count)}
		for slot := uint32(0); slot < q.store.next; slot++ {
			if n := q.store.at(slot); n.seq != 0 {
				im.nodes = append(im.nodes, *n)
				im.slots = append(im.slots, slot)
			}
		}
		images = append(images, im)
	}
	nextQID := s.nextQID
	for _, q := range qs {
		q.mu.Unlock()
	}
	s.mu.Unlock()

	bw := bufio.NewWriterSize(w, 1<<16)
	e := wal.NewEncoder(bw, 0, 0)
	c := &copier{sink: e}
	c.emit(appendCkptService(c.b[:0], nextQID))
	for i := range images {
		im := &images[i]
		c.emit(appendCkptQueue(c.b[:0], &im.hdr))
		c.queues++
		chunks := (im.hdr.next + chunkSize - 1) >> chunkShift
		j := 0
		for chunk := uint32(0); chunk < chunks; chunk++ {
			k := j
			for k < len(im.slots) && im.slots[k]>>chunkShift == chunk {
				k++
			}
			c.nodes, c.slots = im.nodes[j:k], im.slots[j:k]
			c.emitChunk(im.hdr.qid, chunk, 0)
			j = k
		}
		c.emit(appendCkptQueueEnd(c.b[:0], im.hdr.qid, chunks, 0))
		im.nodes = nil
	}
	c.emit(appendCkptEnd(c.b[:0], c.queues, c.msgs))
	if c.err != nil {
		return c.err
	}
	if err := e.Close(); err != nil {
		return err
	}
	return bw.Flush()
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
	rp := newReplayer(newConfig(opts))
	if _, _, _, err := wal.ReadCheckpoint("backup", data, rp.checkpointRecord); err != nil {
		if ce := corruptError(err); ce != nil {
			return nil, ce
		}
		return nil, err
	}
	if rp.ckpt != 2 {
		return nil, &CorruptError{File: "backup", Offset: int64(len(data)), Reason: "the backup has no end record"}
	}
	s, _, err := rp.service()
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
	found := false
	notEmpty := func() error { found = true; return errors.New("the directory holds a log") }
	l, _, err := wal.Open(dir, wal.Options{FS: fs}, wal.Replay{
		Checkpoint: func([]byte) error { return notEmpty() },
		Record:     func(uint64, []byte) error { return notEmpty() },
	})
	if found {
		return fmt.Errorf("azq: %s holds a durable Service already", dir)
	}
	if err != nil {
		return openError(dir, err)
	}
	err = l.Prepare()
	var gen, base uint64
	if err == nil {
		gen, base, err = l.Rotate()
	}
	var cw *wal.CheckpointWriter
	if err == nil {
		cw, err = l.CreateCheckpoint(gen, base)
	}
	if err == nil {
		var qs []*Queue
		s.queues.Scan(func(_ string, q *Queue) bool { qs = append(qs, q); return true })
		// Every part as of the log's start: every record after it applies.
		if err = copyState(cw, qs, s.nextQID, func() uint64 { return base }, false, nil); err != nil {
			cw.Abort()
		} else {
			err = cw.Commit()
		}
	}
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("azq: restoring into %s: %w", dir, err)
	}
	return nil
}
