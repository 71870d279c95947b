package server

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// maxAuthorizationHeader bounds the Authorization value we are willing to
// look at. A real one is ~100 bytes; the bound keeps error details (which
// echo the signature) small whatever a client sends.
const maxAuthorizationHeader = 4096

// authorizeHeader verifies an Authorization header: SharedKey or
// SharedKeyLite (Azure's "Authorize with Shared Key"; docs/semantics.md
// §9.1, §9.2). A Bearer token reaches it only when Options.OAuth is off,
// and is refused.
func authorizeHeader(a authRequest) error {
	values := a.r.Header.Values("Authorization")
	if len(values) != 1 {
		return invalidAuthInfo("The request must carry exactly one Authorization header.")
	}
	h := strings.TrimSpace(values[0])
	if len(h) > maxAuthorizationHeader {
		return invalidAuthInfo("The Authorization header is too long.")
	}
	scheme, cred, _ := strings.Cut(h, " ")
	cred = strings.TrimSpace(cred)
	var lite bool
	switch {
	case scheme == "SharedKey":
	case scheme == "SharedKeyLite":
		lite = true
	case strings.EqualFold(scheme, "Bearer"):
		// A well-formed request with a credential this server cannot
		// check: that is an authentication failure, not a format error.
		return authFailed("Bearer (Microsoft Entra ID) tokens are not supported by this server; sign requests with Shared Key or use a shared access signature.")
	default:
		return invalidAuthInfo("The Authorization header must have the form 'SharedKey <account>:<signature>' or 'SharedKeyLite <account>:<signature>'.")
	}
	name, sig, ok := strings.Cut(cred, ":")
	if !ok || name == "" || sig == "" || strings.ContainsAny(cred, " \t") {
		return invalidAuthInfo("The Authorization header must have the form '" + scheme + " <account>:<signature>'.")
	}
	// For RA-GRS secondary access the header names the primary account:
	// Azure's docs say not to include "-secondary" there.
	if name != a.account.Name {
		return authFailed("The account name '" + name + "' in the Authorization header does not match the account '" + a.account.Name + "' addressed by the request.")
	}

	if err := checkRequestDate(a); err != nil {
		return err
	}
	if !lite && documentedSignatureMatches(a, sig) {
		return checkDateSkew(a)
	}
	var candidates []string
	if lite {
		candidates = sharedKeyLiteStringsToSign(a)
	} else {
		candidates = sharedKeyStringsToSign(a)
	}
	if signatureMatches(a.keys, candidates, sig) {
		return checkDateSkew(a)
	}
	return authFailed("The MAC signature found in the HTTP request '" + sig +
		"' is not the same as any computed signature. Server used following string to sign: '" +
		candidates[0] + "'.")
}

// maxDateSkew is how far a Shared Key request's date may be from the
// server's clock: Azure's 15 minutes.
const maxDateSkew = 15 * time.Minute

// requestDate returns the date a Shared Key request is signed for:
// x-ms-date when present (it takes precedence, as in the string-to-sign),
// else Date.
func requestDate(r *http.Request) string {
	if d := r.Header.Get("X-Ms-Date"); d != "" {
		return d
	}
	return r.Header.Get("Date")
}

// checkRequestDate refuses a Shared Key request that carries neither
// x-ms-date nor Date, as Azure does: the date is what bounds its replay.
func checkRequestDate(a authRequest) error {
	if requestDate(a.r) == "" {
		return authFailed("Request date header not specified. A request signed with Shared Key must carry x-ms-date or Date.")
	}
	return nil
}

// checkDateSkew refuses a correctly signed request whose date is not an
// HTTP date or is more than maxDateSkew from now, when a.checkDateSkew
// asks for the check (the server runs on the real clock).
func checkDateSkew(a authRequest) error {
	if !a.checkDateSkew {
		return nil
	}
	v := requestDate(a.r)
	t, err := parseRequestDate(v)
	if err != nil {
		return authFailed("The request date '" + truncate(v, 64) + "' is not an RFC 1123 date.")
	}
	if d := a.now.Sub(t); d > maxDateSkew || d < -maxDateSkew {
		return authFailed("Request date header too far from the server's time: '" + truncate(v, 64) +
			"'; the server's time is '" + httpTime(a.now) + "' and at most 15 minutes of difference are allowed.")
	}
	return nil
}

