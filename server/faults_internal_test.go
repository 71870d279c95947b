package server

import (
	"slices"
	"testing"

	"github.com/azqlib/azq/faults"
)

// The rules name the operations the server classifies requests into, all
// of them and by the same names.
func TestFaultOperationsAreTheServers(t *testing.T) {
	var names []string
	for op := operation(1); int(op) < len(operations); op++ {
		if op != opPreflight {
			names = append(names, op.String())
		}
	}
	want := slices.Clone(faults.Operations)
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("server operations %v\nfaults.Operations %v", names, want)
	}
}

// The injected InternalError has the message the server gives its own.
func TestInjectedInternalErrorMessageIsTheServers(t *testing.T) {
	th := faults.Then{Error: faults.CodeInternalError}
	if got, want := th.AzureError().Message, errorMessage(errInternal()); got != want {
		t.Fatalf("faults: %q, server: %q", got, want)
	}
}
