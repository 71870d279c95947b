package main

import (
	"strings"
	"testing"

	"github.com/azqlib/azq/server"
)

// TestDevelopmentStorageNote: azqd says whether UseDevelopmentStorage=true
// reaches it, and points clients that refuse the shortcut at the full
// connection string, whenever it serves devstoreaccount1 with the
// well-known key; about other accounts it says nothing.
func TestDevelopmentStorageNote(t *testing.T) {
	dev := server.DevelopmentAccount()
	other := server.Account{Name: "other", Keys: []string{key1}}
	devOtherKey := server.Account{Name: "devstoreaccount1", Keys: []string{key1}}
	for _, c := range []struct {
		accounts []server.Account
		base     string
		want     string
	}{
		{[]server.Account{dev}, "http://127.0.0.1:10001", "UseDevelopmentStorage=true reaches devstoreaccount1 here; where a client refuses it"},
		{[]server.Account{other, dev}, "http://127.0.0.1:10001", "UseDevelopmentStorage=true reaches devstoreaccount1 here"},
		{[]server.Account{dev}, "http://127.0.0.1:41234", "UseDevelopmentStorage=true means http://127.0.0.1:10001/devstoreaccount1, not this address"},
		{[]server.Account{dev}, "https://127.0.0.1:10001", "UseDevelopmentStorage=true means http://127.0.0.1:10001/devstoreaccount1, not this address"},
		{[]server.Account{other}, "http://127.0.0.1:10001", ""},
		{[]server.Account{devOtherKey}, "http://127.0.0.1:10001", ""},
	} {
		got := developmentStorageNote(c.accounts, c.base)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("accounts %v at %s: %q, want %q", c.accounts, c.base, got, c.want)
		}
		if c.want != "" && !strings.Contains(got, "full connection string below") {
			t.Errorf("accounts %v at %s: %q does not point at the full connection string", c.accounts, c.base, got)
		}
	}
}

// TestStartUpExplainsUseDevelopmentStorage: azqd's start-up output says
// what UseDevelopmentStorage=true means for it, before the connection
// strings.
func TestStartUpExplainsUseDevelopmentStorage(t *testing.T) {
	d := start(t)
	for i, line := range d.printed {
		if strings.HasPrefix(line, "azqd: UseDevelopmentStorage=true means http://127.0.0.1:10001/devstoreaccount1, not this address") {
			if i+1 >= len(d.printed) || !strings.HasPrefix(d.printed[i+1], "devstoreaccount1: DefaultEndpointsProtocol=") {
				t.Errorf("the note is not followed by the connection string:\n%s", strings.Join(d.printed, "\n"))
			}
			return
		}
	}
	t.Errorf("azqd printed nothing about UseDevelopmentStorage=true:\n%s", strings.Join(d.printed, "\n"))
}
