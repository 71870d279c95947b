//go:build !unix

package azure_test

import "time"

// processCPU reports no CPU time on this platform; the benchmarks then
// give ns/op only.
func processCPU() (time.Duration, bool) { return 0, false }
