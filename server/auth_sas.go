package server

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/azqlib/azq"
)

// maxSASField bounds every SAS field we look at, so that error details
// (which quote fields) stay small whatever a client sends. Real fields are
// a few dozen bytes; a signed identifier is at most 64 characters.
const maxSASField = 1024

// Letters each SAS kind may carry (Create an account SAS / Create a service
// SAS). Account SAS letters are shared by all services, so blob and table
// letters are well-formed here even though no queue operation needs them.
const (
	accountSASPermissionLetters = "rwdxylacuptfi"
	accountSASServiceLetters    = "bqtf"
	accountSASResourceLetters   = "sco"
	queueSASPermissionLetters   = "raup"
)

// sasFields are the SAS query parameters, URL-decoded. The signature
// covers them exactly as sent, so they are kept as strings.
type sasFields struct {
	sv, ss, srt, sp, st, se, sip, spr, si, ses, sig string
	svNum                                           int // sv as yyyymmdd
	present                                         map[string]bool
}

// sasFieldNames are the query parameters a SAS consists of.
var sasFieldNames = map[string]bool{
	"sv": true, "ss": true, "srt": true, "sp": true, "st": true, "se": true,
	"sip": true, "spr": true, "si": true, "ses": true, "sig": true,
}

func parseSASFields(q *query) (sasFields, *azq.Error) {
	f := sasFields{present: map[string]bool{}}
	for _, p := range []struct {
		name string
		dst  *string
	}{
		{"sv", &f.sv}, {"ss", &f.ss}, {"srt", &f.srt}, {"sp", &f.sp},
		{"st", &f.st}, {"se", &f.se}, {"sip", &f.sip}, {"spr", &f.spr},
		{"si", &f.si}, {"ses", &f.ses}, {"sig", &f.sig},
	} {
		v, ok := q.get(p.name)
		if !ok {
			continue
		}
		// A repeated field never gets here: checkRepeated refused it.
		if len(v) > maxSASField {
			return f, authFailed("The SAS field '" + p.name + "' is too long.")
		}
		*p.dst = v
		f.present[p.name] = true
	}
	if f.sig == "" {
		return f, authFailed("Signature fields not well formed: sig is empty.")
	}
	if f.sv == "" {
		return f, authFailed("sv is mandatory. Cannot be empty")
	}
	var ok bool
	if f.svNum, ok = parseServiceVersion(f.sv); !ok {
		return f, authFailed("The signed version '" + f.sv + "' is not a valid service version.")
	}
	return f, nil
}

// authorizeSAS verifies a shared access signature in the query: an account
// SAS when ss or srt is present, else a service SAS for the queue.
func authorizeSAS(a authRequest) error {
	f, err := parseSASFields(a.query)
	if err != nil {
		return err
	}
	if f.present["ss"] || f.present["srt"] {
		return authorizeAccountSAS(a, f)
	}
	return authorizeServiceSAS(a, f)
}

