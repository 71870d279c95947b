package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/internal/devstore"
)

// Account is one storage account the server answers for. Requests name
// the account in the host (host-style URLs) or in the first path segment
// (path-style, as the emulators use), and are signed with one of its keys.
type Account struct {
	// Name is the account name, e.g. "devstoreaccount1".
	Name string
	// Keys are the base64 account keys (key1, key2). A request signed
	// with any of them is accepted, so that key rotation can be simulated.
	Keys []string
}

// developmentAccountKey is the key Azure's storage emulators publish for
// devstoreaccount1. It is public by design: tools and SDKs hard-code it.
const developmentAccountKey = devstore.AccountKey

// DevelopmentAccount returns the well-known emulator account
// devstoreaccount1 with its well-known key, so that code and tools written
// for Azurite or the older storage emulator work unchanged.
func DevelopmentAccount() Account {
	return Account{Name: devstore.AccountName, Keys: []string{developmentAccountKey}}
}

// ConnectionString returns an Azure Storage connection string for the
// account at the given queue endpoint (e.g.
// "http://127.0.0.1:10001/devstoreaccount1"), using its first key:
//
//	DefaultEndpointsProtocol=http;AccountName=…;AccountKey=…;QueueEndpoint=…;
//
// The protocol follows the endpoint's scheme. The Go SDK needs
// QueueEndpoint here because it does not understand
// UseDevelopmentStorage=true (package azure does).
func (a Account) ConnectionString(queueEndpoint string) string {
	proto := "http"
	if strings.HasPrefix(strings.ToLower(queueEndpoint), "https://") {
		proto = "https"
	}
	var b strings.Builder
	b.WriteString("DefaultEndpointsProtocol=" + proto + ";")
	b.WriteString("AccountName=" + a.Name + ";")
	if len(a.Keys) > 0 {
		b.WriteString("AccountKey=" + a.Keys[0] + ";")
	}
	b.WriteString("QueueEndpoint=" + queueEndpoint + ";")
	return b.String()
}

// signingKey is one decoded account key, with the HMAC-SHA256 states
// keyed with it that verified earlier requests: hmac.New hashes the key's
// pads and allocates afresh, and every signed request needs a MAC.
type signingKey struct {
	raw  []byte
	macs sync.Pool // of *keyedMAC
}

// keyedMAC is an HMAC-SHA256 state with room for its sum: a sum on the
// stack would escape through the hash.Hash interface, an allocation per
// signed request.
type keyedMAC struct {
	hash.Hash
	sum [sha256.Size]byte
}

// mac returns an HMAC-SHA256 state keyed with k, ready for input; give it
// back with putMAC.
func (k *signingKey) mac() *keyedMAC {
	if m, ok := k.macs.Get().(*keyedMAC); ok {
		m.Reset()
		return m
	}
	return &keyedMAC{Hash: hmac.New(sha256.New, k.raw)}
}

func (k *signingKey) putMAC(m *keyedMAC) { k.macs.Put(m) }

// keyBytes returns the decoded account keys. Keys that are not valid
// base64 are skipped: a misconfigured key must make signatures fail, not
// make the server panic. New decodes them once per account, as every
// signed request needs them.
func (a *Account) keyBytes() []*signingKey {
	out := make([]*signingKey, 0, len(a.Keys))
	for _, k := range a.Keys {
		b, err := base64.StdEncoding.DecodeString(k)
		if err != nil || len(b) == 0 {
			continue
		}
		out = append(out, &signingKey{raw: b})
	}
	return out
}

// signatureMatches reports whether sig is the signature of one of the
// candidate strings under one of the keys. Candidates exist because
// clients legitimately differ in a few canonicalization details; every
// candidate still covers the whole request. Candidates come most likely
// first, so the search stops at the first match; hmac.Equal keeps each
// comparison constant-time.
func signatureMatches(keys []*signingKey, candidates []string, sig string) bool {
	for _, c := range candidates {
		if signatureMatchesBytes(keys, []byte(c), sig) {
			return true
		}
	}
	return false
}

