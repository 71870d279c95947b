package sdktest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/server"
)

// The answers below are Azure's, element for element, as its recorded
// answers to the Azure SDKs' tests show them: the bodies are compared
// byte for byte after the XML declaration, and parsed by the Go SDK.

const declaration = `<?xml version="1.0" encoding="utf-8"?>`

// newAccountProperties is what Get Queue Service Properties answers for
// a new account: logging off, hour metrics on with their APIs and a
// retention of 7 days, minute metrics off, no CORS rules.
const newAccountProperties = `<StorageServiceProperties>` +
	`<Logging><Version>1.0</Version><Read>false</Read><Write>false</Write><Delete>false</Delete><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></Logging>` +
	`<HourMetrics><Version>1.0</Version><Enabled>true</Enabled><IncludeAPIs>true</IncludeAPIs><RetentionPolicy><Enabled>true</Enabled><Days>7</Days></RetentionPolicy></HourMetrics>` +
	`<MinuteMetrics><Version>1.0</Version><Enabled>false</Enabled><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></MinuteMetrics>` +
	`<Cors /></StorageServiceProperties>`

func getProperties(t *testing.T, e *rawEnv) string {
	t.Helper()
	r := e.do(t, "GET", acct+"/?restype=service&comp=properties", "", nil, nil)
	if r.status != 200 || !strings.HasPrefix(r.body, declaration) {
		t.Fatalf("get properties: %d %s", r.status, r.body)
	}
	return strings.TrimPrefix(r.body, declaration)
}