// authorizeAccountSAS checks an account SAS (Azure's "Create an account
// SAS", docs/semantics.md §9.4; introduced with version 2015-04-05).
func authorizeAccountSAS(a authRequest, f sasFields) error {
	if f.svNum < 20150405 {
		return authFailed("Account SAS requires signed version 2015-04-05 or later; got '" + f.sv + "'.")
	}
	for _, req := range []struct{ name, val string }{{"ss", f.ss}, {"srt", f.srt}, {"sp", f.sp}, {"se", f.se}} {
		if req.val == "" {
			return authFailed("Signature fields not well formed: the account SAS field '" + req.name + "' is missing.")
		}
	}
	if !onlyLetters(f.ss, accountSASServiceLetters) {
		return authFailed("Signature fields not well formed: invalid signed services '" + f.ss + "'.")
	}
	if !onlyLetters(f.srt, accountSASResourceLetters) {
		return authFailed("Signature fields not well formed: invalid signed resource types '" + f.srt + "'.")
	}
	if !onlyLetters(f.sp, accountSASPermissionLetters) {
		return authFailed("Signature fields not well formed: invalid signed permissions '" + f.sp + "'.")
	}
	start, expiry, err := parseSASTimes(f.st, f.se)
	if err != nil {
		return err
	}
	ipr, err := parseSASIPRange(f.sip)
	if err != nil {
		return err
	}
	if err := checkSASProtocolValue(f.spr); err != nil {
		return err
	}

	fields := []string{a.account.Name, f.sp, f.ss, f.srt, f.st, f.se, f.sip, f.spr, f.sv}
	if f.svNum >= 20201206 {
		fields = append(fields, f.ses)
	}
	stringToSign := strings.Join(fields, "\n") + "\n"
	if !signatureMatches(a.keys, []string{stringToSign}, f.sig) {
		return authFailed("Signature did not match. String to sign used was " + stringToSign)
	}

	if err := checkSASWindow(a.now, start, expiry); err != nil {
		return err
	}
	if err := checkSASIP(a.r, ipr); err != nil {
		return err
	}
	if err := checkSASProtocol(a.r, f.spr); err != nil {
		return err
	}
	if !strings.Contains(f.ss, "q") {
		return authzServiceMismatch("The account SAS does not grant access to the queue service (ss='" + f.ss + "').")
	}
	need, ok := accountSASNeeds[a.op]
	if !ok {
		// Azure's SAS error table gives "attempting to modify an access
		// control list" as the example of AuthorizationFailure; only the
		// account key may read or write a queue's ACL.
		return authzFailure(a.op.String() + " cannot be authorized with a shared access signature.")
	}
	if !strings.Contains(f.srt, need.resource) {
		return authzResourceTypeMismatch(a.op.String() + " requires signed resource type '" + need.resource + "'; the SAS grants '" + f.srt + "'.")
	}
	if !strings.ContainsAny(f.sp, need.perms) {
		return authzPermissionMismatch(a.op.String() + " requires signed permission '" + need.perms + "'; the SAS grants '" + f.sp + "'.")
	}
	return nil
}

// accountSASNeed is the resource type and one of the permission letters an
// operation needs under an account SAS.
type accountSASNeed struct {
	resource string // one of s (service), c (container = queue), o (object = message)
	perms    string // any one of these letters suffices
}

// accountSASNeeds follows Azure's account SAS documentation: Add, Process
// and Update are valid for queue messages (object level) only, Delete is
// valid for containers "except for queue messages", List only for the
// service. Azurite files Delete/Update Message under the container type;
// Azure's wording puts them under objects. Create Queue accepts Create as
// well as Write because the docs' Create letter covers "create new"
// resources and Azurite accepts both. The ACL operations are absent: no
// SAS may call them.
var accountSASNeeds = map[operation]accountSASNeed{
	opListQueues:           {"s", "l"},
	opGetServiceProperties: {"s", "r"},
	opSetServiceProperties: {"s", "w"},
	opGetServiceStats:      {"s", "r"},
	opCreateQueue:          {"c", "wc"},
	opDeleteQueue:          {"c", "d"},
	opGetQueueMetadata:     {"c", "r"},
	opSetQueueMetadata:     {"c", "w"},
	opClearMessages:        {"c", "d"},
	opPutMessage:           {"o", "a"},
	opGetMessages:          {"o", "p"},
	opPeekMessages:         {"o", "r"},
	opDeleteMessage:        {"o", "p"},
	opUpdateMessage:        {"o", "u"},
}

// queueSASNeeds are the service SAS permission letters per operation
// (Create a service SAS, queue permissions): r reads metadata and peeks,
// a adds, u updates, p processes (get and delete).
var queueSASNeeds = map[operation]string{
	opGetQueueMetadata: "r",
	opPeekMessages:     "r",
	opPutMessage:       "a",
	opUpdateMessage:    "u",
	opGetMessages:      "p",
	opDeleteMessage:    "p",
}