// signatureMatchesBytes reports whether sig is the signature of msg under
// one of the keys.
func signatureMatchesBytes(keys []*signingKey, msg []byte, sig string) bool {
	var enc [44]byte // base64 of a SHA-256 sum
	if len(sig) != len(enc) {
		return false // not a signature; hmac.Equal would say so too
	}
	for _, k := range keys {
		m := k.mac()
		m.Write(msg)
		base64.StdEncoding.Encode(enc[:], m.Sum(m.sum[:0]))
		k.putMAC(m)
		if hmac.Equal(enc[:], []byte(sig)) {
			return true
		}
	}
	return false
}

// authRequest is everything authorize needs to know about one request.
type authRequest struct {
	r *http.Request
	// query is r's parsed query; nil makes authorize parse it.
	query   *query
	account *Account
	keys    []*signingKey // account's keys, decoded (keyBytes)
	// secondary is true when the request addressed "<account>-secondary"
	// (host-style or path-style).
	secondary bool
	// queue is the queue name, "" for service-level operations.
	queue string
	op    operation
	// now comes from the service's injected clock (it may be a mock clock
	// far from real time).
	now time.Time
	// checkDateSkew refuses a Shared Key request whose date is more than
	// maxDateSkew from now. The server sets it when its clock is the real
	// one; see authorize.
	checkDateSkew bool
	// policy looks up a stored access policy of the named queue by ID (for
	// service SAS with si=). found=false when the queue has no such
	// policy; err is an *azq.Error (e.g. QueueNotFound) to return as is.
	policy func(queue, id string) (p azq.AccessPolicy, found bool, err error)
	// allowAnonymous is the server option that accepts unauthenticated
	// requests. Requests that do carry credentials are still verified, so
	// a wrong key is reported rather than silently ignored.
	allowAnonymous bool
	// oauth verifies bearer tokens; nil when the server does not accept
	// them (auth_bearer.go).
	oauth *bearerVerifier
}

// authorize returns nil if the request may proceed, or an *azq.Error with
// Azure's code, status and details.
//
// Order: CORS preflight is never authenticated; then the credential is
// verified (Authorization header first, else a SAS in the query, else the
// request is anonymous); only an authenticated (or allowed anonymous)
// request learns that it cannot write to the read-only secondary.
//
// A Shared Key request must carry x-ms-date or Date, which the signature
// covers. Azure also refuses a request whose date is more than 15 minutes
// from its own clock, which limits how long a captured request can be
// replayed; the server does the same when checkDateSkew is set, that is
// when it runs on the real clock. On a mock clock the check is skipped:
// the clients sign with their own real clock, and a mock clock that stands
// still or was moved days ahead would otherwise refuse every correctly
// signed request.
func authorize(a authRequest) error {
	if a.op == opPreflight {
		return nil
	}
	if a.r == nil || a.r.URL == nil || a.account == nil {
		return authFailed("The request could not be attributed to a storage account.")
	}
	if a.query == nil {
		q, err := parseQuery(a.r.URL.RawQuery)
		if err != nil {
			return authFailed("The query string is not well formed.")
		}
		a.query = q
	}
	hasHeader := len(a.r.Header.Values("Authorization")) > 0
	sas := !hasHeader && a.query.has("sig")
	if err := a.query.checkRepeated(sas); err != nil {
		return err
	}
	var err error
	switch {
	case a.oauth != nil && isBearer(a.r):
		err = a.oauth.authorize(a)
	case hasHeader:
		err = authorizeHeader(a)
	case sas:
		err = authorizeSAS(a)
	case !a.allowAnonymous:
		// Azure answers a request without any credentials with 401
		// NoAuthenticationInformation ("Please refer to the information
		// in the www-authenticate header"), as observed from the real
		// queue service in Azure/azure-sdk-for-java#40920 (a SAS sample
		// that dropped its "?") and listed in Common REST API Error
		// Codes. Azurite's 403 AuthenticationFailed is an emulator
		// deviation (spec §9.6, §11 point 5).
		return errNoAuthenticationInformation()
	}
	if err != nil {
		return err
	}
	if a.secondary && !a.op.readOnly() {
		// The secondary of an RA-GRS account is a read-only replica;
		// Azure refuses writes to it with 403
		// InsufficientAccountPermissions.
		return errWriteOnSecondary()
	}
	return nil
}

