package sdktest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/server"
)

// keeper is an in-memory back end that keeps its account's service
// properties itself, as a PostgreSQL Service does in its schema: every
// server given it shares one document.
type keeper struct {
	*azq.Service
	mu    sync.Mutex
	doc   []byte
	reads int
	fail  error
}

var _ server.PropertiesKeeper = (*keeper)(nil)

func (k *keeper) ServiceProperties(ctx context.Context) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fail != nil {
		return nil, k.fail
	}
	k.reads++
	return append([]byte(nil), k.doc...), nil
}

func (k *keeper) UpdateServiceProperties(ctx context.Context, update func([]byte) ([]byte, error)) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fail != nil {
		return k.fail
	}
	var stored []byte
	if k.doc != nil {
		stored = append([]byte(nil), k.doc...)
	}
	next, err := update(stored)
	if err != nil {
		return err
	}
	k.doc = next
	return nil
}

// Two servers on one back end that keeps the service properties agree on
// them at once: what one sets, the other answers with and applies to
// CORS preflights and actual requests; a partial document set through
// one keeps the sections the other set; a bad document changes nothing;
// Reset restores the defaults for both; SaveProperties is not called.
func TestServersOnOneKeeperAgree(t *testing.T) {
	k := &keeper{Service: azq.NewService()}
	var saved savedDocs
	opts := func() server.Options {
		return server.Options{Services: map[string]azq.QueueService{"devstoreaccount1": k}, SaveProperties: saved.save}
	}
	a, b := newRawEnv(t, opts()), newRawEnv(t, opts())
	props := acct + "/?restype=service&comp=properties"
	defaults := a.do(t, "GET", props, "", nil, nil).body

	if r := a.do(t, "PUT", props, "", strings.NewReader(someProperties), nil); r.status != http.StatusAccepted {
		t.Fatalf("set through a: %d %s", r.status, r.body)
	}
	want := a.do(t, "GET", props, "", nil, nil).body
	if want == defaults {
		t.Fatal("the properties did not change")
	}
	if got := b.do(t, "GET", props, "", nil, nil).body; got != want {
		t.Fatalf("b answers\n%s\nwant what a set\n%s", got, want)
	}
	preflight := map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "PUT"}
	if r := b.do(t, "OPTIONS", acct+"/", "", nil, preflight); r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("preflight at b under a's CORS rule: %d %v", r.status, r.header)
	}
	if r := b.do(t, "GET", acct+"?comp=list", "", nil, map[string]string{"Origin": "https://app.example"}); r.header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("a request with an Origin at b: %d %v", r.status, r.header)
	}

	// Only the CORS rules, through b: a's logging settings stay.
	noCors := `<StorageServiceProperties><Cors></Cors></StorageServiceProperties>`
	if r := b.do(t, "PUT", props, "", strings.NewReader(noCors), nil); r.status != http.StatusAccepted {
		t.Fatalf("set through b: %d %s", r.status, r.body)
	}
	got := a.do(t, "GET", props, "", nil, nil).body
	if !strings.Contains(got, "<Read>true</Read>") || !strings.Contains(got, "<Days>3</Days>") || strings.Contains(got, "CorsRule") {
		t.Fatalf("after b cleared the CORS rules, a answers\n%s", got)
	}
	if r := a.do(t, "OPTIONS", acct+"/", "", nil, preflight); r.status != http.StatusForbidden {
		t.Fatalf("preflight at a after b cleared the rules: %d", r.status)
	}

	before := b.do(t, "GET", props, "", nil, nil).body
	checkError(t, a.do(t, "PUT", props, "", strings.NewReader("<StorageServiceProperties><Cors>"), nil), 400, "InvalidXmlDocument")
	if got := b.do(t, "GET", props, "", nil, nil).body; got != before {
		t.Fatalf("a bad document changed the properties:\n%s\nwant\n%s", got, before)
	}

	if err := a.srv.Reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := b.do(t, "GET", props, "", nil, nil).body; got != defaults {
		t.Fatalf("after Reset b answers\n%s\nwant the defaults\n%s", got, defaults)
	}
	if doc := saved.get("devstoreaccount1"); doc != nil {
		t.Fatalf("SaveProperties was called for an account whose back end keeps them:\n%s", doc)
	}
	if err := a.srv.LoadProperties("devstoreaccount1", []byte(someProperties)); err == nil {
		t.Fatal("LoadProperties took properties that the back end keeps")
	}
}

// When the back end fails to read or store the properties, the requests
// that need them fail with its error; a request with an Origin is still
// served, without CORS headers; and requests without one do not ask.
func TestKeeperFailure(t *testing.T) {
	k := &keeper{Service: azq.NewService()}
	e := newRawEnv(t, server.Options{Services: map[string]azq.QueueService{"devstoreaccount1": k}})
	props := acct + "/?restype=service&comp=properties"
	if r := e.do(t, "PUT", props, "", strings.NewReader(someProperties), nil); r.status != http.StatusAccepted {
		t.Fatalf("set: %d %s", r.status, r.body)
	}
	k.mu.Lock()
	k.reads = 0
	k.mu.Unlock()
	if r := e.do(t, "GET", acct+"?comp=list", "", nil, nil); r.status != 200 {
		t.Fatalf("list: %d", r.status)
	}
	k.mu.Lock()
	reads := k.reads
	k.fail = &azq.Error{Code: "ServerBusy", StatusCode: http.StatusServiceUnavailable, Message: "the database is unavailable"}
	k.mu.Unlock()
	if reads != 0 {
		t.Fatalf("a request without an Origin read the properties %d times", reads)
	}
	checkError(t, e.do(t, "GET", props, "", nil, nil), 503, "ServerBusy")
	checkError(t, e.do(t, "PUT", props, "", strings.NewReader(someProperties), nil), 503, "ServerBusy")
	checkError(t, e.do(t, "OPTIONS", acct+"/", "", nil, map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "PUT"}), 503, "ServerBusy")
	r := e.do(t, "GET", acct+"?comp=list", "", nil, map[string]string{"Origin": "https://app.example"})
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("a request with an Origin while the properties cannot be read: %d %v", r.status, r.header)
	}
	if err := e.srv.Reset(context.Background()); !errors.Is(err, k.fail) {
		t.Fatalf("Reset while the back end fails: %v", err)
	}
}
