package sdktest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"
	"github.com/azqlib/azq/server"
	"github.com/benbjohnson/clock"
	"github.com/golang-jwt/jwt/v5"
)

// The tests in this file drive the handler over TLS with the SDK's token
// credential clients (NewServiceClient, NewQueueClient), as production
// code written for azidentity does.

// mintingCredential is an azcore.TokenCredential that stands in for
// azidentity: it mints Entra ID-shaped access tokens for the scope it is
// asked for, signed with its key and valid for an hour by the server's
// clock.
type mintingCredential struct {
	key    *ecdsa.PrivateKey
	kid    string
	now    func() time.Time
	adjust func(jwt.MapClaims) // changes the claims of every token; may be nil

	mu    sync.Mutex
	calls int // GetToken calls so far
}

func newMintingCredential(t *testing.T, now func() time.Time) *mintingCredential {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &mintingCredential{key: key, kid: "test-key", now: now}
}

func (c *mintingCredential) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	now := c.now()
	aud := "https://storage.azure.com"
	if len(opts.Scopes) > 0 {
		aud = strings.TrimSuffix(opts.Scopes[0], "/.default")
	}
	claims := jwt.MapClaims{
		"aud": aud,
		"iss": "https://sts.windows.net/72f988bf-86f1-41af-91ab-2d7cd011db47/",
		"iat": now.Unix(),
		"nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
		"oid": "0a1b2c3d-0000-4000-8000-000000000001",
		"tid": "72f988bf-86f1-41af-91ab-2d7cd011db47",
	}
	if c.adjust != nil {
		c.adjust(claims)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = c.kid
	s, err := tok.SignedString(c.key)
	if err != nil {
		return azcore.AccessToken{}, err
	}
	return azcore.AccessToken{Token: s, ExpiresOn: now.Add(time.Hour)}, nil
}

// with returns a fresh credential with c's key that applies adjust.
func (c *mintingCredential) with(adjust func(jwt.MapClaims)) *mintingCredential {
	return &mintingCredential{key: c.key, kid: c.kid, now: c.now, adjust: adjust}
}

func (c *mintingCredential) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// oauthEnv is a TLS server that accepts tokens signed by cred's key.
type oauthEnv struct {
	clk      *clock.Mock
	hs       *httptest.Server
	endpoint string // path-style account endpoint, with a trailing slash
	cred     *mintingCredential
}

func newOAuthEnv(t *testing.T, tls bool, oauth func(cred *mintingCredential) *server.OAuthOptions) *oauthEnv {
	t.Helper()
	clk := clock.NewMock()
	clk.Set(start())
	cred := newMintingCredential(t, clk.Now)
	s := server.New(server.Options{Clock: clk, OAuth: oauth(cred)})
	hs := httptest.NewUnstartedServer(s)
	if tls {
		hs.StartTLS()
	} else {
		hs.Start()
	}
	t.Cleanup(func() { hs.Close(); s.Close() })
	return &oauthEnv{clk: clk, hs: hs, endpoint: hs.URL + "/devstoreaccount1/", cred: cred}
}

// verifyingKey configures the credential's public key.
func verifyingKey(cred *mintingCredential) *server.OAuthOptions {
	return &server.OAuthOptions{Keys: []server.OAuthKey{{ID: cred.kid, Key: &cred.key.PublicKey}}}
}

func (e *oauthEnv) options() *azqueue.ClientOptions {
	o := clientOptions()
	o.Transport = e.hs.Client()
	return o
}

