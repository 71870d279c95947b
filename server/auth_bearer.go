package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// OAuthOptions turn on Microsoft Entra ID (OAuth 2.0) authorization:
// requests may carry "Authorization: Bearer <access token>", as the Azure
// SDKs send it when given a TokenCredential (azidentity's
// DefaultAzureCredential and friends).
//
// A token is accepted when the request came over HTTPS and names
// x-ms-version 2017-11-09 or later, and the token is a well-formed JWT
// whose audience is Azure Storage or the addressed account's queue
// endpoint, whose issuer is Microsoft Entra ID, and whose nbf/exp window
// contains the server's clock (give or take five minutes of clock skew).
// Azure's RBAC roles are not modelled: a valid token may do everything
// except read or write a queue's ACL, which Azure reserves for the account
// key.
type OAuthOptions struct {
	// Keys verify token signatures. A token must be signed by one of them
	// (the ones whose ID matches the token's "kid", and the ones without
	// an ID). With no keys, signatures are not checked, as in Azurite's
	// "basic" OAuth mode: any signed token of the right shape and claims
	// passes, so tests can mint tokens without a key pair. An unsigned
	// token (alg "none", or an empty signature) is refused either way.
	Keys []OAuthKey
	// AzuriteIssuers also accepts the issuers Azurite's "--oauth basic"
	// accepts, matched as Azurite matches them, by prefix: any iss that
	// begins with https://sts.windows.net/, https://sts.chinacloudapi.cn/,
	// https://sts.microsoftonline.de/ (Azure Germany, closed in 2021) or
	// https://sts.windows-ppe.net (Entra ID's pre-production), whatever
	// tenant follows. Tokens minted for tests against Azurite carry such
	// issuers; azqd sets it for Azurite's command line. Without it only
	// the issuers of Entra ID's production clouds pass, with a tenant GUID
	// (see checkIssuer).
	AzuriteIssuers bool
}

// bearerVerifier checks bearer tokens for a Server. It is built once by
// New and only read afterwards, so requests share it without locking.
type bearerVerifier struct {
	keys    []OAuthKey
	parser  *jwt.Parser
	azurite bool // OAuthOptions.AzuriteIssuers
}

// newBearerVerifier returns nil when OAuth is off.
func newBearerVerifier(o *OAuthOptions) *bearerVerifier {
	if o == nil {
		return nil
	}
	v := &bearerVerifier{keys: append([]OAuthKey(nil), o.Keys...), azurite: o.AzuriteIssuers}
	// Claims are checked by checkClaims, against the service clock and
	// with Azure's error details; the parser only decodes and verifies.
	opts := []jwt.ParserOption{jwt.WithoutClaimsValidation()}
	if len(v.keys) > 0 {
		// Entra ID signs with public-key algorithms only. Refusing the
		// HMAC algorithms matters: a public key must never be usable as
		// an HMAC secret.
		opts = append(opts, jwt.WithValidMethods(signatureAlgorithms))
	}
	v.parser = jwt.NewParser(opts...)
	return v
}

// signatureAlgorithms are the JWS algorithms a configured key may verify.
var signatureAlgorithms = []string{
	"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512", "EdDSA",
}

// Versions that matter to bearer tokens (Authorize with Microsoft Entra ID):
// tokens are accepted from 2017-11-09 on; from 2019-12-12 on, a rejected
// token is answered with 401 and a bearer challenge instead of 403.
const (
	oauthFirstVersion     = 20171109
	oauthChallengeVersion = 20191212
)

// oauthClockSkew is how far the server's clock may be outside a token's
// nbf/exp window before the token is refused. Five minutes is the default
// skew of Microsoft's token validation library.
const oauthClockSkew = 5 * time.Minute

// maxBearerToken bounds the token we are willing to parse. Entra access
// tokens are 1–3 KB; tokens with many group claims grow, but not this far.
const maxBearerToken = 16 << 10

// storageAppID is the application ID of Azure Storage in Entra ID; a token
// requested for that resource ID carries it as its audience.
const storageAppID = "e406a681-f3d4-42a8-90b6-c2b029497af1"

// storageAudience is the audience of tokens requested with the scope
// https://storage.azure.com/.default, which the SDKs use by default.
const storageAudience = "https://storage.azure.com"

// queueEndpointSuffixes are the DNS suffixes of queue endpoints in Azure's
// public, US Government and China clouds. A token may be requested for one
// account's endpoint (https://<account>.queue.core.windows.net); it is
// good for that account only. Azure Germany's cloudapi.de closed in 2021.
var queueEndpointSuffixes = []string{
	".queue.core.windows.net",
	".queue.core.usgovcloudapi.net",
	".queue.core.chinacloudapi.cn",
}

