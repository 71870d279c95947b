// Command pgserve starts a throwaway PostgreSQL server (package pgtest's,
// durable: fsync and synchronous commits on), prints its URL on a line of
// its own, and stops it and removes its directory when its standard input
// ends or it is interrupted. bench/postgres/run uses it to run every
// round of the benchmarks against one server.
package main

import (
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/azqlib/azq/postgres/pgtest"
)

func main() {
	srv, err := pgtest.New(pgtest.Options{Durable: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(srv.URL())
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	select {
	case <-done:
	case <-sig:
	}
	if err := srv.Close(); err != nil {
		log.Fatal(err)
	}
}
