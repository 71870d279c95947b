//go:build !race

// The race detector makes sync.Pool drop buffers at random, so that
// Encode's allocations are counted without it.

package envelope_test

import (
	"testing"

	"github.com/azqlib/azq/envelope"
)

// Encode allocates the text alone, once its pooled buffer has grown.
func TestEncodeAllocatesOnlyTheText(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() {
		if _, err := envelope.Encode(&benchEnvelope); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Fatalf("Encode made %v allocations; want 1, the text", n)
	}
}
