package azure_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/queuetest"
)

// The adapter keeps the queue contract against azq's REST server over
// loopback, signing with Shared Key, on the server's mock clock.
func TestContractAgainstServer(t *testing.T) {
	srv := azqtest.NewServer(t)
	svc, err := azure.NewServiceFromConnectionString(srv.ConnectionString, &azure.Options{Clock: srv.Clock})
	if err != nil {
		t.Fatal(err)
	}
	queuetest.RunQueueTests(t, func(t *testing.T) queuetest.Fixture {
		return queuetest.Fixture{Queue: createQueue(t, svc), Clock: srv.Clock}
	})
}

// The Service keeps the service contract against azq's REST server, a
// server per subtest, on the server's mock clock.
func TestServiceContractAgainstServer(t *testing.T) {
	queuetest.RunServiceTests(t, func(t *testing.T) azq.QueueService {
		srv := azqtest.NewServer(t)
		svc, err := azure.NewServiceFromConnectionString(srv.ConnectionString, &azure.Options{Clock: srv.Clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { svc.Close() })
		return svc
	})
}

// And against Azure itself, on real time, when
// AZQ_TEST_AZURE_CONNECTION_STRING names a storage account. The subtests
// name their queues with random prefixes and delete them afterwards. CI
// has no account and skips this.
func TestServiceContractAgainstAzure(t *testing.T) {
	conn := os.Getenv(azureConnectionStringEnv)
	if conn == "" {
		t.Skip(azureConnectionStringEnv + " is not set")
	}
	queuetest.RunServiceTests(t, func(t *testing.T) azq.QueueService {
		svc, err := azure.NewServiceFromConnectionString(conn, nil)
		if err != nil {
			t.Fatal(err)
		}
		return svc
	})
}

// AzureConnectionStringEnv names the environment variable that points the
// contract tests at a real storage account.
const azureConnectionStringEnv = "AZQ_TEST_AZURE_CONNECTION_STRING"

// The adapter keeps the contract against Azure itself, on real time, when
// AZQ_TEST_AZURE_CONNECTION_STRING names a storage account. Each subtest
// creates a queue with a random name and deletes it afterwards. CI has no
// account and skips this.
func TestContractAgainstAzure(t *testing.T) {
	conn := os.Getenv(azureConnectionStringEnv)
	if conn == "" {
		t.Skip(azureConnectionStringEnv + " is not set")
	}
	svc, err := azure.NewServiceFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	queuetest.RunQueueTests(t, func(t *testing.T) queuetest.Fixture {
		return queuetest.Fixture{Queue: createQueue(t, svc)}
	})
}

// createQueue creates a queue with a random name in svc and deletes it
// when the test ends.
func createQueue(t *testing.T, svc *azure.Service) *azure.Queue {
	t.Helper()
	var b [8]byte
	rand.Read(b[:])
	name := "azqtest-" + hex.EncodeToString(b[:])
	q, created, err := svc.CreateQueue(context.Background(), name, nil)
	if err != nil || !created {
		t.Fatalf("creating queue %s: created %v, %v", name, created, err)
	}
	t.Cleanup(func() {
		if err := svc.DeleteQueue(context.Background(), name); err != nil {
			t.Errorf("deleting queue %s: %v", name, err)
		}
	})
	return q
}
