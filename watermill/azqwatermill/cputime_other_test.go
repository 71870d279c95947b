//go:build !unix

package azqwatermill

import "time"

// processCPU reports that the platform does not tell the process's CPU
// time.
func processCPU() (time.Duration, bool) { return 0, false }
