package envelope_test

import (
	"testing"
	"time"

	"github.com/azqlib/azq/envelope"
	"github.com/azqlib/azq/internal/cputime"
)

// A message as gocloud's benchmarks send it, and as Watermill's carry one:
// a short body, one metadata pair, and for Watermill a UUID.
var benchEnvelope = envelope.Envelope{
	ID:       "b3a4c8e2-0f1d-4c7e-9a55-3e2d1f0a9b8c",
	Metadata: map[string]string{"label": "value"},
	Body:     []byte("hello, world"),
}

// startCPU starts a benchmark's timing; reportCPU, given what it
// returned, adds the CPU time of the process per operation (cpu-ns/op),
// which the other tenants of a shared machine inflate less than the wall
// time.
func startCPU(b *testing.B) time.Duration {
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, _ := cputime.Process()
	return cpu0
}

func reportCPU(b *testing.B, cpu0 time.Duration) {
	b.StopTimer()
	if cpu1, ok := cputime.Process(); ok {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}

func BenchmarkAppend(b *testing.B) {
	var buf []byte
	cpu0 := startCPU(b)
	for range b.N {
		var err error
		if buf, err = envelope.Append(buf[:0], &benchEnvelope); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
}

func BenchmarkDecode(b *testing.B) { benchDecode(b, &benchEnvelope) }

func BenchmarkDecodeBodyOnly(b *testing.B) {
	benchDecode(b, &envelope.Envelope{Body: benchEnvelope.Body})
}

// BenchmarkDecodeJSONBody decodes a message whose body is JSON, as many
// are: its quotes are escaped in the envelope.
func BenchmarkDecodeJSONBody(b *testing.B) {
	benchDecode(b, &envelope.Envelope{
		ID:       benchEnvelope.ID,
		Metadata: benchEnvelope.Metadata,
		Body:     []byte(`{"order":42,"customer":"c-1093","items":[{"sku":"A-7","qty":2}],"total":9.5}`),
	})
}

// benchDecode decodes e's encoding b.N times.
func benchDecode(b *testing.B, e *envelope.Envelope) {
	text, err := envelope.Encode(e)
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := startCPU(b)
	for range b.N {
		if _, err := envelope.Decode(text); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
}

// BenchmarkBaselineMapOfOne is the allocation of a map of one metadata
// pair, which Decode makes for such a message and the Message types of
// gocloud and Watermill need: a floor of decoding, for comparison.
func BenchmarkBaselineMapOfOne(b *testing.B) {
	b.ReportAllocs()
	var sink map[string]string
	for range b.N {
		sink = map[string]string{"label": "value"}
	}
	_ = sink
}
