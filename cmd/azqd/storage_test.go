package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/server/admin"
	"github.com/benbjohnson/clock"
)

// fixedState is a storageState that reports the failure it holds.
type fixedState struct{ failure error }

func (f fixedState) DurableState() (azq.DurableState, bool) {
	return azq.DurableState{Failure: f.failure}, true
}

// TestHealthReportsStorageFailure: once an account's durable storage has
// failed, every request to it gets 500 until azqd restarts, so the health
// check answers 503 with the reason, for a container's health check to
// act on.
func TestHealthReportsStorageFailure(t *testing.T) {
	failed := errors.New("azq: durable storage failed, so the service refuses further changes: wal: sync wal-0000000000000001: input/output error (InternalError)")
	for _, tc := range []struct {
		name    string
		storage map[string]storageState
		status  int
		reason  string
	}{
		{"in memory", nil, http.StatusOK, ""},
		{"healthy", map[string]storageState{"acct1": fixedState{}}, http.StatusOK, ""},
		{"failed", map[string]storageState{"acct1": fixedState{}, "acct2": fixedState{failed}}, http.StatusServiceUnavailable, "account acct2: " + failed.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newAdminHandler(&config{}, admin.Options{Version: "test"}, nil, nil)
			h.storage = tc.storage
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/_azq/health", nil))
			var reply healthReply
			if err := json.Unmarshal(rec.Body.Bytes(), &reply); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tc.status || reply.Reason != tc.reason {
				t.Fatalf("health: %d %+v, want %d with reason %q", rec.Code, reply, tc.status, tc.reason)
			}
		})
	}
}

// TestStorageStatesAskOnlyWhatHasStorage: the health check asks the back
// ends that report their storage's state (a Service has DurableState) and
// passes over those that do not, another keeper of the service contract.
func TestStorageStatesAskOnlyWhatHasStorage(t *testing.T) {
	mem := azq.NewService()
	defer mem.Close()
	st := storageStates(map[string]azq.QueueService{"mem": mem, "other": struct{ azq.QueueService }{mem}})
	if len(st) != 1 || st["mem"] == nil {
		t.Fatalf("storage states: %v, want the Service's only", st)
	}
}

// TestHealthOfARealDurableService asks a running azqd -data for its health.
func TestHealthOfARealDurableService(t *testing.T) {
	d := start(t, "-data", t.TempDir())
	var h healthReply
	adminCall(t, "GET", d.base+"/_azq/health", 200, &h)
	if h.Status != "ok" || h.Reason != "" {
		t.Fatalf("health of a working durable azqd: %+v", h)
	}
}

// TestDataKeepsServiceProperties sets the service properties of an azqd
// with -data, restarts it, and gets them back.
func TestDataKeepsServiceProperties(t *testing.T) {
	dir := t.TempDir()
	props := `<StorageServiceProperties><Logging><Version>1.0</Version><Read>true</Read><Write>false</Write><Delete>true</Delete><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></Logging>` +
		`<Cors><CorsRule><AllowedOrigins>https://app.example</AllowedOrigins><AllowedMethods>GET</AllowedMethods><MaxAgeInSeconds>5</MaxAgeInSeconds><ExposedHeaders></ExposedHeaders><AllowedHeaders></AllowedHeaders></CorsRule></Cors></StorageServiceProperties>`
	call := func(d *daemon, method string, body io.Reader, want int) string {
		t.Helper()
		status, b := send(t, method, d.base+"/devstoreaccount1/?restype=service&comp=properties", "", body, nil)
		if status != want {
			t.Fatalf("%s properties: status %d %s", method, status, b)
		}
		return b
	}
	d := start(t, "-data", dir, "-allow-anonymous")
	call(d, http.MethodPut, strings.NewReader(props), http.StatusAccepted)
	want := call(d, http.MethodGet, nil, http.StatusOK)
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(propertiesFile(dir, "devstoreaccount1")); err != nil {
		t.Fatalf("no properties file: %v", err)
	}
	d = start(t, "-data", dir, "-allow-anonymous")
	if got := call(d, http.MethodGet, nil, http.StatusOK); got != want {
		t.Fatalf("after a restart the properties are\n%s\nwant\n%s", got, want)
	}
}

