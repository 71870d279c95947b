package sdktest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/sas"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/queuetest"
	"github.com/azqlib/azq/server"
)

// front is a server whose development account is served by another
// keeper of the service contract: package azure's Service, over a second
// azq server (the upstream). Every request to the front goes through the
// contract, none through the in-memory back end's extras.
type front struct {
	upstream *azqtest.Server
	backend  *azure.Service
	srv      *server.Server
	client   *azure.Service // talks to the front
}

func newFront(t *testing.T) *front {
	t.Helper()
	up := azqtest.NewServer(t)
	backend, err := azure.NewServiceFromConnectionString(up.ConnectionString, &azure.Options{Clock: up.Clock})
	if err != nil {
		t.Fatal(err)
	}
	acct := server.DevelopmentAccount()
	srv := server.New(server.Options{Clock: up.Clock, Services: map[string]azq.QueueService{acct.Name: backend}})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	client, err := azure.NewServiceFromConnectionString(acct.ConnectionString(hs.URL+"/"+acct.Name), &azure.Options{Clock: up.Clock})
	if err != nil {
		t.Fatal(err)
	}
	return &front{upstream: up, backend: backend, srv: srv, client: client}
}

// A server keeps the service contract on a back end other than
// *azq.Service: the REST API served over package azure's Service, which
// has no AppendGet, passes the whole suite, its errors keeping Azure's
// codes and statuses on the way through.
func TestServiceContractOnAnotherBackEnd(t *testing.T) {
	queuetest.RunServiceTests(t, func(t *testing.T) azq.QueueService { return newFront(t).client })
}

// Service gives the *azq.Service of an account only when that is its back
// end; QueueService gives the back end whatever it is.
func TestServiceAndQueueService(t *testing.T) {
	f := newFront(t)
	if got := f.srv.Service("devstoreaccount1"); got != nil {
		t.Fatalf("Service of an account on an azure.Service = %v, want nil", got)
	}
	if got := f.srv.QueueService("devstoreaccount1"); got != azq.QueueService(f.backend) {
		t.Fatalf("QueueService = %v, want the azure.Service it was given", got)
	}
	if got := f.srv.QueueService("nosuchaccount"); got != nil {
		t.Fatalf("QueueService of no account = %v", got)
	}
	mem := server.New(server.Options{})
	defer mem.Close()
	if mem.Service("devstoreaccount1") == nil || mem.QueueService("devstoreaccount1") != azq.QueueService(mem.Service("devstoreaccount1")) {
		t.Fatal("an in-memory account's Service and QueueService are not its *azq.Service")
	}
}

