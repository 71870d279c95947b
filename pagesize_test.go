package azq

import (
	"reflect"
	"strconv"
	"testing"
)

func TestListQueuesOptionsPageSize(t *testing.T) {
	for _, tc := range []struct {
		max, want int
		bad       bool
	}{
		{0, 5000, false},
		{1, 1, false},
		{32, 32, false},
		{5000, 5000, false},
		{5001, 0, true},
		{-1, 0, true},
	} {
		got, err := ListQueuesOptions{MaxResults: tc.max}.PageSize()
		if !tc.bad {
			if err != nil || got != tc.want {
				t.Errorf("PageSize of MaxResults %d = %d, %v; want %d", tc.max, got, err, tc.want)
			}
			continue
		}
		e := wantError(t, err, ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400)
		want := []Detail{{"QueryParameterName", "maxresults"}, {"QueryParameterValue", strconv.Itoa(tc.max)},
			{"MinimumAllowed", "1"}, {"MaximumAllowed", "5000"}}
		if !reflect.DeepEqual(e.Details, want) {
			t.Errorf("PageSize of MaxResults %d: details %v, want %v", tc.max, e.Details, want)
		}
	}
}
