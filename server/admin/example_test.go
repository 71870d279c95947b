package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/server"
	"github.com/azqlib/azq/server/admin"
	"github.com/benbjohnson/clock"
)

// A server of the development account on a mock clock, with the admin
// endpoints beside its Azure API: another process moves the clock and
// adds a fault rule over HTTP.
func Example() {
	mock := clock.NewMock()
	mock.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	inj, err := faults.New(faults.Options{Clock: mock})
	if err != nil {
		panic(err)
	}
	api := server.New(server.Options{Accounts: []server.Account{server.DevelopmentAccount()}, Clock: mock, Faults: inj, AllowAnonymous: true})
	defer api.Close()
	h := admin.New(admin.Options{Clock: admin.NewClock(mock, nil), Reset: api.Reset, Faults: inj, Version: "example"})
	srv := httptest.NewServer(h.Mount(api))
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/_azq/clock/advance?by=168h", "", nil)
	if err != nil {
		panic(err)
	}
	var reply struct{ Now time.Time }
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("the clock is at", reply.Now.Format(time.RFC3339), "and so is the server's:", mock.Now().Equal(reply.Now))

	rule := `{"rules": [{"name": "busy", "when": {"operations": ["CreateQueue"]}, "then": {"error": "ServerBusy"}}]}`
	resp, err = http.Post(srv.URL+"/_azq/faults", "application/json", strings.NewReader(rule))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("POST /_azq/faults:", resp.Status, "with", len(inj.Status().Rules), "rule")

	req, err := http.NewRequest(http.MethodPut, srv.URL+"/devstoreaccount1/orders", nil)
	if err != nil {
		panic(err)
	}
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("Create Queue:", resp.Status, resp.Header.Get("x-ms-error-code"))
	// Output:
	// the clock is at 2030-01-08T00:00:00Z and so is the server's: true
	// POST /_azq/faults: 200 OK with 1 rule
	// Create Queue: 503 Service Unavailable ServerBusy
}
