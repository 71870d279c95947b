package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/azqlib/azq"
)

// CORS: the rules of an account's service properties, applied to
// preflight (OPTIONS) requests, which are never authenticated, and to
// actual requests that carry an Origin header.

// corsRule is one CORS rule of the service properties: its fields as set,
// which Get Queue Service Properties writes back, and as parsed lists.
type corsRule struct {
	origins, methods, headers, exposed string // as set, for Get
	originList, methodList             []string
	headerList                         []string
	maxAge                             int
}

// corsRuleDoc is a CorsRule element of Set Queue Service Properties.
type corsRuleDoc struct {
	AllowedOrigins  *string `xml:"AllowedOrigins"`
	AllowedMethods  *string `xml:"AllowedMethods"`
	AllowedHeaders  *string `xml:"AllowedHeaders"`
	ExposedHeaders  *string `xml:"ExposedHeaders"`
	MaxAgeInSeconds *string `xml:"MaxAgeInSeconds"`
}

// maxCorsRules is the most CORS rules a service may have.
const maxCorsRules = 5

var corsMethods = map[string]bool{"DELETE": true, "GET": true, "HEAD": true, "MERGE": true, "POST": true, "OPTIONS": true, "PUT": true, "PATCH": true}

// parseCorsRules reads the CorsRule elements of Set Queue Service
// Properties.
func parseCorsRules(docs []corsRuleDoc) ([]corsRule, error) {
	if len(docs) > maxCorsRules {
		return nil, xmlError(azq.CodeInvalidXMLDocument, 0, 0, "at most 5 CORS rules are allowed")
	}
	rules := make([]corsRule, 0, len(docs))
	for _, d := range docs {
		var r corsRule
		if d.AllowedOrigins == nil || d.AllowedMethods == nil || d.MaxAgeInSeconds == nil {
			return nil, xmlError(azq.CodeInvalidXMLDocument, 0, 0, "a CorsRule needs AllowedOrigins, AllowedMethods and MaxAgeInSeconds")
		}
		r.origins = strings.TrimSpace(*d.AllowedOrigins)
		r.methods = strings.TrimSpace(*d.AllowedMethods)
		if d.AllowedHeaders != nil {
			r.headers = strings.TrimSpace(*d.AllowedHeaders)
		}
		if d.ExposedHeaders != nil {
			r.exposed = strings.TrimSpace(*d.ExposedHeaders)
		}
		r.originList = splitList(r.origins)
		r.methodList = splitList(r.methods)
		r.headerList = splitList(r.headers)
		if len(r.originList) == 0 || len(r.methodList) == 0 {
			return nil, nodeValue("AllowedOrigins and AllowedMethods must not be empty")
		}
		for _, m := range r.methodList {
			if !corsMethods[m] {
				return nil, nodeValue("unsupported CORS method " + truncate(m, 32))
			}
		}
		n, err := strconv.ParseInt(strings.TrimSpace(*d.MaxAgeInSeconds), 10, 32)
		if err != nil || n < 0 {
			return nil, nodeValue("MaxAgeInSeconds must be a non-negative integer")
		}
		r.maxAge = int(n)
		rules = append(rules, r)
	}
	return rules, nil
}

// matchRule returns the first CORS rule that allows origin and method.
func (p *serviceProperties) matchRule(origin, method string) *corsRule {
	for i := range p.cors {
		if p.matchRuleAt(i, origin, method) {
			return &p.cors[i]
		}
	}
	return nil
}

func (r *corsRule) wildcardOrigin() bool {
	for _, o := range r.originList {
		if o == "*" {
			return true
		}
	}
	return false
}

// allowsHeader reports whether the rule allows request header h: "*",
// an exact name, or a prefix ending in "*" (e.g. "x-ms-meta*").
func (r *corsRule) allowsHeader(h string) bool {
	for _, a := range r.headerList {
		if a == "*" || strings.EqualFold(a, h) {
			return true
		}
		if p, ok := strings.CutSuffix(a, "*"); ok && len(h) >= len(p) && strings.EqualFold(h[:len(p)], p) {
			return true
		}
	}
	return false
}

