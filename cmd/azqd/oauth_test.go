package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"
	"github.com/golang-jwt/jwt/v5"
)

// signer is a TokenCredential that mints Entra ID-shaped tokens with its
// key, standing in for azidentity.
type signer struct {
	key *ecdsa.PrivateKey
	kid string
	iss string // "" for a production Entra ID v2.0 issuer
}

func newSigner(t *testing.T, kid string) signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{key: k, kid: kid}
}

func (s signer) GetToken(_ context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	now := time.Now()
	iss := s.iss
	if iss == "" {
		iss = "https://login.microsoftonline.com/00000000-0000-0000-0000-000000000000/v2.0"
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"aud": strings.TrimSuffix(opts.Scopes[0], "/.default"),
		"iss": iss,
		"nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	})
	if s.kid != "" {
		tok.Header["kid"] = s.kid
	}
	str, err := tok.SignedString(s.key)
	return azcore.AccessToken{Token: str, ExpiresOn: now.Add(time.Hour)}, err
}

// jwksFile writes the signers' public keys as a JSON Web Key Set.
func jwksFile(t *testing.T, signers ...signer) string {
	t.Helper()
	var keys []map[string]string
	for _, s := range signers {
		p := s.key.PublicKey
		keys = append(keys, map[string]string{
			"kty": "EC", "crv": "P-256", "kid": s.kid, "use": "sig",
			"x": base64.RawURLEncoding.EncodeToString(p.X.FillBytes(make([]byte, 32))),
			"y": base64.RawURLEncoding.EncodeToString(p.Y.FillBytes(make([]byte, 32))),
		})
	}
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestOAuth(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	trusted, stranger := newSigner(t, "k1"), newSigner(t, "k1")
	pemFile := filepath.Join(t.TempDir(), "key.pem")
	der, err := x509.MarshalPKIXPublicKey(&trusted.key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		args      []string
		banner    string
		strangers bool // tokens from an unknown key pass
	}{
		{"unchecked", []string{"-oauth"}, "azqd: Microsoft Entra ID bearer tokens are accepted; signatures are not checked (give -oauth-key to check them)", true},
		{"JWKS", []string{"-oauth-key", jwksFile(t, trusted)}, "signatures are checked against 1 key(s) from", false},
		{"PEM", []string{"-oauth", "-oauth-key", pemFile}, "signatures are checked against 1 key(s) from", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := start(t, append([]string{"-tls-cert", certFile, "-tls-key", keyFile}, tc.args...)...)
			var banner string
			for _, l := range d.printed {
				if strings.Contains(l, "bearer tokens") {
					banner = l
				}
			}
			if !strings.Contains(banner, tc.banner) {
				t.Fatalf("printed %q, want %q", d.printed, tc.banner)
			}
			ctx := testContext(t)
			svc, err := azqueue.NewServiceClient(d.base+"/devstoreaccount1/", trusted, clientOptions(client))
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, svc.NewQueueClient("entra"))

			other, err := azqueue.NewServiceClient(d.base+"/devstoreaccount1/", stranger, clientOptions(client))
			if err != nil {
				t.Fatal(err)
			}
			_, err = other.NewQueueClient("entra").PeekMessage(ctx, nil)
			if tc.strangers {
				if err != nil {
					t.Fatalf("unchecked mode refused a token: %v", err)
				}
			} else if !queueerror.HasCode(err, queueerror.InvalidAuthenticationInfo) {
				t.Fatalf("a token from an unknown key: %v, want InvalidAuthenticationInfo", err)
			}
		})
	}
}

// TestOAuthIssuersByMode: Azurite's --oauth basic accepts the issuers
// Azurite accepts, its pre-production one among them, as tokens minted
// for Azurite's own tests carry; azqd's -oauth accepts production Entra
// ID issuers only, and says where the other would pass.
func TestOAuthIssuersByMode(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	ppe := newSigner(t, "")
	ppe.iss = "https://sts.windows-ppe.net/ab1f708d-50f6-404c-a006-d71b2ac7a606/"
	production := newSigner(t, "")
	for _, tc := range []struct {
		name       string
		args       []string
		ppeAllowed bool
	}{
		{"Azurite's --oauth basic", []string{"--oauth", "basic", "--cert", certFile, "--key", keyFile}, true},
		{"azqd's -oauth", []string{"-oauth", "-tls-cert", certFile, "-tls-key", keyFile}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := start(t, tc.args...)
			ctx := testContext(t)
			svc, err := azqueue.NewServiceClient(d.base+"/devstoreaccount1/", production, clientOptions(client))
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, svc.NewQueueClient("issuers"))
			other, err := azqueue.NewServiceClient(d.base+"/devstoreaccount1/", ppe, clientOptions(client))
			if err != nil {
				t.Fatal(err)
			}
			_, err = other.NewQueueClient("issuers").GetProperties(ctx, nil)
			switch {
			case tc.ppeAllowed && err != nil:
				t.Fatalf("a pre-production issuer: %v", err)
			case !tc.ppeAllowed && (!queueerror.HasCode(err, queueerror.InvalidAuthenticationInfo) ||
				!strings.Contains(err.Error(), "Issuer validation failed") || !strings.Contains(err.Error(), "--oauth basic")):
				t.Fatalf("a pre-production issuer: %v, want InvalidAuthenticationInfo for the issuer", err)
			}
		})
	}
}

func TestOAuthFlagErrors(t *testing.T) {
	certFile, keyFile, _ := selfSigned(t)
	var stderr lockedBuffer
	// Tokens need HTTPS.
	if err := run(context.Background(), []string{"-oauth"}, io.Discard, &stderr); !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "-oauth needs -tls-cert") {
		t.Fatalf("-oauth without TLS: %v %q", err, stderr.String())
	}
	// A key file that is missing or holds no keys stops azqd before it
	// listens.
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("no keys here"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(t.TempDir(), "missing.pem"), empty} {
		err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-tls-cert", certFile, "-tls-key", keyFile, "-oauth-key", f}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "OAuth keys") {
			t.Fatalf("-oauth-key %s: %v", f, err)
		}
	}
}
