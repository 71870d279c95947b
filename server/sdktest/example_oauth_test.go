package sdktest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/server"
	"github.com/golang-jwt/jwt/v5"
)

// testTokens is a TokenCredential for tests: where production code passes
// azidentity.NewDefaultAzureCredential, a test passes this, which mints
// Entra ID-shaped tokens signed with its own key.
type testTokens struct{ key *ecdsa.PrivateKey }

func (c testTokens) GetToken(_ context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	now := time.Now()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"aud": strings.TrimSuffix(opts.Scopes[0], "/.default"), // https://storage.azure.com
		"iss": "https://sts.windows.net/00000000-0000-0000-0000-000000000000/",
		"nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}).SignedString(c.key)
	return azcore.AccessToken{Token: tok, ExpiresOn: now.Add(time.Hour)}, err
}

// Code that authenticates with Microsoft Entra ID runs unchanged against
// the server: turn on OAuth, serve HTTPS (the SDKs send tokens over HTTPS
// only), and give the SDK a TokenCredential. With Keys set, the server
// checks each token's signature as well as its audience, issuer and
// lifetime.
func ExampleOAuthOptions() {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	srv := server.New(server.Options{
		OAuth: &server.OAuthOptions{Keys: []server.OAuthKey{{Key: &key.PublicKey}}},
	})
	hs := httptest.NewTLSServer(srv)
	defer hs.Close()
	defer srv.Close()

	opts := &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: hs.Client()}}
	svc, err := azqueue.NewServiceClient(hs.URL+"/devstoreaccount1/", testTokens{key}, opts)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if _, err := svc.CreateQueue(ctx, "orders", nil); err != nil {
		panic(err)
	}
	q := svc.NewQueueClient("orders")
	if _, err := q.EnqueueMessage(ctx, "paid with a token", nil); err != nil {
		panic(err)
	}
	got, err := q.PeekMessage(ctx, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(*got.Messages[0].MessageText)

	// Stored access policies stay with the account key, as in Azure.
	_, err = q.GetAccessPolicy(ctx, nil)
	fmt.Println(strings.Contains(err.Error(), "AuthorizationFailure"))
	// Output:
	// paid with a token
	// true
}
