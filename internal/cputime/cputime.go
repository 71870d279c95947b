// Package cputime reads the CPU time of the running process, which the
// benchmarks of the REST adapter and the messaging drivers report beside
// wall time: client and server share the machine's cores there, so wall
// time alone would measure both.
package cputime

import "time"

// Process returns the CPU time, user and system, that the process has
// used so far, and whether the platform reports it.
func Process() (time.Duration, bool) { return process() }
