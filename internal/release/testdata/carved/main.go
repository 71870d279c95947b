// A program of a user's module that imports the simulator, the metrics
// and the Azure back end, which the root module held up to v0.1.0 and
// modules of their own hold after it: built with either, it finds each
// package in exactly one module.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/metrics"
	"github.com/azqlib/azq/observe"
	"github.com/azqlib/azq/sim"
)

const scenario = `{
	"name": "carved",
	"seed": 1,
	"duration": "30m",
	"producers": [{"arrival": {"kind": "poisson", "rate": 2}}],
	"consumers": [{"count": 5, "batchSize": 4, "processing": "1s", "listen": {"kind": "poll", "interval": "2s"}}]
}`

func main() {
	sc, err := sim.Parse(strings.NewReader(scenario))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("sim: scenario", sc.Name)

	rec := metrics.NewRecorder()
	rec.Observe(observe.Observation{Operation: "PutMessage", Outcome: observe.Success})
	s := rec.Snapshot()
	fmt.Println("metrics:", s.Count("PutMessage", ""), "PutMessage")

	var tooLarge *azure.ResponseTooLargeError
	if err := fmt.Errorf("get: %w", &azure.ResponseTooLargeError{Method: "GET", Path: "/q/messages", Limit: 1}); errors.As(err, &tooLarge) {
		fmt.Println("azure: answer too large")
	}
	fmt.Println("azq", azq.Version)
}
