package sdktest_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/azqlib/azq/server"
)

// savedDocs records what Options.SaveProperties was given.
type savedDocs struct {
	mu   sync.Mutex
	docs map[string][]byte
	fail error
}

func (s *savedDocs) save(account string, doc []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	if s.docs == nil {
		s.docs = map[string][]byte{}
	}
	s.docs[account] = append([]byte(nil), doc...)
	return nil
}

func (s *savedDocs) get(account string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.docs[account]
}

const someProperties = `<StorageServiceProperties><Logging><Version>1.0</Version><Read>true</Read><Write>true</Write><Delete>false</Delete><RetentionPolicy><Enabled>true</Enabled><Days>3</Days></RetentionPolicy></Logging>` +
	`<HourMetrics><Version>1.0</Version><Enabled>true</Enabled><IncludeAPIs>false</IncludeAPIs><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></HourMetrics>` +
	`<Cors><CorsRule><AllowedOrigins>https://app.example</AllowedOrigins><AllowedMethods>GET,PUT</AllowedMethods><MaxAgeInSeconds>60</MaxAgeInSeconds><ExposedHeaders>x-ms-*</ExposedHeaders><AllowedHeaders>x-ms-meta-*</AllowedHeaders></CorsRule></Cors></StorageServiceProperties>`

// TestSavedPropertiesComeBack sets service properties on one server,
// which saves them, and loads them into a second, which does not save
// them again: Get Queue Service Properties answers the same on both, and
// the CORS rule applies.
func TestSavedPropertiesComeBack(t *testing.T) {
	var saved savedDocs
	a := newRawEnv(t, server.Options{SaveProperties: saved.save})
	if r := a.do(t, "PUT", acct+"/?restype=service&comp=properties", "", strings.NewReader(someProperties), nil); r.status != 202 {
		t.Fatalf("set properties: %d %s", r.status, r.body)
	}
	want := a.do(t, "GET", acct+"/?restype=service&comp=properties", "", nil, nil).body
	doc := saved.get("devstoreaccount1")
	if doc == nil {
		t.Fatal("SaveProperties was not called")
	}
	// Loading what was saved does not save it again.
	var resaved savedDocs
	b := newRawEnv(t, server.Options{SaveProperties: resaved.save})
	if err := b.srv.LoadProperties("devstoreaccount1", doc); err != nil {
		t.Fatal(err)
	}
	if d := resaved.get("devstoreaccount1"); d != nil {
		t.Fatalf("LoadProperties called SaveProperties with\n%s", d)
	}
	if got := b.do(t, "GET", acct+"/?restype=service&comp=properties", "", nil, nil).body; got != want {
		t.Fatalf("after loading the saved properties:\n%s\nwant\n%s", got, want)
	}
	r := b.do(t, "OPTIONS", acct+"/", "", nil, map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "PUT"})
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("preflight under the loaded CORS rule: %d %v", r.status, r.header)
	}
}

// TestFailedSaveRefusesTheChange: when the properties cannot be saved,
// Set Queue Service Properties fails with 500 and changes nothing.
func TestFailedSaveRefusesTheChange(t *testing.T) {
	saved := savedDocs{fail: errors.New("disk full")}
	e := newRawEnv(t, server.Options{SaveProperties: saved.save})
	before := e.do(t, "GET", acct+"/?restype=service&comp=properties", "", nil, nil).body
	r := e.do(t, "PUT", acct+"/?restype=service&comp=properties", "", strings.NewReader(someProperties), nil)
	checkError(t, r, 500, "InternalError")
	if after := e.do(t, "GET", acct+"/?restype=service&comp=properties", "", nil, nil).body; after != before {
		t.Fatalf("a change that could not be saved was made:\n%s\nwant\n%s", after, before)
	}
}

// TestResetSavesTheDefaults: Reset, which restores the default
// properties, saves them too.
func TestResetSavesTheDefaults(t *testing.T) {
	var saved savedDocs
	e := newRawEnv(t, server.Options{SaveProperties: saved.save})
	defaults := e.do(t, "GET", acct+"/?restype=service&comp=properties", "", nil, nil).body
	e.do(t, "PUT", acct+"/?restype=service&comp=properties", "", strings.NewReader(someProperties), nil)
	if err := e.srv.Reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := newRawEnv(t, server.Options{})
	if err := b.srv.LoadProperties("devstoreaccount1", saved.get("devstoreaccount1")); err != nil {
		t.Fatal(err)
	}
	if got := b.do(t, "GET", acct+"/?restype=service&comp=properties", "", nil, nil).body; got != defaults {
		t.Fatalf("after Reset the saved properties are\n%s\nwant the defaults\n%s", got, defaults)
	}
}

func TestLoadPropertiesRefusesBadDocuments(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	if err := e.srv.LoadProperties("devstoreaccount1", []byte("<StorageServiceProperties><Cors>")); err == nil {
		t.Fatal("a cut document was loaded")
	}
	if err := e.srv.LoadProperties("nosuchaccount", []byte(someProperties)); err == nil {
		t.Fatal("properties were loaded for an account that does not exist")
	}
}
