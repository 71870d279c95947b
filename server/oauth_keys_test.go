package server

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var (
	rsaOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

// testRSAKey is generated once: 2048-bit generation is slow under -race.
func testRSAKey(t testing.TB) *rsa.PrivateKey {
	rsaOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		rsaKey = k
	})
	return rsaKey
}

func pemBlock(t testing.TB, typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

func pkixPEM(t testing.TB, k crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock(t, "PUBLIC KEY", der)
}

func selfSignedDER(t testing.TB, priv crypto.Signer) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: "token signer"},
		NotBefore:    testNow.Add(-time.Hour),
		NotAfter:     testNow.Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwkOf renders a public key as a JWK with the given kid.
func jwkOf(t testing.TB, k crypto.PublicKey, kid string) map[string]any {
	t.Helper()
	switch k := k.(type) {
	case *rsa.PublicKey:
		return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "n": b64u(k.N.Bytes()), "e": b64u(big.NewInt(int64(k.E)).Bytes())}
	case *ecdsa.PublicKey:
		size := (k.Curve.Params().BitSize + 7) / 8
		return map[string]any{"kty": "EC", "kid": kid, "crv": k.Curve.Params().Name,
			"x": b64u(k.X.FillBytes(make([]byte, size))), "y": b64u(k.Y.FillBytes(make([]byte, size)))}
	case ed25519.PublicKey:
		return map[string]any{"kty": "OKP", "kid": kid, "crv": "Ed25519", "x": b64u(k)}
	}
	t.Fatalf("no JWK for %T", k)
	return nil
}

func jwks(t testing.TB, keys ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseOAuthKeys(t *testing.T) {
	rk := testRSAKey(t)
	ek := tokenKey
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edPub, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	smallRSA, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalECPrivateKey(ek)
	if err != nil {
		t.Fatal(err)
	}
	offCurve := jwkOf(t, &ek.PublicKey, "bad")
	offCurve["y"] = offCurve["x"]

	cases := []struct {
		name string
		in   string
		want []OAuthKey // nil: an error is wanted
		err  string
	}{
		{"PKIX EC", pkixPEM(t, &ek.PublicKey), []OAuthKey{{Key: &ek.PublicKey}}, ""},
		{"PKIX RSA and Ed25519 with text around", "issuer keys\n" + pkixPEM(t, &rk.PublicKey) + "\n--\n" + pkixPEM(t, edPub),
			[]OAuthKey{{Key: &rk.PublicKey}, {Key: edPub}}, ""},
		{"PKCS1 RSA", pemBlock(t, "RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&rk.PublicKey)), []OAuthKey{{Key: &rk.PublicKey}}, ""},
		{"certificate", pemBlock(t, "CERTIFICATE", selfSignedDER(t, ek)), []OAuthKey{{Key: &ek.PublicKey}}, ""},
		{"JWKS", jwks(t, jwkOf(t, &rk.PublicKey, "r1"), jwkOf(t, p384.Public(), "e1"), jwkOf(t, edPub, "o1")),
			[]OAuthKey{{ID: "r1", Key: &rk.PublicKey}, {ID: "e1", Key: p384.Public()}, {ID: "o1", Key: edPub}}, ""},
		{"JWKS, x5c only", jwks(t, map[string]any{"kty": "RSA", "kid": "c1", "x5c": []string{base64.StdEncoding.EncodeToString(selfSignedDER(t, rk))}}),
			[]OAuthKey{{ID: "c1", Key: &rk.PublicKey}}, ""},
		{"JWKS skips encryption keys", jwks(t, map[string]any{"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB"}, jwkOf(t, &ek.PublicKey, "s")),
			[]OAuthKey{{ID: "s", Key: &ek.PublicKey}}, ""},
		{"single JWK", func() string { b, _ := json.Marshal(jwkOf(t, edPub, "one")); return string(b) }(),
			[]OAuthKey{{ID: "one", Key: edPub}}, ""},

		{"empty", "", nil, "no keys found"},
		{"not PEM", "hello", nil, "no keys found"},
		{"PEM private key", pemBlock(t, "EC PRIVATE KEY", ecDER), nil, "private key"},
		{"PEM of another type", pemBlock(t, "CERTIFICATE REQUEST", []byte{1}), nil, "unsupported type"},
		{"PEM garbage", pemBlock(t, "PUBLIC KEY", []byte("junk")), nil, "PEM block 1"},
		{"small RSA", pkixPEM(t, &smallRSA.PublicKey), nil, "want at least 2048"},
		{"JSON not a key set", `{"keys": 3}`, nil, "JSON Web Key Set"},
		{"empty key set", `{"keys": []}`, nil, "no signature keys"},
		{"only encryption keys", jwks(t, map[string]any{"kty": "RSA", "use": "enc"}), nil, "no signature keys"},
		{"private JWK", jwks(t, map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64u(edPub), "d": b64u(edPriv.Seed())}), nil, "private key"},
		{"symmetric JWK", jwks(t, map[string]any{"kty": "oct", "k": "c2VjcmV0"}), nil, "unsupported key type"},
		{"EC point off the curve", jwks(t, offCurve), nil, "not on the curve"},
		{"EC unknown curve", jwks(t, map[string]any{"kty": "EC", "crv": "secp256k1", "x": "AA", "y": "AA"}), nil, "want P-256"},
		{"RSA even exponent", jwks(t, map[string]any{"kty": "RSA", "n": b64u(rk.N.Bytes()), "e": "Ag"}), nil, "exponent"},
		{"RSA huge exponent", jwks(t, map[string]any{"kty": "RSA", "n": b64u(rk.N.Bytes()), "e": "AQEBAQE"}), nil, "e is not"},
		{"RSA without anything", jwks(t, map[string]any{"kty": "RSA"}), nil, "without parameters"},
		{"Ed448", jwks(t, map[string]any{"kty": "OKP", "crv": "Ed448", "x": "AA"}), nil, "want Ed25519"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseOAuthKeys([]byte(c.in))
			if c.want == nil {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, %v; want an error containing %q", got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %d keys, want %d", len(got), len(c.want))
			}
			for i := range got {
				eq, ok := got[i].Key.(interface{ Equal(crypto.PublicKey) bool })
				if got[i].ID != c.want[i].ID || !ok || !eq.Equal(c.want[i].Key) {
					t.Fatalf("key %d: got %s %T, want %s %T", i, got[i].ID, got[i].Key, c.want[i].ID, c.want[i].Key)
				}
			}
		})
	}
}

