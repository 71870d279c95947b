// Package azq gives Go programs Azure Queue Storage semantics in memory:
// put, get with a visibility timeout, delete with a pop receipt, lease
// renewal and progress updates through Update, and time-to-live expiry,
// exactly as the Azure service behaves, with time taken from an injectable
// clock (github.com/benbjohnson/clock) so tests can advance days in
// microseconds.
//
// A Queue is one queue; a Service holds named queues as a storage account
// does. A Service made by NewService lives in memory; one made by Open keeps
// its queues in a directory, logging every change before acknowledging it,
// so that they survive a crash of the process or the machine (see Open,
// Service.DurableState and Service.Backup).
//
// Every operation of a Queue or a Service takes a context first. When it
// fails, the error is an *Error, which carries Azure's error code and
// HTTP status and matches the Err… values of this package with
// errors.Is, except that a context that is done gives the context's own
// error (context.Canceled or context.DeadlineExceeded). The functions that
// read and write files (Open, Service.Checkpoint, Service.Backup, Restore,
// RestoreDir) report file system errors as they are, and damage as a
// *CorruptError.
//
// MessageQueue is the contract a Queue keeps; package azure keeps it on
// Azure Queue Storage itself, so that code written against it runs on
// either, and package azqtest checks a back end against it.
package azq
