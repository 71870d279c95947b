// A program of a user's module that imports the simulator, which the
// root module held up to v0.1.0 and a module of its own holds after it:
// built with either, it finds package sim in exactly one module.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/azqlib/azq"
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
	fmt.Println("azq", azq.Version)
}
