package faults_test

import (
	"fmt"

	"github.com/azqlib/azq/faults"
	"github.com/benbjohnson/clock"
)

// Totals keep counting across changes of the rules and the throttle, as a
// metrics scrape needs; Status shows the rules there are now.
func ExampleInjector_Totals() {
	in, err := faults.New(faults.Options{Clock: clock.NewMock(), Config: faults.Config{
		Rules:    []faults.Rule{{Name: "busy", When: faults.When{Times: 1}, Then: faults.Then{Error: faults.CodeServerBusy}}},
		Throttle: &faults.Throttle{AccountRequestsPerSecond: 2},
	}})
	if err != nil {
		panic(err)
	}
	list := faults.Request{Operation: "ListQueues", Account: "devstoreaccount1"}
	for i := 0; i < 3; i++ {
		in.Decide(list) // the rule fires once; the third request is throttled
	}
	in.Clear()
	in.SetThrottle(nil)
	tot, st := in.Totals(), in.Status()
	fmt.Println("rules now:", len(st.Rules), "hits of busy:", tot.Hits["busy"], "throttled:", tot.Throttled)
	// Output:
	// rules now: 0 hits of busy: 1 throttled: 1
}
