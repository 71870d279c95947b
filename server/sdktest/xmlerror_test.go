package sdktest_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/server"
)

// errorTail is the Error document after its Message: the detail
// elements, in Azure's order, and the closing tag.
func errorTail(t *testing.T, body string) string {
	t.Helper()
	_, tail, ok := strings.Cut(body, "</Message>")
	if !ok {
		t.Fatalf("no Message in %s", body)
	}
	return tail
}

// Set Queue ACL bodies Azure refuses carry LineNumber, LinePosition and
// Reason after the Message. The position is that of the node after the
// offending SignedIdentifier, counted as .NET's XmlReader counts (from 1,
// at the node's name): for the body of the Java SDK's test of a 96
// character identifier, Azure answers line 1, position 202.
func TestSetQueueACLErrorDetails(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	e.do(t, "PUT", acct+"/aclq", "", nil, nil)
	si := func(id, perm string) string {
		return `<SignedIdentifier><Id>` + id + `</Id><AccessPolicy><Permission>` + perm + `</Permission></AccessPolicy></SignedIdentifier>`
	}
	six := ""
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		six += si(id, "r")
	}
	const javaDecl = `<?xml version='1.0' encoding='UTF-8'?>`
	long := "invalidtoolong" + strings.Repeat("-", 82)
	for _, tc := range []struct {
		name, body, tail string
	}{
		{"identifier over 64 characters",
			javaDecl + `<SignedIdentifiers><SignedIdentifier><Id>` + long + `</Id></SignedIdentifier></SignedIdentifiers>`,
			`<LineNumber>1</LineNumber><LinePosition>202</LinePosition><Reason>Signed identifier ID cannot be empty or over 64 characters in length</Reason></Error>`},
		{"identifier on its own lines",
			"<SignedIdentifiers>\n  " + si(strings.Repeat("x", 65), "r") + "\n  " + si("b", "r") + "\n</SignedIdentifiers>",
			`<LineNumber>3</LineNumber><LinePosition>4</LinePosition><Reason>Signed identifier ID cannot be empty or over 64 characters in length</Reason></Error>`},
		{"empty identifier",
			`<SignedIdentifiers>` + si("", "r") + `</SignedIdentifiers>`,
			`<LineNumber>1</LineNumber><LinePosition>123</LinePosition><Reason>Signed identifier ID cannot be empty or over 64 characters in length</Reason></Error>`},
		{"identifier twice",
			`<SignedIdentifiers>` + si("p", "r") + si("p", "a") + `</SignedIdentifiers>`,
			`<LineNumber>1</LineNumber><LinePosition>226</LinePosition><Reason>Signed identifier p not unique</Reason></Error>`},
		{"six identifiers",
			`<SignedIdentifiers>` + six + `</SignedIdentifiers>`,
			`<LineNumber>0</LineNumber><LinePosition>0</LinePosition><Reason>At most 5 signed identifier is allowed in the request body</Reason></Error>`},
		{"permission outside raup", // as recorded from Azure by the JavaScript SDK's tests
			`<SignedIdentifiers>` + si("p", "rwdl") + `</SignedIdentifiers>`,
			`<LineNumber>0</LineNumber><LinePosition>0</LinePosition><Reason /></Error>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "PUT", acct+"/aclq?comp=acl", "", strings.NewReader(tc.body), nil)
			checkError(t, r, 400, "InvalidXmlDocument")
			if got := errorTail(t, r.body); got != tc.tail {
				t.Fatalf("after the Message:\n got %s\nwant %s", got, tc.tail)
			}
		})
	}
}

// The Go SDK writes the XML declaration on a line of its own and the
// AccessPolicy before the Id, so a 136-character identifier is reported
// at line 2, position 259; the SDK's error carries the three details.
func TestSDKSetQueueACLLongIdentifier(t *testing.T) {
	e := newEnv(t, server.Options{})
	q := e.queue(t, "acl")
	_, err := q.SetAccessPolicy(context.Background(), &azqueue.SetAccessPolicyOptions{QueueACL: []*azqueue.SignedIdentifier{
		{ID: to.Ptr(strings.Repeat("a", 136)), AccessPolicy: &azqueue.AccessPolicy{Permission: to.Ptr("r")}},
	}})
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != "InvalidXmlDocument" {
		t.Fatalf("err = %v", err)
	}
	body, _ := io.ReadAll(re.RawResponse.Body)
	want := `<LineNumber>2</LineNumber><LinePosition>259</LinePosition><Reason>Signed identifier ID cannot be empty or over 64 characters in length</Reason></Error>`
	if got := errorTail(t, string(body)); got != want {
		t.Fatalf("after the Message:\n got %s\nwant %s", got, want)
	}
}
