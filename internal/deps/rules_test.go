package deps

import (
	"slices"
	"testing"
)

// bannedChains finds the shortest chain to each banned package, one per
// rule, and nothing when no banned package is linked.
func TestBannedChains(t *testing.T) {
	imports := map[string][]string{
		"a":                   {"b", "c"},
		"b":                   {"net/http"},
		"c":                   {"d"},
		"d":                   {"ext/x/one", "ext/x/two"},
		"net/http":            nil,
		"ext/x/one":           nil,
		"ext/x/two":           nil,
		"unrelated/net/http2": nil,
	}
	for _, tc := range []struct {
		name   string
		from   string
		banned []string
		want   [][]string
	}{
		{"exact", "a", []string{"net/http"}, [][]string{{"a", "b", "net/http"}}},
		{"prefix, once per rule", "a", []string{"ext/x/"}, [][]string{{"a", "c", "d", "ext/x/one"}}},
		{"an exact rule is not a prefix", "a", []string{"net/h"}, nil},
		{"not linked", "c", []string{"net/http"}, nil},
		{"both", "a", []string{"net/http", "ext/"}, [][]string{{"a", "b", "net/http"}, {"a", "c", "d", "ext/x/one"}}},
	} {
		got := bannedChains(imports, tc.from, tc.banned)
		if !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("%s: bannedChains = %q, want %q", tc.name, got, tc.want)
		}
	}
}
