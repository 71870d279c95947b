package sdktest_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/observe"
	"github.com/azqlib/azq/server"
	"github.com/benbjohnson/clock"
)

// newInjectedRaw is a raw-request environment whose server has inj, on
// the mock clock inj reads, and records what Observe is told. seen(n)
// waits for n observations (a request's observation may come after its
// client saw the connection fail) and returns all there are.
func newInjectedRaw(t *testing.T, throttle *faults.Throttle, rules ...faults.Rule) (*rawEnv, *faults.Injector, *clock.Mock, func(n int) []observe.Observation) {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(start())
	inj, err := faults.New(faults.Options{Clock: mock, Config: faults.Config{Rules: rules, Throttle: throttle}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var obs []observe.Observation
	more := make(chan struct{}, 1)
	e := newRawEnv(t, server.Options{Clock: mock, Faults: inj, Observe: func(o observe.Observation) {
		mu.Lock()
		obs = append(obs, o)
		mu.Unlock()
		select {
		case more <- struct{}{}:
		default:
		}
	}})
	seen := func(n int) []observe.Observation {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			mu.Lock()
			got := append([]observe.Observation(nil), obs...)
			mu.Unlock()
			if len(got) >= n {
				return got
			}
			select {
			case <-more:
			case <-deadline:
				t.Fatalf("%d observations after 10 s, want %d", len(got), n)
			}
		}
	}
	return e, inj, mock, seen
}

// Injected errors are answered as Azure answers them: status,
// x-ms-error-code, request ID, and the Error XML with the message.
func TestInjectedErrorAnswers(t *testing.T) {
	for _, tc := range []struct {
		then         faults.Then
		status       int
		code, detail string
	}{
		{faults.Then{Error: "ServerBusy"}, 503, "ServerBusy", "The server is currently unable to receive requests. Please retry your request."},
		{faults.Then{Error: "ServerBusy", Reason: faults.ReasonOperations}, 503, "ServerBusy", "Operations per second is over the account limit."},
		{faults.Then{Error: "InternalError"}, 500, "InternalError", "Server encountered an internal error. Please try again after some time."},
		{faults.Then{Error: "OperationTimedOut"}, 500, "OperationTimedOut", "The operation could not be completed within the permitted time."},
		{faults.Then{Error: "InternalError", Message: "disk on fire"}, 500, "InternalError", "disk on fire"},
		{faults.Then{Error: "QueueNotFound", Status: 404}, 404, "QueueNotFound", "The specified queue does not exist."},
		{faults.Then{Error: "QueueBeingDeleted", Status: 409}, 409, "QueueBeingDeleted", "Conflict."},
	} {
		t.Run(tc.code, func(t *testing.T) {
			e, _, _, _ := newInjectedRaw(t, nil, faults.Rule{When: faults.When{Operations: []string{"CreateQueue"}}, Then: tc.then})
			r := e.do(t, "PUT", acct+"/qone", "", nil, nil)
			checkError(t, r, tc.status, tc.code)
			if !strings.Contains(r.body, "<Message>"+tc.detail+"\nRequestId:") {
				t.Fatalf("body %s", r.body)
			}
			if r.header.Get("Server") == "" || r.header.Get("x-ms-version") == "" {
				t.Fatalf("headers %v", r.header)
			}
			if e.srv.Service("devstoreaccount1") != nil {
				if _, err := e.srv.Service("devstoreaccount1").Queue("qone"); err == nil {
					t.Fatal("a refused Create Queue created the queue")
				}
			}
		})
	}
}

// A failed connection: the client gets no answer, and the observation
// says network_error.
func TestInjectedNetworkFailures(t *testing.T) {
	for _, nw := range faults.Networks {
		t.Run(string(nw), func(t *testing.T) {
			e, _, _, seen := newInjectedRaw(t, nil, faults.Rule{Name: "net", When: faults.When{Operations: []string{"CreateQueue"}}, Then: faults.Then{Network: nw}})
			req, _ := http.NewRequest("PUT", e.hs.URL+acct+"/qone", nil)
			resp, err := e.client.Do(req)
			if err == nil {
				_, err = readAll(resp)
			}
			if err == nil {
				t.Fatal("the request got a whole answer")
			}
			obs := seen(1)
			if len(obs) != 1 || obs[0].Outcome != observe.NetworkError || obs[0].Operation != "CreateQueue" || obs[0].Fault != "net" ||
				obs[0].Applied != (nw == faults.NetworkTruncate) {
				t.Fatalf("observations %+v", obs)
			}
			_, err = e.srv.Service("devstoreaccount1").Queue("qone")
			if created := err == nil; created != (nw == faults.NetworkTruncate) {
				t.Fatalf("queue created: %v", created)
			}
		})
	}
}

// A cut-off answer without a body (201 Created) is cut in its headers.
func TestTruncatedBodilessAnswer(t *testing.T) {
	e, _, _, _ := newInjectedRaw(t, nil, faults.Rule{When: faults.When{Operations: []string{"CreateQueue"}}, Then: faults.Then{Network: faults.NetworkTruncate}})
	req, _ := http.NewRequest("PUT", e.hs.URL+acct+"/qone", nil)
	if resp, err := e.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("got an answer: %d", resp.StatusCode)
	}
}