// entraV1Issuers and entraV2Issuers are the hosts in the iss claim of
// Entra ID tokens: v1.0 tokens (the kind storage receives unless the app
// asks for v2.0) name the security token service,
// https://sts.windows.net/<tenant>/, which the US Government cloud shares
// with the public one; v2.0 tokens name the login endpoint,
// https://login.microsoftonline.com/<tenant>/v2.0.
var (
	entraV1Issuers = []string{"sts.windows.net", "sts.chinacloudapi.cn"}
	entraV2Issuers = []string{
		"login.microsoftonline.com",
		"login.microsoftonline.us",
		"login.chinacloudapi.cn",
		"login.partner.microsoftonline.cn",
	}
)

// isBearer reports whether the request's (first) Authorization header uses
// the Bearer scheme. Scheme names are case-insensitive (RFC 9110).
func isBearer(r *http.Request) bool {
	v := r.Header.Values("Authorization")
	if len(v) == 0 {
		return false
	}
	scheme, _, _ := strings.Cut(strings.TrimSpace(v[0]), " ")
	return strings.EqualFold(scheme, "Bearer")
}

// authorize verifies the bearer token of a request for which isBearer is
// true, and refuses the operations Azure does not allow with a token.
func (v *bearerVerifier) authorize(a authRequest) error {
	values := a.r.Header.Values("Authorization")
	if len(values) != 1 {
		return invalidAuthInfo("The request must carry exactly one Authorization header.")
	}
	if a.r.TLS == nil {
		// The token would have crossed the network in the clear; Azure
		// refuses such requests with 403 rather than serve them.
		return authFailed("Authentication scheme Bearer is not allowed over HTTP; send the request over HTTPS.")
	}
	ver, ok := parseServiceVersion(a.r.Header.Get("X-Ms-Version"))
	if !ok || ver < oauthFirstVersion {
		return authFailed("Authentication scheme Bearer is not supported in this version. Send x-ms-version 2017-11-09 or later.")
	}
	_, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	token = strings.TrimSpace(token)
	if err := v.verify(token, a); err != "" {
		return tokenRefused(ver, err)
	}
	if a.op == opGetQueueACL || a.op == opSetQueueACL {
		return authzFailure(a.op.String() + " cannot be authorized with a Microsoft Entra ID token; only the account key may read or write a queue's ACL.")
	}
	return nil
}

// tokenRefused is Azure's answer to an invalid token: from version
// 2019-12-12 on, 401 InvalidAuthenticationInfo, which the handler sends
// with the bearer challenge (WWW-Authenticate) so that clients fetch a new
// token; before, 403 AuthenticationFailed. Both carry the reason as
// AuthenticationErrorDetail.
func tokenRefused(version int, detail string) error {
	if version < oauthChallengeVersion {
		return authFailed(detail)
	}
	return authErr("InvalidAuthenticationInfo", http.StatusUnauthorized,
		"Server failed to authenticate the request. Please refer to the information in the www-authenticate header.",
		detail)
}

// verify checks the token and returns why it is refused, or "". The order
// is the usual one of token validation: shape, signature, lifetime,
// audience, issuer.
func (v *bearerVerifier) verify(token string, a authRequest) string {
	if token == "" {
		return "The bearer token is empty."
	}
	if len(token) > maxBearerToken {
		return fmt.Sprintf("The bearer token is longer than %d bytes.", maxBearerToken)
	}
	h, why := readHeader(token)
	if why != "" {
		return "The bearer token is not a well-formed JSON Web Token: " + why
	}
	if why := checkAlgorithm(h, len(v.keys) > 0); why != "" {
		return "Signature validation failed. " + why
	}
	var claims jwt.RegisteredClaims
	if len(v.keys) == 0 {
		if _, _, err := v.parser.ParseUnverified(token, &claims); err != nil {
			return "The bearer token is not a well-formed JSON Web Token: " + jwtReason(err)
		}
	} else if _, err := v.parser.ParseWithClaims(token, &claims, v.keyFor); err != nil {
		if errors.Is(err, jwt.ErrTokenMalformed) {
			return "The bearer token is not a well-formed JSON Web Token: " + jwtReason(err)
		}
		reason := jwtReason(err)
		switch {
		case errors.Is(err, jwt.ErrTokenUnverifiable):
			// Only keyFor fails this way.
			reason = "No configured key has the token's key ID (" + reason + ")."
		case strings.HasPrefix(reason, "signing method"):
			reason = "The " + reason + "; want one of " + strings.Join(signatureAlgorithms, ", ") + "."
		default:
			reason = "The signature does not verify with the configured keys (" + reason + ")."
		}
		return "Signature validation failed. " + reason
	}
	if why := checkLifetime(&claims, a.now); why != "" {
		return why
	}
	if why := checkAudience(claims.Audience, a.account.Name); why != "" {
		return why
	}
	return checkIssuer(claims.Issuer, v.azurite)
}

