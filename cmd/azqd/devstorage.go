package main

import (
	"slices"

	"github.com/azqlib/azq/internal/devstore"
	"github.com/azqlib/azq/server"
)

// developmentStorageNote is what azqd says at start-up about Azure's
// shortcut connection string UseDevelopmentStorage=true, which stands for
// devstoreaccount1 with its well-known key at
// http://127.0.0.1:10001/devstoreaccount1: whether the shortcut reaches
// the account azqd serves at base, and that clients which refuse it (the
// Go SDK does) take the full connection string azqd prints. It is empty
// when azqd does not serve that account with that key.
func developmentStorageNote(accounts []server.Account, base string) string {
	served := slices.ContainsFunc(accounts, func(a server.Account) bool {
		return a.Name == devstore.AccountName && slices.Contains(a.Keys, devstore.AccountKey)
	})
	if !served {
		return ""
	}
	shortcut := devstore.QueueEndpoint("http", devstore.Host)
	if base+"/"+devstore.AccountName == shortcut {
		return "azqd: UseDevelopmentStorage=true reaches " + devstore.AccountName + " here; where a client refuses it " +
			"(the Go SDK's azqueue does; azq's package azure does not), give it the full connection string below"
	}
	return "azqd: UseDevelopmentStorage=true means " + shortcut + ", not this address: give clients the full connection string below"
}