// authorizeServiceSAS checks a service SAS for a queue (Azure's "Create a
// service SAS", docs/semantics.md §9.3). The signed resource is not a parameter: it is derived from
// the request, so a SAS for one queue used on another queue (or on the
// service) fails the signature check, as in Azure.
func authorizeServiceSAS(a authRequest, f sasFields) error {
	if f.svNum < 20120212 {
		return authFailed("Queue SAS requires signed version 2012-02-12 or later; got '" + f.sv + "'.")
	}
	if f.si == "" && (f.se == "" || f.sp == "") {
		return authFailed("Signature fields not well formed: a SAS without a signed identifier must carry se and sp.")
	}
	if f.sp != "" && !onlyLetters(f.sp, queueSASPermissionLetters) {
		return authFailed("Signature fields not well formed: invalid signed permissions '" + f.sp + "'.")
	}
	if len(f.si) > 64 {
		return authFailed("Signature fields not well formed: the signed identifier is longer than 64 characters.")
	}
	start, expiry, err := parseSASTimes(f.st, f.se)
	if err != nil {
		return err
	}
	var ipr *ipRange
	if f.svNum >= 20150405 {
		if ipr, err = parseSASIPRange(f.sip); err != nil {
			return err
		}
		if err := checkSASProtocolValue(f.spr); err != nil {
			return err
		}
	}

	stringToSign := queueSASStringToSign(a.account.Name, a.queue, f)
	if !signatureMatches(a.keys, []string{stringToSign}, f.sig) {
		return authFailed("Signature did not match. String to sign used was " + stringToSign)
	}

	perms := f.sp
	if f.si != "" {
		var p azq.AccessPolicy
		found := false
		if a.policy != nil && a.queue != "" {
			var perr error
			p, found, perr = a.policy(a.queue, f.si)
			if perr != nil {
				return perr
			}
		}
		if !found {
			return authFailed("The signed identifier '" + f.si + "' does not name a stored access policy of queue '" + a.queue + "'.")
		}
		// A field may come from the SAS or from the policy, not both:
		// Azure documents 400 (Bad Request) for the overlap.
		for _, o := range []struct {
			name      string
			inSAS, in bool
		}{
			{"st", f.st != "", !p.Start.IsZero()},
			{"se", f.se != "", !p.Expiry.IsZero()},
			{"sp", f.sp != "", p.Permission != ""},
		} {
			if o.inSAS && o.in {
				return &azq.Error{Code: azq.CodeInvalidQueryParameterValue, StatusCode: http.StatusBadRequest,
					Message: "Value for one of the query parameters specified in the request URI is invalid.",
					Details: []azq.Detail{
						{Name: "QueryParameterName", Value: o.name},
						{Name: "Reason", Value: "The field is specified both in the shared access signature and in the stored access policy '" + f.si + "'."},
					}}
			}
		}
		if !p.Start.IsZero() {
			start = p.Start
		}
		if !p.Expiry.IsZero() {
			expiry = p.Expiry
		}
		if p.Permission != "" {
			perms = p.Permission
		}
		if expiry.IsZero() || perms == "" {
			return authFailed("Signature fields not well formed: neither the SAS nor the stored access policy '" + f.si + "' gives an expiry time and permissions.")
		}
		if !onlyLetters(perms, queueSASPermissionLetters) {
			return authFailed("The stored access policy '" + f.si + "' has invalid permissions '" + perms + "'.")
		}
	}

	if err := checkSASWindow(a.now, start, expiry); err != nil {
		return err
	}
	if err := checkSASIP(a.r, ipr); err != nil {
		return err
	}
	if f.svNum >= 20150405 {
		if err := checkSASProtocol(a.r, f.spr); err != nil {
			return err
		}
	}
	need, ok := queueSASNeeds[a.op]
	switch {
	case !ok && (a.op == opGetQueueACL || a.op == opSetQueueACL):
		return authzFailure(a.op.String() + " cannot be authorized with a shared access signature.")
	case !ok:
		// No permission letter of a queue SAS covers the operation, so
		// it is not a missing permission: Azure answers Create Queue with
		// AuthorizationFailure (the Azure SDK for Go's live tests,
		// TestQueueGetSASURL), and the other queue-level operations a
		// queue SAS cannot call the same way.
		return authzFailure(a.op.String() + " cannot be authorized with a service SAS for a queue.")
	case !strings.Contains(perms, need):
		return authzPermissionMismatch(a.op.String() + " requires signed permission '" + need + "'; the SAS grants '" + perms + "'.")
	}
	return nil
}

// queueSASStringToSign builds the service SAS string-to-sign for the
// signed version:
//   - 2015-04-05 and later: sp, st, se, /queue/account/queue, si, sip, spr, sv
//   - 2015-02-21: sp, st, se, /queue/account/queue, si, sv
//   - 2012-02-12 to 2015-02-20: sp, st, se, /account/queue, si, sv
func queueSASStringToSign(account, queue string, f sasFields) string {
	resource := "/queue/" + account + "/" + queue
	if f.svNum < 20150221 {
		resource = "/" + account + "/" + queue
	}
	fields := []string{f.sp, f.st, f.se, resource, f.si}
	if f.svNum >= 20150405 {
		fields = append(fields, f.sip, f.spr)
	}
	fields = append(fields, f.sv)
	return strings.Join(fields, "\n")
}

func onlyLetters(s, allowed string) bool {
	for _, c := range s {
		if !strings.ContainsRune(allowed, c) {
			return false
		}
	}
	return true
}

