package observe_test

import (
	"testing"

	"github.com/azqlib/azq/observe"
)

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		status  int
		code    string
		network bool
		want    observe.Outcome
	}{
		{200, "", false, observe.Success},
		{204, "", false, observe.Success},
		{404, "MessageNotFound", false, observe.ClientError},
		{503, "ServerBusy", false, observe.ThrottlingError},
		{503, "", false, observe.ThrottlingError},
		{429, "", false, observe.ThrottlingError},
		{500, "OperationTimedOut", false, observe.ServerError},
		{503, "SomethingElse", false, observe.ServerError},
		{200, "", true, observe.NetworkError},
		{0, "", true, observe.NetworkError},
	} {
		if got := observe.OutcomeOf(tc.status, tc.code, tc.network); got != tc.want {
			t.Errorf("OutcomeOf(%d, %q, %v) = %s, want %s", tc.status, tc.code, tc.network, got, tc.want)
		}
	}
}

func TestTookEffect(t *testing.T) {
	for _, tc := range []struct {
		o    observe.Observation
		want bool
	}{
		{observe.Observation{Outcome: observe.Success}, true},
		{observe.Observation{Outcome: observe.ServerError}, false},
		{observe.Observation{Outcome: observe.ServerError, Applied: true}, true},
		{observe.Observation{Outcome: observe.NetworkError, Applied: true}, true},
		{observe.Observation{Outcome: observe.ClientError}, false},
	} {
		if got := tc.o.TookEffect(); got != tc.want {
			t.Errorf("%+v: TookEffect = %v, want %v", tc.o, got, tc.want)
		}
	}
}