// TestDataRefusesAClockPastItsBounds: a saved mock-clock time that azq
// cannot represent (past 2262, or before 1677) is refused at start-up, as
// the clock endpoints refuse to move there.
func TestDataRefusesAClockPastItsBounds(t *testing.T) {
	for _, tc := range []struct{ file, saved string }{
		{"devstoreaccount1.clock", "2262-04-12T00:00:00Z"},
		{"devstoreaccount1.clock", "1600-01-01T00:00:00Z"},
		{"clock", "2262-04-12T00:00:00Z"}, // the directory's shared clock of earlier versions
	} {
		saved := tc.saved
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, tc.file), []byte(saved+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := parseFlags([]string{"-data", dir, "-clock-control"}, &bytes.Buffer{}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		services, _, err := openData(cfg, clock.NewMock(), io.Discard, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err == nil {
			closeAll(services)
			t.Fatalf("a saved clock at %s was accepted", saved)
		}
		if !strings.Contains(err.Error(), "outside the times azq represents") {
			t.Fatalf("saved clock %s: %v", saved, err)
		}
	}
}

// TestDataClockPerAccount: each account keeps its clock beside its
// directory. One azqd serving several accounts resumes at the latest time
// saved for any of them, so that no account's time goes back, and saves
// it for all; an account without a clock of its own counts with the
// directory's shared clock that earlier versions kept.
func TestDataClockPerAccount(t *testing.T) {
	dir := t.TempDir()
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	open := func(accounts ...string) (time.Time, map[string]azq.QueueService) {
		args := []string{"-data", dir, "-clock-control"}
		for _, a := range accounts {
			args = append(args, "-account", a+":a2V5MQ==")
		}
		cfg, err := parseFlags(args, &bytes.Buffer{}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		mock := clock.NewMock()
		services, _, err := openData(cfg, mock, io.Discard, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		return mock.Now(), services
	}
	read := func(account string) time.Time {
		t.Helper()
		tm, ok, err := readClockFile(clockFile(dir, account))
		if err != nil || !ok {
			t.Fatalf("the clock of %s: %v %v", account, ok, err)
		}
		return tm
	}

	write("clock", "2030-01-01T00:00:00Z") // an earlier version's
	write("alpha.clock", "2031-01-01T00:00:00Z")
	write("beta.clock", "2029-01-01T00:00:00Z")
	now, services := open("alpha", "beta")
	closeAll(services)
	if want := at("2031-01-01T00:00:00Z"); !now.Equal(want) || !read("alpha").Equal(want) || !read("beta").Equal(want) {
		t.Fatalf("alpha and beta resumed at %v and saved %v, %v; want %v", now, read("alpha"), read("beta"), want)
	}
	// gamma has no clock of its own: the shared one counts.
	now, services = open("gamma")
	closeAll(services)
	if want := at("2030-01-01T00:00:00Z"); !now.Equal(want) || !read("gamma").Equal(want) {
		t.Fatalf("gamma resumed at %v, want the shared clock's %v", now, want)
	}
	// beta alone resumes at its own, which alpha's run moved forward.
	now, services = open("beta")
	closeAll(services)
	if want := at("2031-01-01T00:00:00Z"); !now.Equal(want) {
		t.Fatalf("beta resumed at %v, want %v", now, want)
	}
	// An account named clock has its queues where the shared clock was;
	// a directory is no clock, when the account has none of its own (it
	// was served without -clock-control).
	dir = t.TempDir()
	_, services = open("clock")
	closeAll(services)
	if err := os.Remove(clockFile(dir, "clock")); err != nil {
		t.Fatal(err)
	}
	now, services = open("clock")
	closeAll(services)
	if !now.Equal(read("clock")) {
		t.Fatalf("the account clock resumed at %v, saved %v", now, read("clock"))
	}
}

// TestDataLogsToTheStorageLogger: the durable Services of -data log to
// the logger openData is given, where a failed checkpoint would appear.
func TestDataLogsToTheStorageLogger(t *testing.T) {
	cfg, err := parseFlags([]string{"-data", t.TempDir()}, &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	services, _, err := openData(cfg, nil, io.Discard, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	closeAll(services)
	if !strings.Contains(log.String(), "azq: recovered") || !strings.Contains(log.String(), "account=devstoreaccount1") {
		t.Fatalf("the storage log holds %q", log.String())
	}
	// Without a request log, warnings and errors still go to stderr.
	var stderr bytes.Buffer
	l := storageLogger(nil, &stderr)
	l.Info("quiet")
	l.Error("checkpoint failed")
	if s := stderr.String(); strings.Contains(s, "quiet") || !strings.Contains(s, "checkpoint failed") {
		t.Fatalf("the default storage log wrote %q", s)
	}
}
