// Package devstore holds what Azure's storage emulators publish about
// their development account, which azq's server, its Azure adapter and
// azqd all name: the account, its key and where the shortcut connection
// string UseDevelopmentStorage=true points.
package devstore

import (
	"net"
	"strconv"
)

const (
	// AccountName is the development account's name.
	AccountName = "devstoreaccount1"
	// AccountKey is the development account's key. It is public by
	// design: tools and SDKs hard-code it.
	AccountKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
	// QueuePort is the queue service's port on the emulator's host
	// (Azurite's and the older storage emulator's; blobs are on 10000,
	// tables on 10002).
	QueuePort = 10001
	// Host is where UseDevelopmentStorage=true looks for the emulator
	// unless DevelopmentStorageProxyUri names another host.
	Host = "127.0.0.1"
)

// QueueEndpoint is the development account's queue endpoint on host over
// scheme, as UseDevelopmentStorage=true means it:
// scheme://host:10001/devstoreaccount1.
func QueueEndpoint(scheme, host string) string {
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(QueuePort)) + "/" + AccountName
}
