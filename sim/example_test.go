package sim_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/azqlib/azq/sim"
)

// A scenario as Go values: Poisson arrivals into consumers that wait in
// Receive, with work that always fits in the visibility timeout.
func ExampleRun() {
	sc := &sim.Scenario{
		Name:     "example",
		Seed:     1,
		Duration: sim.Duration(time.Hour),
		Producers: []sim.Producer{{
			Arrival: sim.Arrival{Kind: "poisson", Rate: 2},
		}},
		Consumers: []sim.Fleet{{
			Count:             5,
			BatchSize:         1,
			VisibilityTimeout: sim.Duration(time.Minute),
			Processing:        sim.Const(2 * time.Second),
			Listen:            sim.Listen{Kind: "receive"},
		}},
	}
	r, err := sim.Run(context.Background(), sc, sim.Options{})
	if err != nil {
		panic(err)
	}
	m := r.Messages
	fmt.Println("lost:", m.Lost, "duplicates:", m.Duplicates)
	fmt.Println("every message completed:", m.Completed+m.InQueue == m.Put)
	fmt.Println("one Get per message:", r.Transactions.Count[sim.OpGet] == m.Deliveries)
	// Output:
	// lost: 0 duplicates: 0
	// every message completed: true
	// one Get per message: true
}

// The cost of idle polling: 200 listeners polling an empty queue once a
// second for 22 hours make 79,200 empty Gets each, as the Azure queue
// design guidance reckoned.
func ExampleParse() {
	sc, err := sim.Parse(strings.NewReader(`{
		"duration": "22h",
		"consumers": [{"count": 200, "processing": "1s", "listen": {"kind": "poll", "interval": "1s"}}],
		"price": {"perTenThousand": 0.01}
	}`))
	if err != nil {
		panic(err)
	}
	r, err := sim.Run(context.Background(), sc, sim.Options{})
	if err != nil {
		panic(err)
	}
	t := r.Transactions
	fmt.Printf("%d empty Gets, %d per listener, costing %.2f %s\n", t.EmptyGets, t.EmptyGets/200, t.Cost, t.Currency)
	// Output:
	// 15840000 empty Gets, 79200 per listener, costing 15.84 USD
}

// A sweep runs a scenario once per value of one parameter.
func ExampleRunSweep() {
	sc, err := sim.Parse(strings.NewReader(`{
		"seed": 1,
		"duration": "2h",
		"producers": [{"arrival": {"kind": "poisson", "rate": 1}}],
		"consumers": [{"count": 50, "batchSize": 1, "processing": {"kind": "constant", "value": "20s"},
		               "listen": {"kind": "receive"}}],
		"sweep": {"parameter": "consumers.0.visibilityTimeout", "values": ["10s", "30s"]}
	}`))
	if err != nil {
		panic(err)
	}
	res, err := sim.RunSweep(context.Background(), sc, sim.Options{}, nil)
	if err != nil {
		panic(err)
	}
	for i, r := range res.Reports {
		fmt.Printf("visibility timeout %s: duplicates %t\n", res.Values[i], r.Messages.Duplicates > 0)
	}
	// Output:
	// visibility timeout 10s: duplicates true
	// visibility timeout 30s: duplicates false
}