// parsedDate is a request date and its time.
type parsedDate struct {
	text string
	t    time.Time
}

// lastRequestDate is the request date parseRequestDate parsed last: a
// client sends the same date on every request of a second.
var lastRequestDate atomic.Pointer[parsedDate]

// parseRequestDate is http.ParseTime, remembering the last date parsed.
func parseRequestDate(v string) (time.Time, error) {
	if d := lastRequestDate.Load(); d != nil && d.text == v {
		return d.t, nil
	}
	t, err := http.ParseTime(v)
	if err == nil {
		lastRequestDate.Store(&parsedDate{text: strings.Clone(v), t: t})
	}
	return t, err
}

// sharedKeyStringsToSign returns the Shared Key string-to-sign of the
// request, the form Azure documents first. Further candidates cover
// details where conforming clients differ:
//   - the Go SDK joins the fields with "\n" even when there is no x-ms-*
//     header, which leaves one more newline than the documented form;
//   - the Go SDK sorts query names before lower-casing them and does not
//     merge names that differ only in case;
//   - path-style secondary requests may be signed with or without the
//     "-secondary" suffix in the path (Azurite signs without);
//   - before 2015-02-21 a zero Content-Length was signed as "0".
func sharedKeyStringsToSign(a authRequest) []string {
	r := a.r
	clen := r.Header.Get("Content-Length")
	if clen == "" && r.ContentLength > 0 {
		clen = strconv.FormatInt(r.ContentLength, 10)
	}
	clens := []string{clen}
	if clen == "0" {
		clens[0] = ""
		if n, _ := parseServiceVersion(r.Header.Get("X-Ms-Version")); n < 20150221 {
			clens = append(clens, "0")
		}
	}
	date := r.Header.Get("Date")
	if r.Header.Get("X-Ms-Date") != "" {
		date = ""
	}
	headers := canonicalizedHeaders(r.Header)
	headerForms := []string{headers}
	if headers == "" {
		headerForms = append(headerForms, "\n")
	}

	var out []string
	for _, res := range canonicalizedResources(a) {
		for _, cl := range clens {
			for _, hf := range headerForms {
				out = appendUnique(out, strings.Join([]string{
					r.Method,
					r.Header.Get("Content-Encoding"),
					r.Header.Get("Content-Language"),
					cl,
					r.Header.Get("Content-Md5"),
					r.Header.Get("Content-Type"),
					date,
					r.Header.Get("If-Modified-Since"),
					r.Header.Get("If-Match"),
					r.Header.Get("If-None-Match"),
					r.Header.Get("If-Unmodified-Since"),
					r.Header.Get("Range"),
					"",
				}, "\n")+hf+res)
			}
		}
	}
	return out
}

// documentedSignatureMatches reports whether sig signs the documented
// form of the Shared Key string-to-sign, the first of
// sharedKeyStringsToSign's candidates, which conforming clients send.
// It builds that string in a pooled buffer without the candidates'
// strings, for the common request: one whose x-ms-* header names are
// ASCII and distinct in lower case. For any other it reports false and
// leaves the request to the candidates, which cover it as well.
func documentedSignatureMatches(a authRequest, sig string) bool {
	buf := getBuf()
	defer putBuf(buf)
	b, ok := appendDocumentedStringToSign(buf.b, a)
	buf.b = b
	return ok && signatureMatchesBytes(a.keys, b, sig)
}

