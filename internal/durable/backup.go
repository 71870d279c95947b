package durable

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/azqlib/azq/internal/vfs"
	"github.com/azqlib/azq/internal/wal"
)

// Image is a queue as a backup holds it, copied at one instant: its
// header and its messages in slot order.
type Image struct {
	Header   Header
	Messages []Message
}

// WriteBackup writes a backup of the queues images, and of the number of
// the next queue to create, to w, in the format of a checkpoint.
func WriteBackup(w io.Writer, nextQID uint64, images []Image) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	e := wal.NewEncoder(bw, 0, 0)
	c := &copier{sink: e}
	c.emit(appendCkptService(c.b[:0], nextQID))
	for i := range images {
		im := &images[i]
		c.emit(appendCkptQueue(c.b[:0], &im.Header, 0))
		c.queues++
		chunks := (im.Header.Next + chunkSize - 1) >> chunkShift
		j := 0
		for chunk := uint32(0); chunk < chunks; chunk++ {
			k := j
			for k < len(im.Messages) && im.Messages[k].Slot>>chunkShift == chunk {
				k++
			}
			c.msgs = im.Messages[j:k]
			c.emitChunk(im.Header.QID, chunk, 0)
			j = k
		}
		c.emit(appendCkptQueueEnd(c.b[:0], im.Header.QID, chunks, 0))
		im.Messages = nil
	}
	c.emit(appendCkptEnd(c.b[:0], c.queues, c.total))
	if c.err != nil {
		return c.err
	}
	if err := e.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// ReadBackup rebuilds with b the state that the backup data holds. A
// damaged or cut backup gives a *CorruptError.
func ReadBackup(data []byte, b Builder) (Result, error) {
	rp := NewReplayer(b)
	if _, _, _, err := wal.ReadCheckpoint("backup", data, rp.CheckpointRecord); err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			return Result{}, ce
		}
		return Result{}, err
	}
	if rp.ckpt != 2 {
		return Result{}, &CorruptError{File: "backup", Offset: int64(len(data)), Reason: "the backup has no end record"}
	}
	return rp.Result()
}

// WriteDir writes the queues qs, and the number of the next queue to
// create, into the directory dir (created if need be; fs nil for the
// operating system's) as the checkpoint a Log opened there starts from.
// dir must not hold a log yet.
func WriteDir(dir string, fs vfs.FS, qs []QueueState, nextQID uint64) error {
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
		// Every part as of the log's start: every record after it applies.
		if err = copyState(cw, qs, nextQID, func() uint64 { return base }, false, nil); err != nil {
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