// A burst past the queue's rate gets 503 ServerBusy with Azure's
// message; a client paced at the rate on the mock clock gets none.
func TestThrottleOverREST(t *testing.T) {
	e, inj, mock, seen := newInjectedRaw(t, &faults.Throttle{QueueMessagesPerSecond: 4, AccountRequestsPerSecond: 100})
	e.do(t, "PUT", acct+"/burst", "", nil, nil)
	put := func() rawResp {
		return e.do(t, "POST", acct+"/burst/messages", "", strings.NewReader("<QueueMessage><MessageText>m</MessageText></QueueMessage>"), nil)
	}
	busy := 0
	for i := 0; i < 10; i++ {
		if r := put(); r.status == 503 {
			busy++
			checkError(t, r, 503, "ServerBusy")
			if !strings.Contains(r.body, "<Message>The server is currently unable to receive requests. Please retry your request.\n") {
				t.Fatalf("body %s", r.body)
			}
		} else if r.status != 201 {
			t.Fatalf("put: %d %s", r.status, r.body)
		}
	}
	if busy != 6 || e.count(t, "burst") != 4 {
		t.Fatalf("%d of 10 refused, %d put; want 6 and 4", busy, e.count(t, "burst"))
	}
	throttled := 0
	for _, o := range seen(11) {
		if o.Outcome == observe.ThrottlingError && o.Fault == faults.ThrottleRule {
			throttled++
		}
	}
	if throttled != 6 || inj.Status().Throttled != 6 {
		t.Fatalf("observed %d throttled, injector %d", throttled, inj.Status().Throttled)
	}
	mock.Add(time.Second)
	for i := 0; i < 40; i++ {
		if r := put(); r.status != 201 {
			t.Fatalf("paced put %d: %d %s", i, r.status, r.body)
		}
		mock.Add(250 * time.Millisecond)
	}
}

// Past the account's rate, every operation is refused with the
// account's message.
func TestThrottleAccountOverREST(t *testing.T) {
	e, _, _, _ := newInjectedRaw(t, &faults.Throttle{AccountRequestsPerSecond: 2})
	e.do(t, "GET", acct+"/?comp=list", "", nil, nil)
	e.do(t, "GET", acct+"/?comp=list", "", nil, nil)
	r := e.do(t, "GET", acct+"/?comp=list", "", nil, nil)
	checkError(t, r, 503, "ServerBusy")
	if !strings.Contains(r.body, "<Message>Operations per second is over the account limit.\n") {
		t.Fatalf("body %s", r.body)
	}
}

// Observe hears of every request, with its operation, account, queue,
// status, outcome and, for an applied fault, that it took effect.
func TestObserveReportsEachRequest(t *testing.T) {
	e, _, _, seen := newInjectedRaw(t, nil, faults.Rule{Name: "lost", When: faults.When{Operations: []string{"PutMessage"}, Times: 1},
		Then: faults.Then{Applied: true, Error: "InternalError"}})
	e.do(t, "PUT", acct+"/obs", "", nil, nil)
	body := "<QueueMessage><MessageText>m</MessageText></QueueMessage>"
	e.do(t, "POST", acct+"/obs/messages", "", strings.NewReader(body), nil)
	e.do(t, "POST", acct+"/obs/messages", "", strings.NewReader(body), nil)
	e.do(t, "GET", acct+"/nosuch/messages", "", nil, nil)
	e.do(t, "GET", "/nosuchaccount/q", "", nil, nil)
	obs := seen(5)
	type row struct {
		op, acct, queue string
		status          int
		outcome         observe.Outcome
		applied         bool
	}
	var got []row
	for _, o := range obs {
		got = append(got, row{o.Operation, o.Account, o.Queue, o.Status, o.Outcome, o.Applied})
	}
	want := []row{
		{"CreateQueue", "devstoreaccount1", "obs", 201, observe.Success, false},
		{"PutMessage", "devstoreaccount1", "obs", 500, observe.ServerError, true},
		{"PutMessage", "devstoreaccount1", "obs", 201, observe.Success, false},
		{"GetMessages", "devstoreaccount1", "nosuch", 404, observe.ClientError, false},
		{"UnknownOperation", "", "", 404, observe.ClientError, false},
	}
	if len(got) != len(want) {
		t.Fatalf("observations %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("observation %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if e.count(t, "obs") != 2 {
		t.Fatalf("%d messages, want 2", e.count(t, "obs"))
	}
}

// A delay holds the answer back at least that long.
func TestInjectedDelay(t *testing.T) {
	e, _, _, seen := newInjectedRaw(t, nil, faults.Rule{When: faults.When{Operations: []string{"ListQueues"}}, Then: faults.Then{Delay: 30 * time.Millisecond}})
	if r := e.do(t, "GET", acct+"/?comp=list", "", nil, nil); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if o := seen(1); len(o) != 1 || o[0].Duration < 30*time.Millisecond || o[0].Outcome != observe.Success {
		t.Fatalf("observations %+v", o)
	}
}

func readAll(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 512)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			if err.Error() == "EOF" {
				return []byte(b.String()), nil
			}
			return nil, err
		}
	}
}