// sasTimeLayouts are the ISO 8601 forms Azure accepts for st and se:
// YYYY-MM-DD, YYYY-MM-DDThh:mmTZD, YYYY-MM-DDThh:mm:ssTZD and the same
// with up to seven fractional digits (Go accepts a fraction after the
// seconds even when the layout has none).
var sasTimeLayouts = []string{
	"2006-01-02T15:04:05Z07:00",
	"2006-01-02T15:04Z07:00",
	"2006-01-02",
}

func parseSASTime(name, v string) (time.Time, *azq.Error) {
	for _, l := range sasTimeLayouts {
		if t, err := time.Parse(l, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, authFailed("Signature fields not well formed: '" + v + "' is not a valid ISO 8601 time for " + name + ".")
}

func parseSASTimes(st, se string) (start, expiry time.Time, err error) {
	if st != "" {
		var e *azq.Error
		if start, e = parseSASTime("st", st); e != nil {
			return start, expiry, e
		}
	}
	if se != "" {
		var e *azq.Error
		if expiry, e = parseSASTime("se", se); e != nil {
			return start, expiry, e
		}
	}
	return start, expiry, nil
}

// checkSASWindow checks the validity window against the service clock
// (which, unlike Date headers, is exactly what a SAS is about). The SAS is
// valid from st (inclusive) until se (exclusive). The messages follow
// Azure's wording.
func checkSASWindow(now, start, expiry time.Time) error {
	if !start.IsZero() && !expiry.IsZero() && !expiry.After(start) {
		return authFailed("Signed expiry time [" + httpTime(expiry) + "] must be after signed start time [" + httpTime(start) + "]")
	}
	if (!start.IsZero() && now.Before(start)) || !now.Before(expiry) {
		s := ""
		if !start.IsZero() {
			s = httpTime(start)
		}
		return authFailed("Signature not valid in the specified time frame: Start [" + s + "] - Expiry [" + httpTime(expiry) + "] - Current [" + httpTime(now) + "]")
	}
	return nil
}

func httpTime(t time.Time) string { return t.UTC().Format(http.TimeFormat) }

// ipRange is a parsed sip: a single address (lo == hi) or an inclusive
// range.
type ipRange struct{ lo, hi netip.Addr }

func parseSASIPRange(sip string) (*ipRange, error) {
	if sip == "" {
		return nil, nil
	}
	bad := func() (*ipRange, error) {
		return nil, authFailed("Signature fields not well formed: '" + sip + "' is not a valid IP address or range.")
	}
	a, b, isRange := strings.Cut(sip, "-")
	lo, err := netip.ParseAddr(a)
	if err != nil {
		return bad()
	}
	hi := lo
	if isRange {
		if hi, err = netip.ParseAddr(b); err != nil {
			return bad()
		}
	}
	lo, hi = lo.Unmap(), hi.Unmap()
	if lo.Is4() != hi.Is4() || hi.Less(lo) {
		return bad()
	}
	return &ipRange{lo, hi}, nil
}

// checkSASIP compares the SAS IP range with the peer address of the
// connection. Forwarding headers are ignored: the server is in-process
// and cannot know which proxies to trust.
func checkSASIP(r *http.Request, ipr *ipRange) error {
	if ipr == nil {
		return nil
	}
	host := r.RemoteAddr
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return authzSourceIPMismatch(host, "The source address of the request could not be determined.")
	}
	addr = addr.WithZone("").Unmap()
	if addr.Is4() != ipr.lo.Is4() || addr.Less(ipr.lo) || ipr.hi.Less(addr) {
		return authzSourceIPMismatch(addr.String(), "The SAS allows requests from "+ipr.lo.String()+"-"+ipr.hi.String()+" only.")
	}
	return nil
}

// checkSASProtocolValue accepts the two documented spr values (and the
// reversed pair, which means the same).
func checkSASProtocolValue(spr string) error {
	switch spr {
	case "", "https", "https,http", "http,https":
		return nil
	}
	return authFailed("Signature fields not well formed: invalid signed protocol '" + spr + "'.")
}

// checkSASProtocol refuses an https-only SAS on a plain-HTTP request. The
// request is HTTPS exactly when the connection is TLS.
func checkSASProtocol(r *http.Request, spr string) error {
	if spr == "https" && r.TLS == nil {
		return authzProtocolMismatch("The SAS allows HTTPS requests only.")
	}
	return nil
}
