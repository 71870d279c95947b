package pgtest_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// A schema of a test is its own, and goes when the test ends.
func TestNewSchema(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := context.Background()
	var name string
	t.Run("inner", func(t *testing.T) {
		name = srv.NewSchema(t)
		conn, err := pgx.Connect(ctx, srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name+"; CREATE TABLE "+name+".t (a int)"); err != nil {
			t.Fatal(err)
		}
	})
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("schema %s is still there after its test", name)
	}
}

// A server of a test's own keeps its data across a restart, and its
// clients see their connections end when it stops.
func TestStopAndRestart(t *testing.T) {
	if os.Getenv(pgtest.EnvURL) != "" {
		t.Skip("starts a server of its own")
	}
	srv := pgtest.Start(t, pgtest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (a int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a query on a stopped server succeeded")
	}
	conn.Close(ctx)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var a int
	if err := conn.QueryRow(ctx, "SELECT a FROM kept").Scan(&a); err != nil || a != 42 {
		t.Fatalf("after the restart: %d, %v", a, err)
	}
}

// A synchronous standby has every commit the primary acknowledged, and
// once the primary has crashed and the standby is promoted, it takes
// writes; a connection string naming both finds the one that does.
func TestReplicatedFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers")
	}
	primary, standby := pgtest.StartReplicated(t, pgtest.ReplicatedOptions{Synchronous: true})
	ctx := context.Background()
	both := fmt.Sprintf("host=%s,%s port=%d,%d user=postgres dbname=postgres sslmode=disable target_session_attrs=read-write",
		primary.Host(), standby.Host(), primary.Port(), standby.Port())
	conn, err := pgx.Connect(ctx, both)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (a int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	sc, err := pgx.Connect(ctx, standby.URL())
	if err != nil {
		t.Fatal(err)
	}
	var readOnly string
	if err := sc.QueryRow(ctx, "SHOW transaction_read_only").Scan(&readOnly); err != nil || readOnly != "on" {
		t.Fatalf("the standby before its promotion: transaction_read_only %q, %v", readOnly, err)
	}
	sc.Close(ctx)

	if err := primary.Crash(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, both); err == nil {
		t.Fatal("a read-write connection while the primary is down and the standby not promoted")
	}
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, both)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "INSERT INTO kept VALUES (43)"); err != nil {
		t.Fatalf("a write after the promotion: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM kept WHERE a IN (42, 43)").Scan(&n); err != nil || n != 2 {
		t.Fatalf("after the failover: %d rows, %v; want both", n, err)
	}
}
