package cputime

import "testing"

// Process time never goes back, and grows while the process computes.
func TestProcessGrowsWithWork(t *testing.T) {
	t0, ok := Process()
	if !ok {
		t.Skip("this platform does not report the process's CPU time")
	}
	x := uint64(1)
	for {
		for i := 0; i < 1e6; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		t1, _ := Process()
		if t1 < t0 {
			t.Fatalf("CPU time went back from %v to %v", t0, t1)
		}
		if t1 > t0 {
			break
		}
	}
	_ = x
}
