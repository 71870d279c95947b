package azure

import (
	"net/url"
	"testing"
)

// queryValue reads a request's query as url.Values.Get does.
func TestQueryValueIsURLValuesGet(t *testing.T) {
	for _, q := range []string{
		"",
		"numofmessages=32",
		"visibilitytimeout=30&numofmessages=5",
		"comp=list&maxresults=5000&include=metadata",
		"comp=list&maxresults=",
		"numofmessages=1&numofmessages=32",
		"numofmessages",
		"prefix=a%26b&comp=list",
		"num%6Fofmessages=3",
		"comp=li%73t",
		"comp=%zz",
		"a=1&&comp=list",
		"comp=x;y&comp=list",
		"comp+=list&comp=other",
	} {
		want, _ := url.ParseQuery(q) // the pairs it can read, as Get sees them
		for _, key := range []string{"numofmessages", "comp", "maxresults", "prefix"} {
			if got := queryValue(q, key); got != want.Get(key) {
				t.Errorf("queryValue(%q, %q) = %q, want %q", q, key, got, want.Get(key))
			}
		}
	}
}
