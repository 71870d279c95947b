// Command azqsim simulates producers and consumers of an Azure-style queue
// over a real azq queue on a simulated clock (package sim), and reports
// what happened: duplicates, lost and expired messages, latency,
// throughput, queue depth, utilisation and the storage transactions it all
// cost.
//
// Usage:
//
//	go run ./cmd/azqsim examples/sim/quickstart.json
//	go run ./cmd/azqsim -seed 7 -out /tmp/run examples/sim/week-1000.json
//	go run ./cmd/azqsim -set consumers.0.count=50 examples/sim/quickstart.json
//	go run ./cmd/azqsim -sweep consumers.0.visibilityTimeout=30s,1m,5m examples/sim/quickstart.json
//
// The scenario is a JSON file (see examples/sim and the sim package's
// Scenario). azqsim prints the text summary on stdout and writes into -out
// (default azqsim-out/<scenario name>) report.txt, report.json,
// timeseries.csv, timeseries.json, latency.csv and the plots depth,
// latency, histogram and transactions (-format png or svg). -deliveries
// adds deliveries.csv, one line per delivery; -no-files writes nothing.
//
// -seed replaces the scenario's seed: the same seed gives the same report,
// byte for byte. -set path=value changes a parameter, named by its JSON
// path ("consumers.0.visibilityTimeout"), and may be repeated. A sweep,
// from the scenario's "sweep" or from -sweep path=v1,v2,..., runs the
// scenario once per value and writes sweep.txt, sweep.csv, sweep.json and
// the plot sweep.png of duplicates, latency and cost against the values,
// by default into a folder of its own, azqsim-out/<scenario
// name>-sweep-<parameter>, apart from the single run's.
//
// A progress bar goes to stderr (-q turns it off), with how fast the run
// went at the end. -version prints the azq release and the VCS revision
// azqsim was built from, as azqd -version does. azqsim exits with status
// 1 if a message was lost or the queue broke its semantics, after printing
// the report that says so.
package main