// The Message texts below are Azure's; the handler appends RequestId and
// Time as the service does. AuthenticationErrorDetail carries the reason,
// as Azure does for 403 AuthenticationFailed; the other codes carry it too
// because a test failing against an emulator deserves to know why.

const authenticationErrorDetail = "AuthenticationErrorDetail"

func authErr(code string, status int, msg, detail string) *azq.Error {
	e := &azq.Error{Code: azq.ErrorCode(code), StatusCode: status, Message: msg}
	if detail != "" {
		e.Details = []azq.Detail{{Name: authenticationErrorDetail, Value: detail}}
	}
	return e
}

// authFailed is 403 AuthenticationFailed: the credential is present but
// wrong (bad signature, expired or malformed SAS, unknown policy).
func authFailed(detail string) *azq.Error {
	return authErr("AuthenticationFailed", http.StatusForbidden,
		"Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.",
		detail)
}

// errNoAuthenticationInformation is 401 NoAuthenticationInformation, for
// requests without any credential. Azure sends it with a
// "WWW-Authenticate: Bearer authorization_uri=…, resource_id=…" challenge;
// the handler may add bearerChallenge for clients that look for it.
func errNoAuthenticationInformation() *azq.Error {
	return authErr("NoAuthenticationInformation", http.StatusUnauthorized,
		"Server failed to authenticate the request. Please refer to the information in the www-authenticate header.",
		"")
}

// bearerChallenge is the WWW-Authenticate value Azure Storage sends with
// 401 NoAuthenticationInformation.
const bearerChallenge = "Bearer authorization_uri=https://login.microsoftonline.com/common/oauth2/authorize resource_id=https://storage.azure.com"

// invalidAuthInfo is 400 InvalidAuthenticationInfo, for an Authorization
// header that cannot be parsed at all. The status is what the service
// answers in practice (e.g. "Response code 400 (Authentication information
// is not given in the correct format. Check the value of Authorization
// header.)" in OpenAPITools/openapi-generator CI reports); Azurite also
// uses 400.
func invalidAuthInfo(detail string) *azq.Error {
	return authErr("InvalidAuthenticationInfo", http.StatusBadRequest,
		"Authentication information is not given in the correct format. Check the value of Authorization header.",
		detail)
}

// errWriteOnSecondary is Azure's answer to a write sent to the read-only
// secondary endpoint.
func errWriteOnSecondary() *azq.Error {
	return authErr("InsufficientAccountPermissions", http.StatusForbidden,
		"Write operations are not allowed.", "")
}

// The following are Azure's SAS error codes (Shared access signature error
// codes, learn.microsoft.com/rest/api/storageservices/sas-error-codes).

func authzFailure(detail string) *azq.Error {
	return authErr("AuthorizationFailure", http.StatusForbidden,
		"This request is not authorized to perform this operation.", detail)
}

func authzPermissionMismatch(detail string) *azq.Error {
	return authErr("AuthorizationPermissionMismatch", http.StatusForbidden,
		"This request is not authorized to perform this operation using this permission.", detail)
}

func authzServiceMismatch(detail string) *azq.Error {
	return authErr("AuthorizationServiceMismatch", http.StatusForbidden,
		"This request is not authorized to perform this operation using this service.", detail)
}

func authzResourceTypeMismatch(detail string) *azq.Error {
	return authErr("AuthorizationResourceTypeMismatch", http.StatusForbidden,
		"This request is not authorized to perform this operation using this resource type.", detail)
}

func authzProtocolMismatch(detail string) *azq.Error {
	return authErr("AuthorizationProtocolMismatch", http.StatusForbidden,
		"This request is not authorized to perform this operation using this protocol.", detail)
}

func authzSourceIPMismatch(ip, detail string) *azq.Error {
	return authErr("AuthorizationSourceIPMismatch", http.StatusForbidden,
		"This request is not authorized to perform this operation using this source IP "+ip+".", detail)
}