// TestNewAccountProperties: a new account's service properties are
// Azure's for a new account, hour metrics on; the SDK reads them so; and
// Reset restores them.
func TestNewAccountProperties(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	if got := getProperties(t, e); got != newAccountProperties {
		t.Fatalf("a new account's properties:\n%s\nwant\n%s", got, newAccountProperties)
	}
	p, err := e.svc.GetServiceProperties(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, m := p.HourMetrics, p.MinuteMetrics
	if !*h.Enabled || !*h.IncludeAPIs || !*h.RetentionPolicy.Enabled || *h.RetentionPolicy.Days != 7 ||
		*m.Enabled || m.IncludeAPIs != nil || *m.RetentionPolicy.Enabled || *p.Logging.Read || len(p.CORS) != 0 {
		t.Fatalf("the SDK reads hour metrics %+v, minute metrics %+v", h, m)
	}
	if r := e.do(t, "PUT", acct+"/?restype=service&comp=properties", "", strings.NewReader(
		`<StorageServiceProperties><HourMetrics><Version>1.0</Version><Enabled>false</Enabled></HourMetrics></StorageServiceProperties>`), nil); r.status != 202 {
		t.Fatalf("set properties: %d %s", r.status, r.body)
	}
	if got := getProperties(t, e); strings.Contains(got, "<IncludeAPIs>") {
		t.Fatalf("hour metrics turned off still name their APIs: %s", got)
	}
	if err := e.srv.Reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := getProperties(t, e); got != newAccountProperties {
		t.Fatalf("after Reset:\n%s\nwant\n%s", got, newAccountProperties)
	}
}

// TestCorsRuleElementOrder: each CorsRule is written in Azure's order,
// AllowedMethods, AllowedOrigins, AllowedHeaders, ExposedHeaders,
// MaxAgeInSeconds, whatever order it was set in, and the SDK reads every
// field back.
func TestCorsRuleElementOrder(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	set := `<StorageServiceProperties><Cors>` +
		`<CorsRule><AllowedOrigins>http://www.example1.com</AllowedOrigins><AllowedMethods>GET,PUT</AllowedMethods><MaxAgeInSeconds>10</MaxAgeInSeconds><ExposedHeaders>x-ms-header3</ExposedHeaders><AllowedHeaders>x-ms-header1,x-ms-header2</AllowedHeaders></CorsRule>` +
		`<CorsRule><MaxAgeInSeconds>0</MaxAgeInSeconds><AllowedHeaders></AllowedHeaders><ExposedHeaders></ExposedHeaders><AllowedMethods>DELETE</AllowedMethods><AllowedOrigins>*</AllowedOrigins></CorsRule>` +
		`</Cors></StorageServiceProperties>`
	if r := e.do(t, "PUT", acct+"/?restype=service&comp=properties", "", strings.NewReader(set), nil); r.status != 202 {
		t.Fatalf("set properties: %d %s", r.status, r.body)
	}
	want := `<Cors>` +
		`<CorsRule><AllowedMethods>GET,PUT</AllowedMethods><AllowedOrigins>http://www.example1.com</AllowedOrigins><AllowedHeaders>x-ms-header1,x-ms-header2</AllowedHeaders><ExposedHeaders>x-ms-header3</ExposedHeaders><MaxAgeInSeconds>10</MaxAgeInSeconds></CorsRule>` +
		`<CorsRule><AllowedMethods>DELETE</AllowedMethods><AllowedOrigins>*</AllowedOrigins><AllowedHeaders></AllowedHeaders><ExposedHeaders></ExposedHeaders><MaxAgeInSeconds>0</MaxAgeInSeconds></CorsRule>` +
		`</Cors></StorageServiceProperties>`
	if got := getProperties(t, e); !strings.HasSuffix(got, want) {
		t.Fatalf("the rules are written\n%s\nwant them to end the document as\n%s", got, want)
	}
	p, err := e.svc.GetServiceProperties(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.CORS) != 2 {
		t.Fatalf("the SDK reads %d rules", len(p.CORS))
	}
	r := p.CORS[0]
	if *r.AllowedMethods != "GET,PUT" || *r.AllowedOrigins != "http://www.example1.com" || *r.AllowedHeaders != "x-ms-header1,x-ms-header2" ||
		*r.ExposedHeaders != "x-ms-header3" || *r.MaxAgeInSeconds != 10 {
		t.Fatalf("the SDK reads the first rule as %+v", r)
	}
	// What the SDK reads it can set again, unchanged.
	if _, err := e.svc.SetProperties(context.Background(), &azqueue.SetPropertiesOptions{CORS: p.CORS}); err != nil {
		t.Fatal(err)
	}
	if got := getProperties(t, e); !strings.HasSuffix(got, want) {
		t.Fatalf("after the SDK set them back:\n%s", got)
	}
}

// TestACLIdentifierWithoutPolicy: a signed identifier that has no policy,
// sent without an AccessPolicy element or with an empty one, is written
// back as Azure writes it, <Id> alone; one with a policy keeps its
// AccessPolicy with the elements set. The SDK reads the first as an
// identifier with no policy, as in its TestQueueSetMultipleACL.
func TestACLIdentifierWithoutPolicy(t *testing.T) {
	ctx := context.Background()
	e := newRawEnv(t, server.Options{})
	e.queue(t, "acl")
	set := `<SignedIdentifiers>` +
		`<SignedIdentifier><Id>null</Id></SignedIdentifier>` +
		`<SignedIdentifier><Id>empty</Id><AccessPolicy></AccessPolicy></SignedIdentifier>` +
		`<SignedIdentifier><Id>blank</Id><AccessPolicy><Start></Start><Expiry></Expiry></AccessPolicy></SignedIdentifier>` +
		`<SignedIdentifier><Id>partial</Id><AccessPolicy><Permission>r</Permission></AccessPolicy></SignedIdentifier>` +
		`<SignedIdentifier><Id>full</Id><AccessPolicy><Start>2021-07-08T09:10:09Z</Start><Expiry>2021-07-08T09:10:09Z</Expiry><Permission>r</Permission></AccessPolicy></SignedIdentifier>` +
		`</SignedIdentifiers>`
	if r := e.do(t, "PUT", acct+"/acl?comp=acl", "", strings.NewReader(set), nil); r.status != 204 {
		t.Fatalf("set ACL: %d %s", r.status, r.body)
	}
	want := declaration + `<SignedIdentifiers>` +
		`<SignedIdentifier><Id>null</Id></SignedIdentifier>` +
		`<SignedIdentifier><Id>empty</Id></SignedIdentifier>` +
		`<SignedIdentifier><Id>blank</Id></SignedIdentifier>` +
		`<SignedIdentifier><Id>partial</Id><AccessPolicy><Permission>r</Permission></AccessPolicy></SignedIdentifier>` +
		`<SignedIdentifier><Id>full</Id><AccessPolicy><Start>2021-07-08T09:10:09.0000000Z</Start><Expiry>2021-07-08T09:10:09.0000000Z</Expiry><Permission>r</Permission></AccessPolicy></SignedIdentifier>` +
		`</SignedIdentifiers>`
	if r := e.do(t, "GET", acct+"/acl?comp=acl", "", nil, nil); r.status != 200 || r.body != want {
		t.Fatalf("get ACL: %d\n%s\nwant\n%s", r.status, r.body, want)
	}

	// Through the SDK, as its TestQueueSetMultipleACL sets them.
	q := e.svc.NewQueueClient("acl")
	start := time.Date(2021, 6, 8, 2, 10, 9, 0, time.UTC)
	acl := []*azqueue.SignedIdentifier{
		{ID: to.Ptr("empty")},
		{ID: to.Ptr("partial"), AccessPolicy: &azqueue.AccessPolicy{Permission: to.Ptr("r")}},
		{ID: to.Ptr("full"), AccessPolicy: &azqueue.AccessPolicy{Start: &start, Expiry: &start, Permission: to.Ptr("r")}},
	}
	if _, err := q.SetAccessPolicy(ctx, &azqueue.SetAccessPolicyOptions{QueueACL: acl}); err != nil {
		t.Fatal(err)
	}
	got, err := q.GetAccessPolicy(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := got.SignedIdentifiers
	if len(ids) != 3 || *ids[0].ID != "empty" || ids[0].AccessPolicy != nil ||
		*ids[1].AccessPolicy.Permission != "r" || ids[1].AccessPolicy.Start != nil || !ids[2].AccessPolicy.Start.Equal(start) {
		t.Fatalf("the SDK reads %+v", ids)
	}
	// What it read, it sets again unchanged.
	if _, err := q.SetAccessPolicy(ctx, &azqueue.SetAccessPolicyOptions{QueueACL: ids}); err != nil {
		t.Fatal(err)
	}
	if r := e.do(t, "GET", acct+"/acl?comp=acl", "", nil, nil); !strings.Contains(r.body, `<SignedIdentifier><Id>empty</Id></SignedIdentifier><SignedIdentifier><Id>partial</Id><AccessPolicy><Permission>r</Permission></AccessPolicy>`) {
		t.Fatalf("after the SDK set them back: %s", r.body)
	}
}
