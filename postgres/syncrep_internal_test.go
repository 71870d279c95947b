package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// The warning of a canceled wait for a synchronous standby is known by
// its severity, SQLSTATE and the server's function, whatever language
// lc_messages gives its words, and no other notice is taken for it.
func TestUnreplicatedCommit(t *testing.T) {
	const (
		detail   = "The transaction has already committed locally, but might not have been replicated to the standby."
		function = "SyncRepWaitForLSN"
	)
	for _, tc := range []struct {
		name string
		n    pgconn.Notice
		want bool
	}{
		{"canceled", pgconn.Notice{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: "01000",
			Message: "canceling wait for synchronous replication due to user request", Detail: detail, File: "syncrep.c", Routine: function}, true},
		{"terminated", pgconn.Notice{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: "57P01",
			Message: "canceling the wait for synchronous replication and terminating connection due to administrator command", Detail: detail, Routine: function}, true},
		{"translated", pgconn.Notice{Severity: "WARNUNG", SeverityUnlocalized: "WARNING", Code: "01000",
			Message: "breche Warten auf synchrone Replikation ab wegen Benutzeraufforderung",
			Detail:  "Die Transaktion wurde lokal bereits committet, aber möglicherweise noch nicht zum Standby repliziert.", Routine: function}, true},
		{"no routine", pgconn.Notice{Severity: "WARNING", Code: "01000", Message: "canceling wait for synchronous replication due to user request", Detail: detail}, true},
		{"another warning", pgconn.Notice{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: "01000",
			Message: "there is no transaction in progress", Routine: "EndTransactionBlock"}, false},
		{"a notice", pgconn.Notice{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000", Message: "relation already exists, skipping", Routine: function}, false},
		{"another code", pgconn.Notice{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: "25P01", Detail: detail, Routine: function}, false},
		{"translated, no routine", pgconn.Notice{Severity: "WARNUNG", SeverityUnlocalized: "WARNING", Code: "01000",
			Detail: "Die Transaktion wurde lokal bereits committet."}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unreplicatedCommit(&tc.n); got != tc.want {
				t.Errorf("unreplicatedCommit(%+v) = %v, want %v", tc.n, got, tc.want)
			}
		})
	}
}
