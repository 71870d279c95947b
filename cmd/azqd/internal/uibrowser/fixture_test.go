package uibrowser_test

import (
	"testing"

	"github.com/azqlib/azq/internal/uitest"
	"github.com/azqlib/azq/ui"
)

// testNow and prefix are the fixture's (internal/uitest).
var testNow = uitest.Now

const prefix = uitest.Prefix

// fixture is uitest's, as package ui's own tests wrap it.
type fixture struct{ *uitest.Fixture }

func newFixture(t testing.TB, withAdvance bool, opts ui.Options) *fixture {
	t.Helper()
	return &fixture{uitest.New(t, withAdvance, opts)}
}