// corsHeaders adds CORS response headers to an actual (non-preflight)
// request with an Origin header that a rule matches, and Vary: Origin to
// a GET or HEAD that none matches while the account has rules.
//
// A back end that keeps the properties (PropertiesKeeper) and fails to
// read them leaves the headers out: the browser then refuses the answer,
// as it would one from an account without rules.
func (q *request) corsHeaders(h http.Header) {
	origin := q.r.Header.Get("Origin")
	p, err := q.acct.properties(q.r.Context())
	if err != nil || len(p.cors) == 0 {
		return
	}
	r := p.matchRule(origin, q.r.Method)
	if r == nil {
		// The answer to a GET or HEAD still depends on the origin (another
		// origin may match a rule), so caches must not reuse it across
		// origins.
		if q.r.Method == http.MethodGet || q.r.Method == http.MethodHead {
			h.Add("Vary", "Origin")
		}
		return
	}
	if r.wildcardOrigin() {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Add("Vary", "Origin")
	}
	if r.exposed != "" {
		h.Set("Access-Control-Expose-Headers", r.exposed)
	}
}

// errCORSHeaderMissing is Azure's answer to a preflight without one of
// the headers CORS requires (Origin, Access-Control-Request-Method): 400
// InvalidHeaderValue, with a message of its own.
func errCORSHeaderMissing(name string) *azq.Error {
	return &azq.Error{Code: "InvalidHeaderValue", StatusCode: http.StatusBadRequest,
		Message: msgCORSHeaderMissing, Details: []azq.Detail{{Name: "HeaderName", Value: name}}}
}

// msgCORSHeaderMissing is the message Azure's front end gives a preflight
// without Origin or Access-Control-Request-Method.
const msgCORSHeaderMissing = "A required CORS header is not present."

// preflight answers a CORS preflight (OPTIONS) request from the account's
// CORS rules. It is never authenticated.
func (q *request) preflight() {
	origin := q.r.Header.Get("Origin")
	method := q.r.Header.Get("Access-Control-Request-Method")
	switch {
	case origin == "":
		q.fail(errCORSHeaderMissing("Origin"))
		return
	case method == "":
		q.fail(errCORSHeaderMissing("Access-Control-Request-Method"))
		return
	}
	var reqHeaders []string
	for _, v := range q.r.Header.Values("Access-Control-Request-Headers") {
		reqHeaders = append(reqHeaders, splitList(v)...)
	}
	p, err := q.acct.properties(q.r.Context())
	if err != nil {
		q.fail(err)
		return
	}
	var rule *corsRule
	for i := range p.cors {
		r := &p.cors[i]
		if p.matchRuleAt(i, origin, method) {
			ok := true
			for _, h := range reqHeaders {
				if !r.allowsHeader(h) {
					ok = false
					break
				}
			}
			if ok {
				rule = r
				break
			}
		}
	}
	if rule == nil {
		q.fail(&azq.Error{Code: "CorsPreflightFailure", StatusCode: http.StatusForbidden})
		return
	}
	h := q.w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Methods", method)
	if len(reqHeaders) > 0 {
		h.Set("Access-Control-Allow-Headers", strings.Join(reqHeaders, ","))
	}
	h.Set("Access-Control-Max-Age", strconv.Itoa(rule.maxAge))
	h.Set("Access-Control-Allow-Credentials", "true")
	h.Set("Content-Length", "0")
	q.writeHeader(http.StatusOK)
}

func (p *serviceProperties) matchRuleAt(i int, origin, method string) bool {
	r := &p.cors[i]
	okOrigin := false
	for _, o := range r.originList {
		if o == "*" || strings.EqualFold(o, origin) {
			okOrigin = true
			break
		}
	}
	if !okOrigin {
		return false
	}
	for _, m := range r.methodList {
		if m == method {
			return true
		}
	}
	return false
}
