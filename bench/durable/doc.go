// Package durable holds only benchmarks: azq's durable mode beside
// maragu.dev/goqite (a queue on SQLite, through the pure-Go driver
// modernc.org/sqlite) and go.etcd.io/bbolt, measured in the same run. It
// is a module of its own so that those libraries never enter azq's
// dependencies.
//
//	go test -run='^$' -bench=. -count=6 . | tee ../durable-compare.txt
package durable
