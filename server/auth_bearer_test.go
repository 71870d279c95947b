package server

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// tokenKey signs the tokens of these tests; otherTokenKey is a stranger's.
var tokenKey, otherTokenKey = mustECKey(), mustECKey()

func mustECKey() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

const testTenant = "72f988bf-86f1-41af-91ab-2d7cd011db47"

// validClaims are the claims of a token Entra ID would issue for storage,
// valid for an hour around testNow.
func validClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"aud": "https://storage.azure.com",
		"iss": "https://sts.windows.net/" + testTenant + "/",
		"iat": testNow.Add(-time.Minute).Unix(),
		"nbf": testNow.Add(-time.Minute).Unix(),
		"exp": testNow.Add(time.Hour).Unix(),
		"oid": "11111111-2222-3333-4444-555555555555",
		"tid": testTenant,
	}
}

// mintToken signs claims with ES256 under key, with the given kid ("" for
// none).
func mintToken(t testing.TB, claims jwt.MapClaims, key *ecdsa.PrivateKey, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// bearerRequest is a request over HTTPS with a current version and the
// token, to a server with OAuth on and the given keys.
func bearerRequest(token string, op operation, keys ...OAuthKey) authRequest {
	a := newAuthRequest("GET", "/devstoreaccount1/myqueue?comp=metadata", op, "myqueue")
	a.r.TLS = &tls.ConnectionState{}
	a.r.Header.Set("x-ms-version", "2020-02-10")
	a.r.Header.Set("Authorization", "Bearer "+token)
	a.oauth = newBearerVerifier(&OAuthOptions{Keys: keys})
	return a
}

// with returns validClaims changed by set (a nil value deletes the claim).
func with(set map[string]any) jwt.MapClaims {
	c := validClaims()
	for k, v := range set {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func TestBearerClaims(t *testing.T) {
	cases := []struct {
		name   string
		claims jwt.MapClaims
		code   string // "" for success
		detail string // start of the AuthenticationErrorDetail
	}{
		{"valid v1 token", validClaims(), "", ""},
		{"audience with slash", with(map[string]any{"aud": "https://storage.azure.com/"}), "", ""},
		{"audience is the storage app ID", with(map[string]any{"aud": storageAppID}), "", ""},
		{"audience is the account endpoint", with(map[string]any{"aud": "https://devstoreaccount1.queue.core.windows.net"}), "", ""},
		{"audience is the account endpoint, slash", with(map[string]any{"aud": "https://devstoreaccount1.queue.core.windows.net/"}), "", ""},
		{"audience in US Government", with(map[string]any{"aud": "https://devstoreaccount1.queue.core.usgovcloudapi.net"}), "", ""},
		{"audience in China", with(map[string]any{"aud": "https://devstoreaccount1.queue.core.chinacloudapi.cn/"}), "", ""},
		{"audience list", with(map[string]any{"aud": []string{"https://graph.microsoft.com", "https://storage.azure.com"}}), "", ""},
		{"v2 issuer", with(map[string]any{"iss": "https://login.microsoftonline.com/" + testTenant + "/v2.0"}), "", ""},
		{"v2 issuer, US Government", with(map[string]any{"iss": "https://login.microsoftonline.us/" + testTenant + "/v2.0"}), "", ""},
		{"v2 issuer, China", with(map[string]any{"iss": "https://login.chinacloudapi.cn/" + testTenant + "/v2.0"}), "", ""},
		{"v2 issuer, China partner host", with(map[string]any{"iss": "https://login.partner.microsoftonline.cn/" + testTenant + "/v2.0"}), "", ""},
		{"v1 issuer, China", with(map[string]any{"iss": "https://sts.chinacloudapi.cn/" + testTenant + "/"}), "", ""},
		{"upper-case tenant", with(map[string]any{"iss": "https://sts.windows.net/" + strings.ToUpper(testTenant) + "/"}), "", ""},
		{"no nbf", with(map[string]any{"nbf": nil}), "", ""},
		{"expired within the skew", with(map[string]any{"exp": testNow.Add(-oauthClockSkew).Unix()}), "", ""},
		{"not yet valid within the skew", with(map[string]any{"nbf": testNow.Add(oauthClockSkew).Unix()}), "", ""},

		{"expired", with(map[string]any{"exp": testNow.Add(-oauthClockSkew - time.Second).Unix()}), "InvalidAuthenticationInfo", "Lifetime validation failed. The token is expired."},
		{"not yet valid", with(map[string]any{"nbf": testNow.Add(oauthClockSkew + time.Second).Unix()}), "InvalidAuthenticationInfo", "Lifetime validation failed. The token is not yet valid."},
		{"no exp", with(map[string]any{"exp": nil}), "InvalidAuthenticationInfo", "Lifetime validation failed. The token has no expiration time"},
		{"exp is text", with(map[string]any{"exp": "tomorrow"}), "InvalidAuthenticationInfo", "The bearer token is not a well-formed JSON Web Token"},
		{"no audience", with(map[string]any{"aud": nil}), "InvalidAuthenticationInfo", "Audience validation failed."},
		{"other resource", with(map[string]any{"aud": "https://vault.azure.net"}), "InvalidAuthenticationInfo", "Audience validation failed."},
		{"scope instead of audience", with(map[string]any{"aud": "https://storage.azure.com/.default"}), "InvalidAuthenticationInfo", "Audience validation failed."},
		{"plain http audience", with(map[string]any{"aud": "http://storage.azure.com"}), "InvalidAuthenticationInfo", "Audience validation failed."},
		{"another account's endpoint", with(map[string]any{"aud": "https://someoneelse.queue.core.windows.net"}), "InvalidAuthenticationInfo", "Audience validation failed."},
		{"the account's blob endpoint", with(map[string]any{"aud": "https://devstoreaccount1.blob.core.windows.net"}), "InvalidAuthenticationInfo", "Audience validation failed."},
		{"no issuer", with(map[string]any{"iss": nil}), "InvalidAuthenticationInfo", "Issuer validation failed."},
		{"foreign issuer", with(map[string]any{"iss": "https://accounts.google.com"}), "InvalidAuthenticationInfo", "Issuer validation failed."},
		{"look-alike issuer host", with(map[string]any{"iss": "https://sts.windows.net.example.com/" + testTenant + "/"}), "InvalidAuthenticationInfo", "Issuer validation failed."},
		{"issuer over http", with(map[string]any{"iss": "http://sts.windows.net/" + testTenant + "/"}), "InvalidAuthenticationInfo", "Issuer validation failed."},
		{"v1 issuer without slash", with(map[string]any{"iss": "https://sts.windows.net/" + testTenant}), "InvalidAuthenticationInfo", "Issuer validation failed."},
		{"v1 host with v2 path", with(map[string]any{"iss": "https://sts.windows.net/" + testTenant + "/v2.0"}), "InvalidAuthenticationInfo", "Issuer validation failed."},
		{"v2 host with v1 path", with(map[string]any{"iss": "https://login.microsoftonline.com/" + testTenant + "/"}), "InvalidAuthenticationInfo", "Issuer validation failed."},
		{"tenant not a GUID", with(map[string]any{"iss": "https://sts.windows.net/contoso.onmicrosoft.com/"}), "InvalidAuthenticationInfo", "Issuer validation failed."},
		{"common endpoint", with(map[string]any{"iss": "https://login.microsoftonline.com/common/v2.0"}), "InvalidAuthenticationInfo", "Issuer validation failed."},
		{"Azure Germany (closed)", with(map[string]any{"iss": "https://sts.microsoftonline.de/" + testTenant + "/"}), "InvalidAuthenticationInfo", "Issuer validation failed."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Without keys and with the signing key configured, the
			// claims decide alike.
			for _, keys := range [][]OAuthKey{nil, {{Key: &tokenKey.PublicKey}}} {
				err := authorize(bearerRequest(mintToken(t, c.claims, tokenKey, ""), opGetQueueMetadata, keys...))
				if c.code == "" {
					wantErr(t, err, "", 0)
					continue
				}
				wantErr(t, err, c.code, 401)
				if d := details(err); len(d) != 1 || d[0].Name != authenticationErrorDetail || !strings.HasPrefix(d[0].Value, c.detail) {
					t.Fatalf("details %v, want %q…", d, c.detail)
				}
			}
		})
	}
}

func TestBearerRequest(t *testing.T) {
	good := mintToken(t, validClaims(), tokenKey, "")
	cases := []struct {
		name   string
		build  func() authRequest
		code   string
		status int
		detail string
	}{
		{"valid", func() authRequest { return bearerRequest(good, opPutMessage) }, "", 0, ""},
		{"lower-case scheme", func() authRequest {
			a := bearerRequest(good, opPutMessage)
			a.r.Header.Set("Authorization", "bearer   "+good+" ")
			return a
		}, "", 0, ""},
		{"oldest version with tokens", func() authRequest {
			a := bearerRequest(good, opPutMessage)
			a.r.Header.Set("x-ms-version", "2017-11-09")
			return a
		}, "", 0, ""},
		{"over HTTP", func() authRequest {
			a := bearerRequest(good, opPutMessage)
			a.r.TLS = nil
			return a
		}, "AuthenticationFailed", 403, "Authentication scheme Bearer is not allowed over HTTP"},
		{"version before tokens", func() authRequest {
			a := bearerRequest(good, opPutMessage)
			a.r.Header.Set("x-ms-version", "2017-07-29")
			return a
		}, "AuthenticationFailed", 403, "Authentication scheme Bearer is not supported in this version."},
		{"no version", func() authRequest {
			a := bearerRequest(good, opPutMessage)
			a.r.Header.Del("x-ms-version")
			return a
		}, "AuthenticationFailed", 403, "Authentication scheme Bearer is not supported in this version."},
		{"bad token before the challenge version", func() authRequest {
			a := bearerRequest(mintToken(t, with(map[string]any{"aud": "https://vault.azure.net"}), tokenKey, ""), opPutMessage)
			a.r.Header.Set("x-ms-version", "2019-07-07")
			return a
		}, "AuthenticationFailed", 403, "Audience validation failed."},
		{"bad token from the challenge version", func() authRequest {
			a := bearerRequest(mintToken(t, with(map[string]any{"aud": "https://vault.azure.net"}), tokenKey, ""), opPutMessage)
			a.r.Header.Set("x-ms-version", "2019-12-12")
			return a
		}, "InvalidAuthenticationInfo", 401, "Audience validation failed."},
		{"empty token", func() authRequest { return bearerRequest("", opPutMessage) }, "InvalidAuthenticationInfo", 401, "The bearer token is empty."},
		{"not a JWT", func() authRequest { return bearerRequest("opaque-token", opPutMessage) }, "InvalidAuthenticationInfo", 401, "The bearer token is not a well-formed"},
		{"payload not JSON", func() authRequest { return bearerRequest("eyJhbGciOiJFUzI1NiJ9.bm90IGpzb24.c2ln", opPutMessage) }, "InvalidAuthenticationInfo", 401, "The bearer token is not a well-formed"},
		{"unknown algorithm", func() authRequest {
			return bearerRequest("eyJhbGciOiJYWVoifQ.e30.c2ln", opPutMessage) // {"alg":"XYZ"}.{}
		}, "InvalidAuthenticationInfo", 401, `Signature validation failed. The token's signing algorithm "XYZ" is unknown.`},
		{"token too long", func() authRequest { return bearerRequest(strings.Repeat("a", maxBearerToken+1), opPutMessage) }, "InvalidAuthenticationInfo", 401, "The bearer token is longer"},
		{"two headers", func() authRequest {
			a := bearerRequest(good, opPutMessage)
			a.r.Header.Add("Authorization", "Bearer "+good)
			return a
		}, "InvalidAuthenticationInfo", 400, "The request must carry exactly one Authorization header."},
		{"Get Queue ACL", func() authRequest { return bearerRequest(good, opGetQueueACL) }, "AuthorizationFailure", 403, "GetQueueACL cannot be authorized with a Microsoft Entra ID token"},
		{"Set Queue ACL", func() authRequest { return bearerRequest(good, opSetQueueACL) }, "AuthorizationFailure", 403, "SetQueueACL cannot be authorized with a Microsoft Entra ID token"},
		{"ACL with a bad token: authentication first", func() authRequest {
			return bearerRequest(mintToken(t, with(map[string]any{"iss": nil}), tokenKey, ""), opGetQueueACL)
		}, "InvalidAuthenticationInfo", 401, "Issuer validation failed."},
		{"secondary read", func() authRequest {
			a := bearerRequest(good, opPeekMessages)
			a.secondary = true
			return a
		}, "", 0, ""},
		{"secondary write", func() authRequest {
			a := bearerRequest(good, opPutMessage)
			a.secondary = true
			return a
		}, "InsufficientAccountPermissions", 403, ""},
		{"OAuth off", func() authRequest {
			a := bearerRequest(good, opPutMessage)
			a.oauth = nil
			return a
		}, "AuthenticationFailed", 403, "Bearer (Microsoft Entra ID) tokens are not supported"},
		{"shared key still works with OAuth on", func() authRequest {
			a := sharedKeyRequest("GET", "/devstoreaccount1/myqueue?comp=metadata", opGetQueueMetadata, "myqueue", false, nil)
			a.oauth = newBearerVerifier(&OAuthOptions{})
			return a
		}, "", 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := authorize(c.build())
			wantErr(t, err, c.code, c.status)
			// A refused token says why in one detail; a refusal that
			// has nothing to do with the token (the secondary) has none.
			if c.code != "" && c.detail != "" {
				if d := details(err); len(d) != 1 || !strings.HasPrefix(d[0].Value, c.detail) {
					t.Fatalf("details %v, want %q…", d, c.detail)
				}
			}
		})
	}
}

func TestBearerSignature(t *testing.T) {
	edPub, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edToken, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, validClaims()).SignedString(edPriv)
	if err != nil {
		t.Fatal(err)
	}
	hsToken, err := jwt.NewWithClaims(jwt.SigningMethodHS256, validClaims()).SignedString([]byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	noneToken, err := jwt.NewWithClaims(jwt.SigningMethodNone, validClaims()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	good := mintToken(t, validClaims(), tokenKey, "k1")
	mine := OAuthKey{ID: "k1", Key: &tokenKey.PublicKey}
	theirs := OAuthKey{ID: "k2", Key: &otherTokenKey.PublicKey}
	cases := []struct {
		name   string
		token  string
		keys   []OAuthKey
		ok     bool
		detail string
	}{
		{"the kid's key", good, []OAuthKey{theirs, mine}, true, ""},
		{"a key without ID", good, []OAuthKey{{Key: &tokenKey.PublicKey}}, true, ""},
		{"no kid in the token, keys with IDs", mintToken(t, validClaims(), tokenKey, ""), []OAuthKey{mine}, false, "Signature validation failed."},
		{"kid names another key", mintToken(t, validClaims(), tokenKey, "k2"), []OAuthKey{mine, theirs}, false, "Signature validation failed."},
		{"signed by a stranger", mintToken(t, validClaims(), otherTokenKey, "k1"), []OAuthKey{mine}, false, "Signature validation failed."},
		{"signature cut", good[:len(good)-4], []OAuthKey{mine}, false, "Signature validation failed."},
		{"claims swapped under a valid signature", func() string {
			p := strings.Split(good, ".")
			q := strings.Split(mintToken(t, with(map[string]any{"oid": "someone else"}), otherTokenKey, "k1"), ".")
			return p[0] + "." + q[1] + "." + p[2]
		}(), []OAuthKey{mine}, false, "Signature validation failed."},
		{"Ed25519", edToken, []OAuthKey{{Key: edPub}}, true, ""},
		{"Ed25519 token, EC key", edToken, []OAuthKey{mine}, false, "Signature validation failed."},
		{"HMAC is refused", hsToken, []OAuthKey{mine}, false, "Signature validation failed."},
		{"alg none is refused", noneToken, []OAuthKey{mine}, false, `Signature validation failed. The token is unsigned (alg "none")`},
		{"without keys, alg none is refused too", noneToken, nil, false, `Signature validation failed. The token is unsigned (alg "none")`},
		{"without keys, a token without its signature is refused", good[:strings.LastIndexByte(good, '.')+1], nil, false,
			`Signature validation failed. The token has no signature, though its header names the algorithm "ES256".`},
		{"without keys, no signature is checked", hsToken, nil, true, ""},
		{"an unknown algorithm is named as such", "eyJhbGciOiJYWVoifQ.e30.c2ln", []OAuthKey{mine}, false, // {"alg":"XYZ"}.{}
			`Signature validation failed. The token's signing algorithm "XYZ" is not accepted; want one of RS256,`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := authorize(bearerRequest(c.token, opPeekMessages, c.keys...))
			if c.ok {
				wantErr(t, err, "", 0)
				return
			}
			wantErr(t, err, "InvalidAuthenticationInfo", 401)
			if d := details(err); len(d) != 1 || !strings.HasPrefix(d[0].Value, c.detail) {
				t.Fatalf("details %v, want %q…", d, c.detail)
			}
		})
	}
}

// TestBearerHeaderNotAnObject: a token whose header is JSON but not an
// object (null, an array, a number, a string, a boolean), or an object
// without alg (spelled so: header names are case-sensitive), is refused
// as malformed, saying what is wrong with its header, with or without
// keys; never for a key ID it cannot have.
func TestBearerHeaderNotAnObject(t *testing.T) {
	claims := base64.RawURLEncoding.EncodeToString([]byte(`{"aud":"https://storage.azure.com"}`))
	mine := OAuthKey{ID: "k1", Key: &tokenKey.PublicKey}
	for _, c := range []struct{ header, want string }{
		{`null`, "its header is JSON null, not an object"},
		{` null `, "its header is JSON null, not an object"},
		{`[]`, "its header is a JSON array, not an object"},
		{`[{"alg":"ES256"}]`, "its header is a JSON array, not an object"},
		{`1`, "its header is a JSON number, not an object"},
		{`"ES256"`, "its header is a JSON string, not an object"},
		{`true`, "its header is a JSON boolean, not an object"},
		{`{}`, "its header names no signing algorithm (alg)"},
		{`{"alg":null}`, "its header names no signing algorithm (alg)"},
		{`{"alg":256}`, "its header's alg is not a string"},
		{`{"alg":`, "its header is not JSON"},
		// Header names are case-sensitive (RFC 7515): "Alg" is not alg.
		{`{"Alg":"ES256"}`, `its header names no signing algorithm (alg). Header parameter names are case-sensitive; "Alg" is not alg.`},
		{`{"ALG":"ES256","kid":"k1"}`, `its header names no signing algorithm (alg). Header parameter names are case-sensitive; "ALG" is not alg.`},
		{`{"alg":"ES256","Alg":256}`, ""}, // alg counts; "Alg" is another parameter
	} {
		tok := base64.RawURLEncoding.EncodeToString([]byte(c.header)) + "." + claims + ".c2ln"
		for _, keys := range [][]OAuthKey{nil, {mine}} {
			err := authorize(bearerRequest(tok, opPeekMessages, keys...))
			wantErr(t, err, "InvalidAuthenticationInfo", 401)
			if c.want == "" {
				// A well-formed header: refused later (no exp, or
				// a signature that does not verify), not for it.
				if d := details(err); len(d) != 1 || strings.Contains(d[0].Value, "well-formed") {
					t.Errorf("header %s, %d keys: details %v, want a refusal past the header", c.header, len(keys), d)
				}
				continue
			}
			want := "The bearer token is not a well-formed JSON Web Token: " + c.want
			if d := details(err); len(d) != 1 || !strings.HasPrefix(d[0].Value, want) || strings.Contains(d[0].Value, "key ID") {
				t.Errorf("header %s, %d keys: details %v, want %q…", c.header, len(keys), d, want)
			}
		}
	}
}

// TestBearerAzuriteIssuers: OAuthOptions.AzuriteIssuers accepts the
// issuers Azurite's --oauth basic accepts, pre-production and Azure
// Germany among them, matched by prefix as Azurite matches them (its own
// test of valid issuers puts a second slash after the prefix); without
// it only production Entra ID issuers pass, and the refusal of one of
// Azurite's says where it would pass.
func TestBearerAzuriteIssuers(t *testing.T) {
	const ppeTenant = "ab1f708d-50f6-404c-a006-d71b2ac7a606"
	for _, c := range []struct {
		iss           string
		own, azurite  bool
		ownRefusalTip bool
	}{
		{"https://sts.windows-ppe.net/" + ppeTenant + "/", false, true, true},
		{"https://sts.microsoftonline.de/" + testTenant + "/", false, true, true},
		{"https://sts.windows.net//" + ppeTenant + "/", false, true, true},
		{"https://sts.chinacloudapi.cn/not-a-guid/", false, true, true},
		{"https://sts.windows.net/" + testTenant + "/", true, true, false},
		{"https://login.microsoftonline.com/" + testTenant + "/v2.0", true, true, false},
		{"https://sts.chinacloudapi.cn/" + testTenant + "/", true, true, false},
		{"https://invalidissuer/" + ppeTenant + "/", false, false, false},
		{"https://sts.windows.net.example.com/" + testTenant + "/", false, false, false},
		{"http://sts.windows-ppe.net/" + ppeTenant + "/", false, false, false},
	} {
		tok := mintToken(t, with(map[string]any{"iss": c.iss}), tokenKey, "")
		for _, azurite := range []bool{false, true} {
			a := bearerRequest(tok, opGetQueueMetadata)
			a.oauth = newBearerVerifier(&OAuthOptions{AzuriteIssuers: azurite})
			err := authorize(a)
			if want := map[bool]bool{false: c.own, true: c.azurite}[azurite]; want {
				if err != nil {
					t.Errorf("iss %s, AzuriteIssuers %v: refused: %v %v", c.iss, azurite, err, details(err))
				}
				continue
			}
			wantErr(t, err, "InvalidAuthenticationInfo", 401)
			d := details(err)
			if len(d) != 1 || !strings.HasPrefix(d[0].Value, "Issuer validation failed.") {
				t.Fatalf("iss %s, AzuriteIssuers %v: details %v", c.iss, azurite, d)
			}
			if tip := strings.Contains(d[0].Value, "--oauth basic"); tip != (c.ownRefusalTip && !azurite) {
				t.Errorf("iss %s, AzuriteIssuers %v: the refusal %q names Azurite's mode: %v", c.iss, azurite, d[0].Value, tip)
			}
		}
	}
}
