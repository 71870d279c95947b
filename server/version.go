package server

import (
	"net/http"

	"github.com/azqlib/azq"
)

// Service versions: x-ms-version, and sv in a shared access signature.
// A version is a date, "YYYY-MM-DD"; the server handles it as the number
// yyyymmdd, parsed by parseServiceVersion alone.
//
// newestVersion is the newest version this server knows, and the version
// it answers with when a request names none. -strict-version (Options.
// StrictVersion) refuses anything newer, as Azure refuses versions it does
// not know, so it must be at least the newest version the current Azure
// SDKs send; docs/compatibility.md says how it is kept current.
const (
	newestVersion    = "2026-06-06"
	newestVersionNum = 20260606
	oldestVersionNum = 20090919
)

// parseServiceVersion parses "YYYY-MM-DD" into yyyymmdd; ok is false
// unless v is exactly that form and a real calendar date.
func parseServiceVersion(v string) (n int, ok bool) {
	if len(v) != 10 || v[4] != '-' || v[7] != '-' {
		return 0, false
	}
	for i := 0; i < 10; i++ {
		if i == 4 || i == 7 {
			continue
		}
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	year, month, day := n/10000, n/100%100, n%100
	if month < 1 || month > 12 || day < 1 || day > daysIn(year, month) {
		return 0, false
	}
	return n, true
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// acceptVersion reports whether the server serves version n: from
// 2009-09-19 on, and in strict mode no newer than newestVersion.
func (s *Server) acceptVersion(n int) bool {
	return n >= oldestVersionNum && (!s.strict || n <= newestVersionNum)
}

// parseVersion applies the request's x-ms-version.
func (q *request) parseVersion() error {
	vs := q.r.Header.Values("X-Ms-Version")
	if len(vs) == 0 {
		return nil
	}
	v := vs[0]
	n, ok := parseServiceVersion(v)
	if !ok || len(vs) > 1 || !q.s.acceptVersion(n) {
		return &azq.Error{Code: "InvalidHeaderValue", StatusCode: http.StatusBadRequest,
			Message: msgInvalidHeaderValue,
			Details: []azq.Detail{{Name: "HeaderName", Value: "x-ms-version"}, {Name: "HeaderValue", Value: truncate(v, 256)}}}
	}
	q.version, q.verNum = v, n
	return nil
}

// sasVersion applies a SAS's signed version (sv) as the request's
// version when no x-ms-version header names one: Azure handles such a
// request with the version the token was signed for. A malformed sv is
// left to authorization to report.
func (q *request) sasVersion() {
	if _, ok := q.r.Header["X-Ms-Version"]; ok {
		return
	}
	if !q.query.has("sig") {
		return
	}
	sv, _ := q.query.get("sv")
	if n, ok := parseServiceVersion(sv); ok && q.s.acceptVersion(n) {
		q.version, q.verNum = sv, n
	}
}
