package sdktest_test

import (
	"testing"

	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/metrics"
	"github.com/azqlib/azq/server"
)

// BenchmarkHandlerCycleWith is BenchmarkHandlerCycle (put, get, delete,
// served in process) with the fault injection and observation options:
// none set (what every server without them pays), an Observe hook that
// counts into a metrics.Recorder, an Injector without rules (azqd with
// -fault-control), and an Injector whose one rule matches another
// operation, so that every request is matched against it and passes.
func BenchmarkHandlerCycleWith(b *testing.B) {
	idle, err := faults.New(faults.Options{})
	if err != nil {
		b.Fatal(err)
	}
	miss, err := faults.New(faults.Options{Config: faults.Config{Rules: []faults.Rule{
		{When: faults.When{Operations: []string{"ListQueues"}}, Then: faults.Then{Error: faults.CodeServerBusy}},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts server.Options
	}{
		{"none", server.Options{}},
		{"observe", server.Options{Observe: metrics.NewRecorder().Observe}},
		{"faults-idle", server.Options{Faults: idle}},
		{"faults-miss", server.Options{Faults: miss}},
	} {
		b.Run(c.name, func(b *testing.B) { handlerCycle(b, c.opts) })
	}
}
