package server

import (
	"net/url"
	"strings"
)

// query is a request's query string, parsed once and read by everything
// that looks at it: routing, the operation handlers, and the Shared Key
// and SAS verifiers. One parser for all of them is what makes the
// signature cover exactly what is served: a pair the verifier did not see
// cannot steer the handler, and the other way round.
//
// Names are read in lower case (strings.ToLower, the same folding the
// Shared Key canonicalization applies to them here). Azure takes parameter
// names in any case (the service serves "Prefix" as "prefix"), and the
// canonicalization lower-cases them, so a signed "peekonly" and a replayed
// "PeekOnly" must mean the same thing: reading names case-sensitively
// would let a replay change the operation under the same signature.
//
// A name may appear once. The Shared Key canonicalization sorts repeated
// values, so their order is not bound by the signature, and a handler that
// read the first one would serve something the signer need not have sent.
// No Queue service operation defines a multi-valued parameter (list-valued
// ones such as include take one comma-separated value), so every request
// with a repeated name is refused before it is authorized (see
// checkRepeated); parse only records the first repeated pair.
//
// The pairs are a short list rather than a map: a request carries a
// handful of parameters.
type query struct {
	pairs []qpair
	buf   [8]qpair
	// repeated is 1 + the index of the first pair whose name an earlier
	// pair has; 0 when every name is distinct.
	repeated int
}

// qpair is one decoded parameter.
type qpair struct {
	name string // lower case
	sent string // the name as sent, decoded (for the Go SDK's signing order)
	v    string
}

// maxQueryPairsLinear is the pair count up to which parse finds repeated
// names by scanning; longer (hostile) query strings use a map.
const maxQueryPairsLinear = 16

// parse decodes raw. Pairs are separated by '&' only (a ';' is data),
// empty pairs are skipped, and '+' decodes to a space. A bad percent
// escape is 400 InvalidUri.
func (p *query) parse(raw string) error {
	p.pairs = p.buf[:0]
	p.repeated = 0
	var seen map[string]bool
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		var err error
		if k, err = unescape(k); err != nil {
			return errInvalidURI()
		}
		if v, err = unescape(v); err != nil {
			return errInvalidURI()
		}
		name := strings.ToLower(k)
		if p.repeated == 0 {
			dup := false
			if len(p.pairs) < maxQueryPairsLinear {
				dup = p.has(name)
			} else {
				if seen == nil {
					seen = make(map[string]bool, 2*len(p.pairs))
					for _, kv := range p.pairs {
						seen[kv.name] = true
					}
				}
				dup = seen[name]
				seen[name] = true
			}
			if dup {
				p.repeated = len(p.pairs) + 1
			}
		}
		p.pairs = append(p.pairs, qpair{name: name, sent: k, v: v})
	}
	return nil
}

// checkRepeated refuses a query with a repeated name: 400
// InvalidQueryParameterValue, or 403 AuthenticationFailed when the name is
// a field of the shared access signature that authorizes the request
// (sasAuth), as a malformed SAS is an authentication failure.
func (p *query) checkRepeated(sasAuth bool) error {
	if p.repeated == 0 {
		return nil
	}
	kv := p.pairs[p.repeated-1]
	if sasAuth && sasFieldNames[kv.name] {
		return authFailed("The SAS field '" + kv.name + "' appears more than once.")
	}
	return invalidQueryValue(kv.name, kv.v, "The parameter is given more than once; it takes one value.")
}

// parseQuery parses raw into a new query.
func parseQuery(raw string) (*query, error) {
	p := &query{}
	if err := p.parse(raw); err != nil {
		return nil, err
	}
	return p, nil
}

// get returns the value of the named parameter; name is lower case.
func (p *query) get(name string) (string, bool) {
	for _, kv := range p.pairs {
		if kv.name == name {
			return kv.v, true
		}
	}
	return "", false
}

// has reports whether the named parameter is present; name is lower case.
func (p *query) has(name string) bool {
	_, ok := p.get(name)
	return ok
}

func unescape(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s, nil
	}
	return url.QueryUnescape(s)
}
