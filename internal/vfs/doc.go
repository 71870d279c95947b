// Package vfs is the file system layer under azq's durable mode: the
// handful of operations its log needs, the operating system's file system
// (OS), a strict in-memory one for tests (MemFS) that keeps across a
// simulated power cut only what was synced, and a wrapper that injects
// faults (Inject).
//
// The layer exists so that the log's promises can be tested: a test that
// runs on the real file system keeps the page cache across a killed
// process and cannot tell a synced write from an unsynced one; MemFS can.
package vfs