// tokenHeader is what verify reads of a token before the parser does:
// the algorithm its JOSE header names, and whether it carries a
// signature. read is false when the token is not three base64url parts,
// which the parser then reports.
type tokenHeader struct {
	read   bool
	alg    string
	signed bool
}

// readHeader reads the token's header, or says why it is malformed: not
// JSON, JSON but not an object (the parser would take null for an empty
// header, and its other complaints name Go types), or an object without
// a string alg.
func readHeader(token string) (tokenHeader, string) {
	head, rest, ok := strings.Cut(token, ".")
	if !ok {
		return tokenHeader{}, ""
	}
	_, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return tokenHeader{}, ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(head, "="))
	if err != nil {
		return tokenHeader{}, ""
	}
	if !json.Valid(raw) {
		return tokenHeader{}, "its header is not JSON."
	}
	switch t := bytes.TrimLeft(raw, " \t\r\n"); t[0] {
	case '{':
	case 'n':
		return tokenHeader{}, "its header is JSON null, not an object."
	case '[':
		return tokenHeader{}, "its header is a JSON array, not an object."
	case '"':
		return tokenHeader{}, "its header is a JSON string, not an object."
	case 't', 'f':
		return tokenHeader{}, "its header is a JSON boolean, not an object."
	default:
		return tokenHeader{}, "its header is a JSON number, not an object."
	}
	// A map, not a struct: JOSE header names are case-sensitive (RFC
	// 7515), and encoding/json would fill a struct's alg field from "Alg"
	// or "ALG" too, which the parser, reading a map, does not. With
	// repeated names the last one counts, here as in the parser.
	var h map[string]json.RawMessage
	if err := json.Unmarshal(raw, &h); err != nil {
		return tokenHeader{}, "its header is not JSON."
	}
	algRaw, ok := h["alg"]
	if !ok || string(algRaw) == "null" {
		return tokenHeader{}, "its header names no signing algorithm (alg)." + misspelledAlg(h)
	}
	var alg string
	if json.Unmarshal(algRaw, &alg) != nil {
		return tokenHeader{}, "its header's alg is not a string."
	}
	return tokenHeader{read: true, alg: alg, signed: sig != ""}, ""
}

