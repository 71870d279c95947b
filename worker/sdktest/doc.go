// Package sdktest holds the tests of package worker that need the
// modules the root module does not require: the worker over azure.Queue
// and azq's REST server (through the Azure SDK), and the worker under
// azqtest.FaultyQueue's faults, counted by a metrics.Recorder. They are
// external tests, on the worker's exported API, with copies of the few
// helpers of worker's own tests they use.
//
// It is a module of its own that is never released (internal/release's
// testOnlyModules), in go.work so that the README's test command runs it.
package sdktest