func (e *oauthEnv) service(t *testing.T, cred azcore.TokenCredential) *azqueue.ServiceClient {
	t.Helper()
	svc, err := azqueue.NewServiceClient(e.endpoint, cred, e.options())
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func TestSDKOAuthEndToEnd(t *testing.T) {
	ctx := context.Background()
	e := newOAuthEnv(t, true, verifyingKey)
	svc := e.service(t, e.cred)

	if _, err := svc.CreateQueue(ctx, "tokens", &azqueue.CreateOptions{Metadata: map[string]*string{"team": to.Ptr("blue")}}); err != nil {
		t.Fatalf("create: %v", err)
	}
	q := svc.NewQueueClient("tokens")
	if _, err := q.EnqueueMessage(ctx, "first", nil); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, err := q.EnqueueMessage(ctx, "second", nil); err != nil {
		t.Fatalf("put: %v", err)
	}
	peek, err := q.PeekMessage(ctx, nil)
	if err != nil || len(peek.Messages) != 1 || *peek.Messages[0].MessageText != "first" {
		t.Fatalf("peek: %+v %v", peek, err)
	}
	got, err := q.DequeueMessage(ctx, nil)
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("get: %+v %v", got, err)
	}
	m := got.Messages[0]
	upd, err := q.UpdateMessage(ctx, *m.MessageID, *m.PopReceipt, "first, updated", nil)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if _, err := q.DeleteMessage(ctx, *m.MessageID, *upd.PopReceipt, nil); err != nil {
		t.Fatalf("delete message: %v", err)
	}
	if _, err := q.SetMetadata(ctx, &azqueue.SetMetadataOptions{Metadata: map[string]*string{"team": to.Ptr("red")}}); err != nil {
		t.Fatalf("set metadata: %v", err)
	}
	props, err := q.GetProperties(ctx, nil)
	if err != nil || *props.ApproximateMessagesCount != 1 || *props.Metadata["Team"] != "red" {
		t.Fatalf("properties: %+v %v", props, err)
	}
	page, err := svc.NewListQueuesPager(nil).NextPage(ctx)
	if err != nil || len(page.Queues) != 1 || *page.Queues[0].Name != "tokens" {
		t.Fatalf("list: %+v %v", page, err)
	}
	if _, err := svc.GetServiceProperties(ctx, nil); err != nil {
		t.Fatalf("service properties: %v", err)
	}
	if _, err := q.ClearMessages(ctx, nil); err != nil {
		t.Fatalf("clear: %v", err)
	}

	// Azure keeps a queue's stored access policies to the account key.
	_, err = q.GetAccessPolicy(ctx, nil)
	wantCode(t, err, queueerror.AuthorizationFailure)
	wantStatus(t, err, http.StatusForbidden)
	_, err = q.SetAccessPolicy(ctx, &azqueue.SetAccessPolicyOptions{QueueACL: []*azqueue.SignedIdentifier{{
		ID: to.Ptr("p1"), AccessPolicy: &azqueue.AccessPolicy{Expiry: to.Ptr(e.clk.Now().Add(time.Hour)), Permission: to.Ptr("r")},
	}}})
	wantCode(t, err, queueerror.AuthorizationFailure)

	if _, err := svc.DeleteQueue(ctx, "tokens", nil); err != nil {
		t.Fatalf("delete queue: %v", err)
	}
}

