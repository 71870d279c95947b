// Package sdktest holds the tests of package server that drive it with
// the Azure SDK for Go (azqueue, azcore), azqtest or package azure: the
// SDK fidelity tests, the raw-request tests that share their
// environment, and the examples and benchmarks that use a client; and
// the tests of azqtest that count with a metrics.Recorder (its
// FaultyQueue's and its Server's observations), which would otherwise
// make the azqtest module require Prometheus.
//
// It is a module of its own that is never released (internal/release's
// testOnlyModules), in go.work so that the README's test command runs it,
// and so that the root module, which holds package server, requires
// neither the Azure SDK nor Prometheus.
package sdktest