// Reset deletes the queues of any back end, through the contract.
func TestResetOnAnotherBackEnd(t *testing.T) {
	f := newFront(t)
	ctx := context.Background()
	for _, name := range []string{"one", "two"} {
		if _, _, err := f.client.CreateQueue(ctx, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.srv.Reset(ctx); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	page, err := f.upstream.Service.ListQueues(ctx, azq.ListQueuesOptions{})
	if err != nil || len(page.Queues) != 0 {
		t.Fatalf("the back end's queues after Reset: %v, %v", page.Queues, err)
	}
}

// A service SAS that names a stored access policy is checked against the
// policy the back end keeps, through AccessPolicies.
func TestSignedIdentifierOnAnotherBackEnd(t *testing.T) {
	f := newFront(t)
	ctx := context.Background()
	q, _, err := f.client.CreateQueue(ctx, "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(ctx, "hello", nil); err != nil {
		t.Fatal(err)
	}
	// The SAS carries real times; the policy's are near them.
	now := time.Now().UTC().Truncate(time.Second)
	policy := azq.AccessPolicy{ID: "readers", Start: now.Add(-time.Hour), Expiry: now.Add(time.Hour), Permission: "r"}
	if err := q.SetAccessPolicies(ctx, []azq.AccessPolicy{policy}); err != nil {
		t.Fatal(err)
	}
	acct := server.DevelopmentAccount()
	cred, err := azqueue.NewSharedKeyCredential(acct.Name, acct.Keys[0])
	if err != nil {
		t.Fatal(err)
	}
	params, err := sas.QueueSignatureValues{Identifier: "readers", QueueName: "jobs"}.SignWithSharedKey(cred)
	if err != nil {
		t.Fatal(err)
	}
	u := q.Client().URL()
	endpoint := u[:len(u)-len("/jobs")]
	peeker, err := azure.NewQueueFromConnectionString("QueueEndpoint="+endpoint+";SharedAccessSignature="+params.Encode(), "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := peeker.Peek(ctx, 1)
	if err != nil || len(ms) != 1 || ms[0].Content != "hello" {
		t.Fatalf("Peek with the policy's SAS = %v, %v", ms, err)
	}
	// The policy grants reading only, and removing it revokes the token.
	var ae *azq.Error
	if _, err := peeker.Put(ctx, "x", nil); !errors.As(err, &ae) || ae.StatusCode != 403 {
		t.Fatalf("Put with a read-only policy's SAS = %v, want 403", err)
	}
	if err := q.SetAccessPolicies(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := peeker.Peek(ctx, 1); !errors.As(err, &ae) || ae.StatusCode != 403 {
		t.Fatalf("Peek after the policy was removed = %v, want 403", err)
	}
}

// azq's server can stand in front of any back end of the service
// contract. Here it serves, under the development account, the queues of
// another account that package azure reaches (in a real deployment, a
// storage account in Azure; here a second in-process server), and injects
// a fault into the requests it passes on: a client's retries can be tried
// against a real service's queues.
func ExampleOptions_services() {
	upstreamSrv := server.New(server.Options{})
	upstream := httptest.NewServer(upstreamSrv)
	defer upstream.Close()
	acct := server.DevelopmentAccount()
	backend, err := azure.NewServiceFromConnectionString(acct.ConnectionString(upstream.URL+"/"+acct.Name), nil)
	if err != nil {
		panic(err)
	}

	// The front refuses the first Put Message it is sent.
	inj, _ := faults.New(faults.Options{Config: faults.Config{Rules: []faults.Rule{
		{When: faults.When{Operations: []string{"PutMessage"}, Times: 1}, Then: faults.Then{Error: "QueueDisabled", Status: 409}},
	}}})
	front := server.New(server.Options{Services: map[string]azq.QueueService{acct.Name: backend}, Faults: inj})
	hs := httptest.NewServer(front)
	defer hs.Close()

	ctx := context.Background()
	client, _ := azure.NewServiceFromConnectionString(acct.ConnectionString(hs.URL+"/"+acct.Name), nil)
	jobs, _, err := client.CreateQueue(ctx, "jobs", nil)
	if err != nil {
		panic(err)
	}
	_, err = jobs.Put(ctx, "refused", nil)
	var ae *azq.Error
	if errors.As(err, &ae) {
		fmt.Println("first Put:", ae.Code)
	}
	if _, err := jobs.Put(ctx, "through the front", nil); err != nil {
		panic(err)
	}
	// The message is in the back end's queue.
	ms, _ := upstreamSrv.Service(acct.Name).Named("jobs").Peek(ctx, 32)
	fmt.Println("in the back end:", ms[0].Content)
	// Output:
	// first Put: QueueDisabled
	// in the back end: through the front
}

// A Services entry that holds a nil pointer (a *azq.Service or
// *azure.Service variable never assigned) is refused by New with a panic
// that names the account and says what is wrong, rather than a nil
// pointer dereference in the back end. A nil entry, like a missing one,
// gets the default in-memory back end.
func TestNewRefusesANilBackEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		svc  azq.QueueService
	}{
		{"nil *azq.Service", (*azq.Service)(nil)},
		{"nil *azure.Service", (*azure.Service)(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got any
			func() {
				defer func() { got = recover() }()
				server.New(server.Options{Services: map[string]azq.QueueService{"devstoreaccount1": tc.svc}})
			}()
			if got == nil {
				t.Fatal("New accepted a nil back end")
			}
			msg := fmt.Sprint(got)
			if _, ok := got.(runtime.Error); ok || !strings.Contains(msg, `"devstoreaccount1"`) || !strings.Contains(msg, tc.name) {
				t.Fatalf("New panicked with %q (%T), want a message naming the account and the %s", msg, got, tc.name)
			}
		})
	}
	srv := server.New(server.Options{Services: map[string]azq.QueueService{"devstoreaccount1": nil}})
	defer srv.Close()
	if srv.Service("devstoreaccount1") == nil {
		t.Fatal("a nil Services entry did not get the in-memory back end")
	}
}
