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
// WithSync and Service.Snapshot). Every operation takes a context first and returns errors of type
// *Error, which carry Azure's error code and HTTP status and match the Err…
// values of this package with errors.Is.
//
// MessageQueue is the contract a Queue keeps; package azure keeps it on
// Azure Queue Storage itself, so that code written against it runs on
// either, and package azqtest checks a back end against it.
package azq
