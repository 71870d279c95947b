package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Each distribution's draws have the mean it should have.
func TestDistributionMeans(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Dist
	}{
		{"constant", Const(3 * time.Second)},
		{"exponential", Exponential(2 * time.Second)},
		{"lognormal", LogNormal(20*time.Second, 1)},
		{"uniform", Dist{Kind: "uniform", Min: d(time.Second), Max: d(3 * time.Second)}},
		{"empirical", Dist{Kind: "empirical", Values: []Duration{d(time.Second), d(10 * time.Second)}, Weights: []float64{3, 1}}},
	} {
		if err := tc.d.check(); err != nil {
			t.Fatal(err)
		}
		s := newSampler(tc.d)
		const n = 200_000
		sum := 0.0
		for i := range n {
			r := newKeyed(1, uint64(i))
			sum += float64(s.draw(&r))
		}
		if got, want := sum/n, s.mean(); math.Abs(got-want)/want > 0.02 {
			t.Errorf("%s: mean of draws %v, want %v", tc.name, time.Duration(got), time.Duration(want))
		}
	}
}

func TestDistributionClampAndUpper(t *testing.T) {
	dist := Dist{Kind: "lognormal", Median: d(time.Second), Sigma: 3, Min: d(100 * time.Millisecond), Max: d(5 * time.Second)}
	if err := dist.check(); err != nil {
		t.Fatal(err)
	}
	s := newSampler(dist)
	for i := range 10000 {
		r := newKeyed(2, uint64(i))
		if v := s.draw(&r); v < int64(100*time.Millisecond) || v > int64(5*time.Second) {
			t.Fatalf("draw %v outside the clamp", time.Duration(v))
		}
	}
	if up, ok := dist.upper(); !ok || up != d(5*time.Second) {
		t.Errorf("upper %v %v", up, ok)
	}
	if _, ok := Exponential(time.Second).upper(); ok {
		t.Error("an unbounded distribution has an upper bound")
	}
}

// The same key gives the same stream; a different key another.
func TestKeyedStreams(t *testing.T) {
	a, b, c := newKeyed(1, 2, 3), newKeyed(1, 2, 3), newKeyed(1, 2, 4)
	for range 10 {
		x, y, z := a.next(), b.next(), c.next()
		if x != y || x == z {
			t.Fatal("keyed streams are not determined by their keys")
		}
	}
}

// Percentiles from the histogram are within its 1.6 % resolution.
func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]int64, 100_000)
	for i := range vals {
		vals[i] = int64(r.ExpFloat64() * 1e9)
		h.add(vals[i])
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := float64(vals[int(math.Ceil(q*float64(len(vals))))-1])
		if got := h.quantile(q); math.Abs(got-want)/want > 0.016 {
			t.Errorf("q%.3f = %v, want %v", q, got, want)
		}
	}
	if h.quantile(1) != float64(vals[len(vals)-1]) || h.min != vals[0] {
		t.Error("max or min not exact")
	}
	h.reset()
	if h.n != 0 || h.quantile(0.5) != 0 {
		t.Error("reset left values")
	}
	for v := int64(0); v < 1<<20; v = v*3 + 1 {
		if mid := bucketMid(bucketOf(v)); math.Abs(mid-float64(v)) > float64(v)/64+1 {
			t.Errorf("value %d in a bucket around %v", v, mid)
		}
	}
}

func arrivalsOf(t *testing.T, p Producer, runFor time.Duration) (times []int64, total int) {
	t.Helper()
	sc := &Scenario{Duration: d(runFor), Producers: []Producer{p}, Consumers: []Fleet{{Count: 1}}}
	if err := sc.Check(); err != nil {
		t.Fatal(err)
	}
	a := newArrivals(&sc.Producers[0], 0, 1, sc.Start, int64(runFor))
	for {
		at, n, ok := a.next()
		if !ok {
			return times, total
		}
		times = append(times, at)
		total += n
	}
}

func TestArrivals(t *testing.T) {
	if _, n := arrivalsOf(t, Producer{Arrival: Arrival{Kind: "constant", Rate: 10}}, time.Hour); n != 36000 {
		t.Errorf("constant 10/s for an hour: %d", n)
	}
	if _, n := arrivalsOf(t, Producer{Arrival: Arrival{Kind: "poisson", Rate: 10}}, 10*time.Hour); math.Abs(float64(n)-360000) > 4*600 {
		t.Errorf("Poisson 10/s for 10 h: %d, want 360000 ± 2400", n)
	}
	if ts, n := arrivalsOf(t, Producer{Arrival: Arrival{Kind: "burst", Size: 100, Every: d(time.Hour)}, Start: d(30 * time.Minute)}, 3*time.Hour); n != 300 || len(ts) != 3 || ts[0] != int64(30*time.Minute) {
		t.Errorf("bursts: %d messages at %v", n, ts)
	}
	if _, n := arrivalsOf(t, Producer{Arrival: Arrival{Kind: "constant", Rate: 10}, Count: 25}, time.Hour); n != 25 {
		t.Errorf("count 25: %d", n)
	}
	// Daily windows, weekdays only: a week from Monday has five busy hours.
	ts, n := arrivalsOf(t, Producer{Arrival: Arrival{Kind: "daily", Windows: []Window{{From: "09:00", To: "10:00", Rate: 2}}}}, 7*24*time.Hour)
	if math.Abs(float64(n)-5*7200) > 4*math.Sqrt(5*7200) {
		t.Errorf("daily: %d arrivals, want about 36000", n)
	}
	for _, at := range ts {
		day, tod := at/int64(24*time.Hour), time.Duration(at%int64(24*time.Hour))
		if day >= 5 || tod < 9*time.Hour || tod >= 10*time.Hour {
			t.Fatalf("arrival on day %d at %v", day, tod)
		}
	}
	// A replay gives the same arrivals.
	again, _ := arrivalsOf(t, Producer{Arrival: Arrival{Kind: "daily", Windows: []Window{{From: "09:00", To: "10:00", Rate: 2}}}}, 7*24*time.Hour)
	if !slices.Equal(ts, again) {
		t.Error("the arrivals do not replay")
	}
}
