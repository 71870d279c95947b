package azq_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
)

// The exported checks give exactly the errors of the queue's operations,
// for Azure's limits (the zero Limits) and for custom ones, so that a back
// end that calls them answers bad input as the in-memory queue does.
func TestLimitsChecksMatchTheQueue(t *testing.T) {
	ctx := context.Background()
	week := 7 * 24 * time.Hour
	for _, l := range []azq.Limits{{}, {MaxMessageSize: 10, MaxMessagesPerGet: 4, MaxVisibilityTimeout: time.Hour, MaxTimeToLive: 2 * time.Hour}} {
		q := azq.New(azq.WithLimits(l))
		m, err := q.Put(ctx, "m", nil)
		if err != nil {
			t.Fatal(err)
		}
		big := strings.Repeat("x", 64<<10+1)
		for _, c := range []struct {
			content string
			opts    *azq.PutOptions
		}{
			{"ok", nil},
			{big, nil},
			{"ok", &azq.PutOptions{VisibilityTimeout: -time.Second}},
			{"ok", &azq.PutOptions{VisibilityTimeout: week + time.Second}},
			{"ok", &azq.PutOptions{VisibilityTimeout: time.Minute, TimeToLive: time.Minute}},
			{"ok", &azq.PutOptions{TimeToLive: -2 * time.Second}},
			{"ok", &azq.PutOptions{TimeToLive: azq.NeverExpires}},
			{"ok", &azq.PutOptions{TimeToLive: 3 * time.Hour}},
		} {
			_, want := q.Put(ctx, c.content, c.opts)
			_, got := l.CheckPut(c.content, c.opts)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("limits %+v: CheckPut(%.10q, %+v) = %v, Put gave %v", l, c.content, c.opts, got, want)
			}
		}
		for _, n := range []int{-1, 0, 1, 4, 5, 32, 33} {
			for _, v := range []time.Duration{-time.Second, 0, time.Second, time.Hour, week, week + time.Second} {
				_, want := q.Get(ctx, n, v)
				if got := l.CheckGet(n, v); !reflect.DeepEqual(got, want) {
					t.Errorf("limits %+v: CheckGet(%d, %v) = %v, Get gave %v", l, n, v, got, want)
				}
			}
			_, want := q.Peek(ctx, n)
			if got := l.CheckPeek(n); !reflect.DeepEqual(got, want) {
				t.Errorf("limits %+v: CheckPeek(%d) = %v, Peek gave %v", l, n, got, want)
			}
		}
		for _, v := range []time.Duration{-time.Second, week + time.Second} {
			for _, content := range []*string{nil, &big} {
				// A bad visibility or content is refused before the
				// receipt is looked at, so the stale receipt does not
				// matter.
				_, want := q.Update(ctx, m.ID, m.PopReceipt, v, content)
				if got := l.CheckUpdate(v, content); !reflect.DeepEqual(got, want) {
					t.Errorf("limits %+v: CheckUpdate(%v) = %v, Update gave %v", l, v, got, want)
				}
			}
		}
		if err := l.CheckUpdate(0, nil); err != nil {
			t.Errorf("CheckUpdate(0, nil) = %v", err)
		}
	}
}

func TestValidateAccessPoliciesMatchesTheQueue(t *testing.T) {
	ctx := context.Background()
	q := azq.New()
	for _, ps := range [][]azq.AccessPolicy{
		nil,
		{{ID: "a", Permission: "raup"}},
		{{ID: ""}},
		{{ID: strings.Repeat("i", 65)}},
		{{ID: "a"}, {ID: "a"}},
		{{ID: "a", Permission: "rw"}},
		{{ID: "1"}, {ID: "2"}, {ID: "3"}, {ID: "4"}, {ID: "5"}, {ID: "6"}},
	} {
		want := q.SetAccessPolicies(ctx, ps)
		if got := azq.ValidateAccessPolicies(ps); !reflect.DeepEqual(got, want) {
			t.Errorf("ValidateAccessPolicies(%+v) = %v, SetAccessPolicies gave %v", ps, got, want)
		}
	}
}
