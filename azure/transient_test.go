package azure_test

import (
	"fmt"
	"testing"

	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/internal/transient"
)

// An answer too large to read is not transient: the worker, which retries
// what transient.Is calls so, would meet the same answer again. (The case
// of internal/transient's table that needs package azure, here since
// azure left the root module.)
func TestResponseTooLargeIsNotTransient(t *testing.T) {
	for _, err := range []error{
		&azure.ResponseTooLargeError{},
		fmt.Errorf("get: %w", &azure.ResponseTooLargeError{Method: "GET", Path: "/q/messages", Limit: 1 << 20}),
	} {
		if transient.Is(err) {
			t.Errorf("transient.Is(%v) = true", err)
		}
	}
}