// appendDocumentedStringToSign appends the string sharedKeyStringsToSign
// puts first, or reports false for a request it leaves to that function.
func appendDocumentedStringToSign(b []byte, a authRequest) ([]byte, bool) {
	r := a.r
	h := r.Header
	b = append(b, r.Method...)
	b = append(b, '\n')
	b = append(b, headerValue(h, "Content-Encoding")...)
	b = append(b, '\n')
	b = append(b, headerValue(h, "Content-Language")...)
	b = append(b, '\n')
	switch clen := headerValue(h, "Content-Length"); {
	case clen == "" && r.ContentLength > 0:
		b = strconv.AppendInt(b, r.ContentLength, 10)
	case clen != "0":
		b = append(b, clen...)
	}
	b = append(b, '\n')
	b = append(b, headerValue(h, "Content-Md5")...)
	b = append(b, '\n')
	b = append(b, headerValue(h, "Content-Type")...)
	b = append(b, '\n')
	if headerValue(h, "X-Ms-Date") == "" {
		b = append(b, headerValue(h, "Date")...)
	}
	b = append(b, '\n')
	for _, k := range [...]string{"If-Modified-Since", "If-Match", "If-None-Match", "If-Unmodified-Since", "Range"} {
		b = append(b, headerValue(h, k)...)
		b = append(b, '\n')
	}
	b, ok := appendCanonicalizedHeaders(b, h)
	if !ok {
		return b, false
	}
	b = append(b, '/')
	b = append(b, a.account.Name...)
	b = append(b, requestPath(r)...)
	var buf [8]qpair
	pairs := append(buf[:0], a.query.pairs...)
	slices.SortFunc(pairs, func(x, y qpair) int { return strings.Compare(x.name, y.name) })
	for _, kv := range pairs {
		b = append(b, '\n')
		b = append(b, kv.name...)
		b = append(b, ':')
		b = append(b, kv.v...)
	}
	return b, true
}

// headerValue is h.Get(key) for a key in canonical form, without
// canonicalizing it again.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// appendCanonicalizedHeaders appends what canonicalizedHeaders returns,
// when every x-ms-* header name is ASCII and no two are the same name in
// different case, as for every request net/http parsed from the wire.
// It reports false, having appended nothing useful, for any other.
func appendCanonicalizedHeaders(b []byte, h http.Header) ([]byte, bool) {
	type header struct {
		name   string // trimmed, as sent
		values []string
	}
	var buf [16]header
	hs := buf[:0]
	for k, vs := range h {
		t := strings.TrimSpace(k)
		if len(t) < 5 || !strings.EqualFold(t[:5], "x-ms-") {
			continue
		}
		for i := 0; i < len(t); i++ {
			if t[i] >= utf8.RuneSelf {
				return b, false
			}
		}
		hs = append(hs, header{t, vs})
	}
	slices.SortFunc(hs, func(x, y header) int { return compareASCIIFold(x.name, y.name) })
	for i, x := range hs {
		if i > 0 && compareASCIIFold(hs[i-1].name, x.name) == 0 {
			return b, false
		}
		for j := 0; j < len(x.name); j++ {
			c := x.name[j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b = append(b, c)
		}
		b = append(b, ':')
		for j, v := range x.values {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, strings.TrimSpace(v)...)
		}
		b = append(b, '\n')
	}
	return b, true
}

// compareASCIIFold compares ASCII strings as strings.Compare compares
// their lower-case forms.
func compareASCIIFold(x, y string) int {
	for i := 0; i < len(x) && i < len(y); i++ {
		cx, cy := x[i], y[i]
		if 'A' <= cx && cx <= 'Z' {
			cx += 'a' - 'A'
		}
		if 'A' <= cy && cy <= 'Z' {
			cy += 'a' - 'A'
		}
		if cx != cy {
			return int(cx) - int(cy)
		}
	}
	return len(x) - len(y)
}

