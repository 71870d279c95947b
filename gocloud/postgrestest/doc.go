// Package postgrestest runs gocloud's conformance suite for pubsub drivers
// on azqpubsub over azq's PostgreSQL back end. It is a module of its own,
// outside the workspace and never released, so that the gocloud module,
// which its users require, does not require the PostgreSQL back end and
// its driver: a requirement, even of tests only, would put pgx in every
// user's module graph and could raise the pgx they use.
//
//	cd gocloud/postgrestest && GOWORK=off go test ./...
//
// The tests start a PostgreSQL server of their own (package pgtest), or
// use the one AZQ_POSTGRES_URL names.
package postgrestest
