package server

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

// TestAppendHTTPTime: appendHTTPTime writes what AppendFormat writes with
// http.TimeFormat, for the edges of the times azq reports and for times
// drawn across the years 0 to 9999, in UTC and in other zones.
func TestAppendHTTPTime(t *testing.T) {
	times := []time.Time{
		{},
		time.Unix(0, 0),
		time.Unix(0, -1),
		time.Date(2026, 2, 28, 23, 59, 59, 999999999, time.UTC),
		time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC),
		time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2262, 4, 11, 23, 47, 16, 854775807, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 25, 9, 5, 7, 0, time.FixedZone("UTC+14", 14*3600)),
	}
	r := rand.New(rand.NewPCG(1, 2))
	first, last := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
	for i := 0; i < 100000; i++ {
		times = append(times, time.Unix(first+r.Int64N(last-first+1), r.Int64N(1e9)).In(time.FixedZone("", r.IntN(50*3600)-25*3600)))
	}
	for _, tm := range times {
		want := tm.UTC().AppendFormat([]byte("x"), http.TimeFormat)
		if got := appendHTTPTime([]byte("x"), tm); string(got) != string(want) {
			t.Fatalf("appendHTTPTime(%v) = %q, want %q", tm, got, want)
		}
	}
}
