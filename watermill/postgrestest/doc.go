// Package postgrestest runs Watermill's universal Pub/Sub suite on
// azqwatermill over azq's PostgreSQL back end. It is a module of its own,
// outside the workspace and never released, so that the watermill
// module, which its users require, does not require the PostgreSQL back
// end and its driver: a requirement, even of tests only, would put pgx in
// every user's module graph and could raise the pgx they use.
//
//	cd watermill/postgrestest && GOWORK=off go test ./...
//
// The tests start a PostgreSQL server of their own (package pgtest), or
// use the one AZQ_POSTGRES_URL names.
package postgrestest
