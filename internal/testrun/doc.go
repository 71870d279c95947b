// Command testrun runs the repository's tests as its README says, and
// says what the run left out.
//
// From the root of a clone:
//
//	go run ./internal/testrun            # the tests a user runs: about a minute warm
//	go run ./internal/testrun -count=1   # the same, every test run again, none from go test's cache
//	go run ./internal/testrun -long      # and then the long runs, as CI does
//
// It runs go test -json with the race detector over the root module and
// the modules of their own that go.work adds (./... ./cmd/azqd/...
// ./cmd/azqload/... ./sim/... ./cmd/azqsim/... ./metrics/... ./azure/...
// ./azqtest/... ./examples/... ./server/sdktest/... ./worker/sdktest/...),
// two packages a core at once (-p; many tests wait on processes, sockets and the disk). It first
// says what it runs and, from go list, how many packages; a first run's
// module downloads come there, and its compiling takes minutes before
// the first package ends. Then it prints each package's line as go test
// does, numbered as the packages end ([12/47]), and the output of each
// test that failed. go test prints nothing of a passing package but its
// "ok" line, so it cannot say which tests a package skipped: testrun
// lists them at the end, each with the reason it gave (its t.Skip
// message), grouped by reason, and apart from them the long runs (crash
// loops, soak tests, long property runs and sweeps, which skip themselves
// unless AZQ_LONG=1, see internal/longrun). With -long it then runs
// exactly those, with AZQ_LONG=1. -count N is go test's: each test runs
// N times, and no result comes from go test's cache.
//
// The race detector needs cgo, and so a C compiler; without one (go env
// CGO_ENABLED is 0) testrun runs the tests without it and says so, where
// go test -race would refuse to start. -race=false leaves it out anyway.
// Further arguments are package patterns, in place of the default ones.
//
// It exits with status 1 if a test or a build failed.
package main