// TestSDKOAuthAccountAudience: a queue client may ask for a token for the
// account's own endpoint (ClientOptions.Audience) instead of all of
// storage. A token for another account is refused with the bearer
// challenge, whose resource_id sends the SDK back for a storage-wide
// token, as against Azure.
func TestSDKOAuthAccountAudience(t *testing.T) {
	ctx := context.Background()
	e := newOAuthEnv(t, true, verifyingKey)
	if _, err := e.service(t, e.cred).CreateQueue(ctx, "aud", nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		audience string
		tokens   int // tokens the credential mints for one request
	}{
		{"https://devstoreaccount1.queue.core.windows.net", 1},
		{"https://otheraccount.queue.core.windows.net", 2},
	} {
		var auds []string
		cred := e.cred.with(func(c jwt.MapClaims) { auds = append(auds, c["aud"].(string)) })
		o := e.options()
		o.Audience = tc.audience
		q, err := azqueue.NewQueueClient(e.endpoint+"aud", cred, o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.EnqueueMessage(ctx, "hello", nil); err != nil {
			t.Fatalf("audience %s: %v", tc.audience, err)
		}
		if cred.count() != tc.tokens || auds[0] != tc.audience || (tc.tokens == 2 && auds[1] != "https://storage.azure.com") {
			t.Fatalf("audience %s: minted %d tokens for %v", tc.audience, cred.count(), auds)
		}
	}
}

// TestSDKOAuthRefusedTokens: each kind of bad token gets Azure's 401
// InvalidAuthenticationInfo with its reason, and changes nothing.
func TestSDKOAuthRefusedTokens(t *testing.T) {
	ctx := context.Background()
	e := newOAuthEnv(t, true, verifyingKey)
	if _, err := e.service(t, e.cred).CreateQueue(ctx, "guarded", nil); err != nil {
		t.Fatal(err)
	}
	stranger := newMintingCredential(t, e.clk.Now)
	stranger.kid = e.cred.kid
	cases := []struct {
		name   string
		cred   *mintingCredential
		adjust func(jwt.MapClaims)
		reason string
	}{
		{"signed by another key", stranger, nil, "Signature validation failed"},
		{"expired", e.cred, func(c jwt.MapClaims) { c["exp"] = e.clk.Now().Add(-time.Hour).Unix() }, "The token is expired"},
		{"not yet valid", e.cred, func(c jwt.MapClaims) { c["nbf"] = e.clk.Now().Add(time.Hour).Unix() }, "The token is not yet valid"},
		{"another resource", e.cred, func(c jwt.MapClaims) { c["aud"] = "https://vault.azure.net" }, "Audience validation failed"},
		{"another issuer", e.cred, func(c jwt.MapClaims) { c["iss"] = "https://issuer.example/" }, "Issuer validation failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := e.service(t, tc.cred.with(tc.adjust)).NewQueueClient("guarded")
			_, err := q.EnqueueMessage(ctx, "must not land", nil)
			wantCode(t, err, queueerror.InvalidAuthenticationInfo)
			wantStatus(t, err, http.StatusUnauthorized)
			if !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("error %v, want the reason %q", err, tc.reason)
			}
		})
	}
	props, err := e.service(t, e.cred).NewQueueClient("guarded").GetProperties(ctx, nil)
	if err != nil || *props.ApproximateMessagesCount != 0 {
		t.Fatalf("refused requests changed the queue: %+v %v", props, err)
	}
}

// TestSDKOAuthChallengeRefreshesToken: a token that expired by the
// server's clock is refused with the bearer challenge, and the SDK's queue
// client, which answers challenges, fetches a new token and retries.
func TestSDKOAuthChallengeRefreshesToken(t *testing.T) {
	ctx := context.Background()
	e := newOAuthEnv(t, true, verifyingKey)
	q, err := azqueue.NewQueueClient(e.endpoint+"refresh", e.cred, e.options())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := e.cred.count(); n != 1 {
		t.Fatalf("%d tokens for the first request, want 1", n)
	}
	// The SDK caches the token by the real clock, which has hardly moved;
	// by the server's clock it is now two hours old.
	e.clk.Add(2 * time.Hour)
	if _, err := q.EnqueueMessage(ctx, "after the challenge", nil); err != nil {
		t.Fatalf("put with an expired token: %v", err)
	}
	if n := e.cred.count(); n != 2 {
		t.Fatalf("%d tokens after the challenge, want 2", n)
	}
}

func TestSDKOAuthTransportAndMode(t *testing.T) {
	ctx := context.Background()
	t.Run("over HTTP", func(t *testing.T) {
		e := newOAuthEnv(t, false, verifyingKey)
		o := e.options()
		o.InsecureAllowCredentialWithHTTP = true
		svc, err := azqueue.NewServiceClient(e.endpoint, e.cred, o)
		if err != nil {
			t.Fatal(err)
		}
		_, err = svc.CreateQueue(ctx, "plain", nil)
		wantCode(t, err, queueerror.AuthenticationFailed)
		wantStatus(t, err, http.StatusForbidden)
		if !strings.Contains(err.Error(), "not allowed over HTTP") {
			t.Fatal(err)
		}
	})
	t.Run("OAuth off", func(t *testing.T) {
		e := newOAuthEnv(t, true, func(*mintingCredential) *server.OAuthOptions { return nil })
		_, err := e.service(t, e.cred).CreateQueue(ctx, "off", nil)
		wantCode(t, err, queueerror.AuthenticationFailed)
		wantStatus(t, err, http.StatusForbidden)
	})
	t.Run("no keys: signatures unchecked", func(t *testing.T) {
		e := newOAuthEnv(t, true, func(*mintingCredential) *server.OAuthOptions { return &server.OAuthOptions{} })
		stranger := newMintingCredential(t, e.clk.Now)
		if _, err := e.service(t, stranger).CreateQueue(ctx, "basic", nil); err != nil {
			t.Fatal(err)
		}
	})
}