// TestParsedKeysVerifyTokens: keys read from a JWKS verify RS256 tokens
// the way Entra ID signs them, choosing the key by kid.
func TestParsedKeysVerifyTokens(t *testing.T) {
	rk := testRSAKey(t)
	keys, err := ParseOAuthKeys([]byte(jwks(t, jwkOf(t, &tokenKey.PublicKey, "ec"), jwkOf(t, &rk.PublicKey, "rsa"))))
	if err != nil {
		t.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, validClaims())
	tok.Header["kid"] = "rsa"
	s, err := tok.SignedString(rk)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, authorize(bearerRequest(s, opGetMessages, keys...)), "", 0)
	tok.Header["kid"] = "ec"
	s, err = tok.SignedString(rk)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, authorize(bearerRequest(s, opGetMessages, keys...)), "InvalidAuthenticationInfo", 401)
}

func FuzzParseOAuthKeys(f *testing.F) {
	f.Add([]byte(pkixPEM(f, &tokenKey.PublicKey)))
	f.Add([]byte(jwks(f, jwkOf(f, &tokenKey.PublicKey, "a"), map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64u(make([]byte, 32))})))
	f.Add([]byte(`{"kty":"RSA","n":"AQAB","e":"AQAB","x5c":["AA=="]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-521","x":"","y":""}]}`))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := ParseOAuthKeys(data)
		if err != nil {
			if keys != nil {
				t.Fatal("keys with an error")
			}
			return
		}
		if len(keys) == 0 {
			t.Fatal("no keys and no error")
		}
		for _, k := range keys {
			if err := checkVerificationKey(k.Key); err != nil {
				t.Fatalf("returned an unusable key: %v", err)
			}
		}
	})
}

// FuzzBearerToken: whatever the Authorization value, a server with keys
// accepts no token the fuzzer could forge, and every refusal is an Azure
// error the handler can send.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{
		mintToken(f, validClaims(), tokenKey, ""),
		mintToken(f, validClaims(), tokenKey, "k1"),
		"eyJhbGciOiJub25lIn0.eyJleHAiOjQxMDI0NDQ4MDB9.",
		"eyJhbGciOiJIUzI1NiJ9.e30.c2ln",
		"a.b.c", "..", "", strings.Repeat("A.", 40),
		"bnVsbA.e30.c2ln", // a header of JSON null
		"W10.e30.c2ln",    // []
	} {
		f.Add("Bearer " + s)
	}
	f.Add("bearer\t x")
	keys := []OAuthKey{{Key: &otherTokenKey.PublicKey}, {ID: "k1", Key: &otherTokenKey.PublicKey}}
	f.Fuzz(func(t *testing.T, header string) {
		for _, o := range fuzzOps {
			for _, withKeys := range []bool{true, false} {
				r := fuzzRequest(o.path, "")
				r.TLS = &tls.ConnectionState{}
				r.Header["Authorization"] = []string{header}
				r.Header["X-Ms-Version"] = []string{"2021-12-02"}
				acct := DevelopmentAccount()
				a := authRequest{r: r, account: &acct, keys: acct.keyBytes(), queue: o.queue, op: o.op, now: testNow,
					policy: fuzzPolicy, oauth: newBearerVerifier(&OAuthOptions{})}
				if withKeys {
					a.oauth = newBearerVerifier(&OAuthOptions{Keys: keys})
				}
				err := authorize(a)
				if err == nil && withKeys {
					t.Fatalf("accepted a token no configured key signed: %q", header)
				}
				checkAuthResult(t, err)
				if !headerNamesAlg(header) {
					// A key ID is looked up only for a header that
					// is an object naming an algorithm.
					for _, d := range details(err) {
						if strings.Contains(d.Value, "key ID") {
							t.Fatalf("token %q, whose header names no algorithm, refused with %q", header, d.Value)
						}
					}
				}
			}
		}
	})
}

// headerNamesAlg reports whether the Authorization value's token has a
// header that decodes to a JSON object with a string alg.
func headerNamesAlg(authorization string) bool {
	_, token, _ := strings.Cut(strings.TrimSpace(authorization), " ")
	head, _, _ := strings.Cut(strings.TrimSpace(token), ".")
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(head, "="))
	if err != nil {
		return false
	}
	var h any
	if json.Unmarshal(raw, &h) != nil {
		return false
	}
	m, ok := h.(map[string]any)
	if !ok {
		return false
	}
	_, ok = m["alg"].(string)
	return ok
}
