// Package durable is the durable mode's state machine: it keeps a Service
// of package azq on disk, in the log and checkpoints of internal/wal.
//
// The queue package and this one meet at a seam. The queue calls a Queue
// journal, under its own lock, once per change, with the change in plain
// terms (a Message, a slot, a visibility), and waits outside its lock for
// the record to be durable (Queue.Wait); this package encodes the records
// (record.go), writes checkpoints of the state it reads through the
// QueueState view (checkpoint.go), rebuilds the state on Open through the
// Builder and Rebuilt views (replay.go), and encodes backups (backup.go).
// It never imports the queue package: the views are interfaces that the
// queue package implements.
package durable
