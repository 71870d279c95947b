package server

import (
	"strings"
	"testing"
)

func TestParseTraceparent(t *testing.T) {
	const tid, pid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tc := range []struct {
		v  string
		ok bool
	}{
		{"00-" + tid + "-" + pid + "-01", true},
		{"00-" + tid + "-" + pid + "-00", true},
		{"01-" + tid + "-" + pid + "-01-what-comes-later", true}, // a later version may add fields
		{"01-" + tid + "-" + pid + "-01", true},
		{"00-" + tid + "-" + pid + "-01-more", false}, // version 00 has four fields
		{"01-" + tid + "-" + pid + "-01x", false},
		{"ff-" + tid + "-" + pid + "-01", false}, // version ff is invalid
		{"00-" + strings.ToUpper(tid) + "-" + pid + "-01", false},
		{"00-00000000000000000000000000000000-" + pid + "-01", false},
		{"00-" + tid + "-0000000000000000-01", false},
		{"00-" + tid + "-" + pid + "-0g", false},
		{"00-" + tid + "-" + pid, false},
		{"0-" + tid + "-" + pid + "-01", false},
		{"00_" + tid + "-" + pid + "-01", false},
		{"", false},
		{"01-" + tid + "-" + pid + "-01-" + strings.Repeat("x", maxTraceparent), false}, // beyond the bound
	} {
		tp, ok := parseTraceparent(tc.v)
		if ok != tc.ok || ok && (tp.traceID != tid || tp.parentID != pid) {
			t.Errorf("parseTraceparent(%q) = %+v, %v; want ok %v", tc.v, tp, ok, tc.ok)
		}
	}
}

// FuzzTraceparent checks that any header value parses without failing,
// and that what parses is what the specification allows.
func FuzzTraceparent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-extra")
	f.Add("00-00000000000000000000000000000000-00f067aa0ba902b7-01")
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, v string) {
		tp, ok := parseTraceparent(v)
		if !ok {
			return
		}
		if len(tp.traceID) != 32 || len(tp.parentID) != 16 || !isLowerHex(tp.traceID) || !isLowerHex(tp.parentID) ||
			allZero(tp.traceID) || allZero(tp.parentID) || len(v) > maxTraceparent || v[3:35] != tp.traceID || v[36:52] != tp.parentID {
			t.Fatalf("parseTraceparent(%q) = %+v", v, tp)
		}
	})
}