// misspelledAlg names a header parameter that differs from "alg" only in
// case, which a client may have meant as alg, or returns "".
func misspelledAlg(h map[string]json.RawMessage) string {
	var names []string
	for name := range h {
		if name != "alg" && strings.EqualFold(name, "alg") {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return fmt.Sprintf(" Header parameter names are case-sensitive; %q is not alg.", names[0])
}

// checkAlgorithm refuses, before any key is looked at, a token that is
// not signed (alg "none", or no signature) whether or not keys are
// configured, and, with keys, one whose algorithm is not among
// signatureAlgorithms. A token whose header readHeader could not read is
// left to the parser, which says how it is malformed.
func checkAlgorithm(h tokenHeader, keyed bool) string {
	if !h.read {
		return ""
	}
	alg := h.alg
	switch {
	case strings.EqualFold(alg, "none"):
		return `The token is unsigned (alg "none"); only signed tokens are accepted.`
	case !h.signed:
		return fmt.Sprintf("The token has no signature, though its header names the algorithm %q.", truncate(alg, 32))
	case slices.Contains(signatureAlgorithms, alg):
		return ""
	case keyed:
		return fmt.Sprintf("The token's signing algorithm %q is not accepted; want one of %s.", truncate(alg, 32), strings.Join(signatureAlgorithms, ", "))
	case jwt.GetSigningMethod(alg) == nil:
		return fmt.Sprintf("The token's signing algorithm %q is unknown.", truncate(alg, 32))
	}
	return ""
}

// keyFor returns the keys that may have signed the token: those whose ID
// is the token's kid, and those without an ID.
func (v *bearerVerifier) keyFor(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	var set jwt.VerificationKeySet
	for _, k := range v.keys {
		if k.ID == "" || k.ID == kid {
			set.Keys = append(set.Keys, k.Key)
		}
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("kid %q", truncate(kid, 64))
	}
	return set, nil
}

// jwtReason is the library's error without its generic prefixes.
func jwtReason(err error) string {
	s := err.Error()
	for _, p := range []string{"token is malformed: ", "token is unverifiable: ", "error while executing keyfunc: ", "token signature is invalid: "} {
		s = strings.TrimPrefix(s, p)
	}
	return truncate(s, 256)
}

// checkLifetime compares the token's validity window with now, allowing
// oauthClockSkew either side. exp is required, as Entra always sets it;
// nbf is checked when present.
func checkLifetime(c *jwt.RegisteredClaims, now time.Time) string {
	if c.ExpiresAt == nil {
		return "Lifetime validation failed. The token has no expiration time (exp)."
	}
	exp := c.ExpiresAt.Time
	if now.After(exp.Add(oauthClockSkew)) {
		return fmt.Sprintf("Lifetime validation failed. The token is expired. ValidTo: %s; the server's clock: %s.",
			exp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if c.NotBefore != nil && now.Before(c.NotBefore.Time.Add(-oauthClockSkew)) {
		return fmt.Sprintf("Lifetime validation failed. The token is not yet valid. ValidFrom: %s; the server's clock: %s.",
			c.NotBefore.Time.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return ""
}

// checkAudience accepts a token meant for Azure Storage as a whole or for
// the addressed account's queue endpoint. A JWT audience may be a list;
// one acceptable entry suffices.
func checkAudience(aud jwt.ClaimStrings, account string) string {
	for _, a := range aud {
		if audienceMatches(a, account) {
			return ""
		}
	}
	got := "none"
	if len(aud) > 0 {
		got = "'" + truncate(strings.Join(aud, "', '"), 256) + "'"
	}
	return "Audience validation failed. Audience did not match. The token's audience is " + got +
		"; want " + storageAudience + " or https://" + account + queueEndpointSuffixes[0] + "."
}

func audienceMatches(aud, account string) bool {
	aud = strings.TrimSuffix(aud, "/")
	if aud == storageAudience || strings.EqualFold(aud, storageAppID) {
		return true
	}
	host, ok := strings.CutPrefix(aud, "https://")
	if !ok {
		return false
	}
	for _, suffix := range queueEndpointSuffixes {
		if strings.EqualFold(host, account+suffix) {
			return true
		}
	}
	return false
}

// azuriteIssuerPrefixes are the issuers Azurite's basic OAuth mode
// accepts, as prefixes of iss: the public cloud's, China's, the closed
// Azure Germany's and Entra ID's pre-production service's security token
// services (Azurite's VALID_ISSUE_PREFIXES).
var azuriteIssuerPrefixes = []string{
	"https://sts.windows.net/",
	"https://sts.microsoftonline.de/",
	"https://sts.chinacloudapi.cn/",
	"https://sts.windows-ppe.net",
}

// checkIssuer accepts the issuers of Entra ID tokens, for any tenant:
// https://<v1 host>/<tenant>/ and https://<v2 host>/<tenant>/v2.0, where
// the tenant is the directory's GUID. The server has no directory, so the
// tenant itself is not checked. With azurite it also accepts what
// Azurite's basic mode does (azuriteIssuerPrefixes).
func checkIssuer(iss string, azurite bool) string {
	if issuerMatches(iss) || azurite && azuriteIssuerMatches(iss) {
		return ""
	}
	got := "none"
	if iss != "" {
		got = "'" + truncate(iss, 256) + "'"
	}
	why := "Issuer validation failed. Issuer did not match. The token's issuer is " + got +
		"; want a Microsoft Entra ID issuer such as https://sts.windows.net/<tenant ID>/ or https://login.microsoftonline.com/<tenant ID>/v2.0."
	if !azurite && azuriteIssuerMatches(iss) {
		why += " Pre-production and retired clouds' issuers are accepted only as Azurite accepts them (azqd --oauth basic)."
	}
	return why
}

func azuriteIssuerMatches(iss string) bool {
	for _, p := range azuriteIssuerPrefixes {
		if strings.HasPrefix(iss, p) {
			return true
		}
	}
	return false
}

func issuerMatches(iss string) bool {
	rest, ok := strings.CutPrefix(iss, "https://")
	if !ok {
		return false
	}
	host, path, _ := strings.Cut(rest, "/")
	tenant, tail, _ := strings.Cut(path, "/")
	if !isGUID(tenant) {
		return false
	}
	hosts := entraV1Issuers
	switch tail {
	case "":
		if !strings.HasSuffix(path, "/") {
			return false // v1 issuers end with a slash
		}
	case "v2.0":
		hosts = entraV2Issuers
	default:
		return false
	}
	for _, h := range hosts {
		if strings.EqualFold(host, h) {
			return true
		}
	}
	return false
}

// isGUID reports whether s has the 8-4-4-4-12 hex form of a tenant ID.
func isGUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