// sharedKeyLiteStringsToSign returns the Shared Key Lite string-to-sign:
// VERB, Content-MD5, Content-Type, Date, the canonicalized headers and the
// resource, which keeps only the comp parameter ("?comp=…"). Date is empty
// when x-ms-date is sent, as in Azure's examples; clients that copy the
// Date header anyway (Azurite verifies that form) are accepted too.
func sharedKeyLiteStringsToSign(a authRequest) []string {
	r := a.r
	dates := []string{r.Header.Get("Date")}
	if r.Header.Get("X-Ms-Date") != "" && dates[0] != "" {
		dates = []string{"", dates[0]}
	}
	headers := canonicalizedHeaders(r.Header)
	comp := ""
	if v, ok := a.query.get("comp"); ok {
		comp = "?comp=" + v
	}
	var out []string
	for _, p := range resourcePaths(a) {
		for _, d := range dates {
			out = appendUnique(out, strings.Join([]string{
				r.Method,
				r.Header.Get("Content-Md5"),
				r.Header.Get("Content-Type"),
				d,
				"",
			}, "\n")+headers+"/"+a.account.Name+p+comp)
		}
	}
	return out
}

// canonicalizedHeaders returns every x-ms-* header as "name:value\n",
// names lower-cased and sorted, values trimmed and comma-joined.
func canonicalizedHeaders(h http.Header) string {
	type header struct {
		name   string // lower case
		values []string
	}
	var hs []header
	for k, vs := range h {
		t := strings.TrimSpace(k)
		if len(t) < 5 || !strings.EqualFold(t[:5], "x-ms-") {
			continue
		}
		hs = append(hs, header{strings.ToLower(t), vs})
	}
	slices.SortFunc(hs, func(a, b header) int { return strings.Compare(a.name, b.name) })
	var b strings.Builder
	for i := 0; i < len(hs); {
		// Keys that differ only in case (possible when set outside
		// net/http's canonical form) are one header with all their values.
		name := hs[i].name
		b.WriteString(name)
		b.WriteByte(':')
		sep := false
		for ; i < len(hs) && hs[i].name == name; i++ {
			for _, v := range hs[i].values {
				if sep {
					b.WriteByte(',')
				}
				b.WriteString(strings.TrimSpace(v))
				sep = true
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// resourcePaths returns the escaped request path as the client sent it,
// and for a path-style secondary request also the path with the account
// segment's "-secondary" removed.
func resourcePaths(a authRequest) []string {
	p := requestPath(a.r)
	out := []string{p}
	if a.secondary {
		sec := "/" + a.account.Name + "-secondary"
		if p == sec || strings.HasPrefix(p, sec+"/") {
			out = append(out, "/"+a.account.Name+p[len(sec):])
		}
	}
	return out
}

// requestPath is the escaped path exactly as sent: the signer canonicalizes
// the path it put on the wire, so the server must not re-escape it.
// RequestURI is the raw request target; r.URL is the fallback for requests
// built in code.
func requestPath(r *http.Request) string {
	if u := r.RequestURI; strings.HasPrefix(u, "/") {
		p, _, _ := strings.Cut(u, "?")
		return p
	}
	if p := r.URL.EscapedPath(); p != "" {
		return p
	}
	return "/"
}

// canonicalizedResources returns "/account/path" followed by one
// "\nname:value" line per query parameter, from the query as the handler
// reads it: in the documented form (names lower-cased, sorted; values
// URL-decoded) and, if it differs, the Go SDK's form, which sorts the
// names as sent before lower-casing them. The query has no repeated names
// (parsing refuses them), so every line has one value.
func canonicalizedResources(a authRequest) []string {
	pairs := slices.Clone(a.query.pairs)
	slices.SortFunc(pairs, func(x, y qpair) int { return strings.Compare(x.name, y.name) })
	docForm := queryLines(pairs)
	slices.SortFunc(pairs, func(x, y qpair) int { return strings.Compare(x.sent, y.sent) })
	sdkForm := queryLines(pairs)

	var out []string
	for _, p := range resourcePaths(a) {
		base := "/" + a.account.Name + p
		out = appendUnique(out, base+docForm)
		out = appendUnique(out, base+sdkForm)
	}
	return out
}

// queryLines renders query parameters as "\nname:value" lines, in order.
func queryLines(pairs []qpair) string {
	var b strings.Builder
	for _, kv := range pairs {
		b.WriteByte('\n')
		b.WriteString(kv.name)
		b.WriteByte(':')
		b.WriteString(kv.v)
	}
	return b.String()
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
