package main

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/server/admin"
)

// adminHints are the admin endpoints' refusals' hints, in azqd's flags.
var adminHints = admin.Hints{
	Clock:  "start azqd with -clock-control",
	Reset:  "start azqd with -clock-control",
	Faults: "start azqd with -faults FILE or -fault-control",
	Seed:   "by the -faults file",
	UI:     "start azqd with -ui",
	Endpoints: "see GET /_azq/health and /_azq/metrics; with -clock-control GET /_azq/clock, POST /_azq/clock/advance?by=, " +
		"POST /_azq/clock/set?to=, POST /_azq/reset; with -faults or -fault-control GET, POST and DELETE /_azq/faults",
	Remote: "start azqd with -admin-remote to serve them to others (they take no credentials)",
	Host:   "start azqd with -allow-host NAME to allow a name",
}

// adminHandler serves azqd's own endpoints under /_azq/ (server/admin):
// the health check, always, which asks the back ends below; the clock
// endpoints and reset with -clock-control, which is what makes a test
// run reproducible; the fault rules with -faults or -fault-control; the
// web page with -ui; the metrics unless -metrics=false.
type adminHandler struct {
	*admin.Handler
	// storage is each durable account's storage, by name; empty without
	// -data.
	storage map[string]storageState
	// databases are the back ends that keep each account's queues in a
	// database, by name: with -postgres, every account's.
	databases map[string]pinger
}

// newAdminHandler returns the admin endpoints of opts, with azqd's guard
// (newAdminGuard) and hints, and a health check that asks the storage and
// the databases of services, logging a database's failure to logger (nil:
// no log).
func newAdminHandler(cfg *config, opts admin.Options, services map[string]azq.QueueService, logger *slog.Logger) *adminHandler {
	h := &adminHandler{storage: storageStates(services), databases: pingers(services, logger)}
	opts.Guard = newAdminGuard(cfg)
	opts.Hints = adminHints
	opts.Health = h.health
	h.Handler = admin.New(opts)
	return h
}

// storageState is what the health check asks of a back end that keeps
// its queues in storage of its own: a durable azq.Service has it.
type storageState interface {
	DurableState() (azq.DurableState, bool)
}

// storageStates returns the back ends that report their storage's state,
// as the health check sees them; the others are not asked.
func storageStates(services map[string]azq.QueueService) map[string]storageState {
	m := make(map[string]storageState, len(services))
	for name, s := range services {
		if st, ok := s.(storageState); ok {
			m[name] = st
		}
	}
	return m
}

// health is the health check's question: why an account's storage failed
// or its database does not answer, or nil.
func (h *adminHandler) health(ctx context.Context) error {
	reason := h.storageFailure()
	if reason == "" {
		reason = h.databaseFailure(ctx)
	}
	if reason != "" {
		return errors.New(reason)
	}
	return nil
}

// storageFailure returns why the storage of an account failed, or "" if
// none did. A durable Service that failed refuses every request (500)
// until azqd restarts, so the health check must say so.
func (h *adminHandler) storageFailure() string {
	names := make([]string, 0, len(h.storage))
	for name := range h.storage {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if st, ok := h.storage[name].DurableState(); ok && st.Failure != nil {
			return "account " + name + ": " + st.Failure.Error()
		}
	}
	return ""
}

// databaseFailure returns why the database of an account does not
// answer, or "" if every one does, within healthPingTimeout. Requests to
// such an account fail with 503 ServerBusy until it answers again, as
// they would in Azure while a server is busy, so the health check says so.
func (h *adminHandler) databaseFailure(ctx context.Context) string {
	names := make([]string, 0, len(h.databases))
	for name := range h.databases {
		names = append(names, name)
	}
	slices.Sort(names)
	ctx, cancel := context.WithTimeout(ctx, healthPingTimeout)
	defer cancel()
	for _, name := range names {
		if err := h.databases[name].Ping(ctx); err != nil {
			if ctx.Err() != nil {
				return "account " + name + ": the database did not answer within " + healthPingTimeout.String()
			}
			return "account " + name + ": " + err.Error()
		}
	}
	return ""
}
