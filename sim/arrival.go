package sim

import (
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// arrivals generates a producer's arrival times: offsets in nanoseconds
// from the start of the run, each with a number of messages. It draws from
// its own random stream, seeded by the run's seed and the producer, so that
// a second generator made the same way replays the same arrivals: the
// simulator uses one to put messages and another, running a time-to-live
// behind, to account for the messages that expire.
type arrivals struct {
	kind  byte
	rng   *rand.Rand
	rate  float64 // per nanosecond
	size  int
	every int64
	start int64 // first possible arrival
	stop  int64 // no arrival at or after this
	left  int64 // messages still allowed; -1 for no limit
	k     int64 // arrivals so far (constant rate, bursts)
	t     int64 // time of the last arrival (Poisson, daily)
	done  bool

	// daily profile: segments of the day with their rate, per nanosecond
	segs     []segment
	sod      int64 // offset of the run's start into its day
	weekday  int   // weekday of the run's first day, 0 Sunday
	weekends bool
}

type segment struct {
	from, to int64 // offsets into the day
	rate     float64
}

const (
	arrConstant byte = iota
	arrPoisson
	arrBurst
	arrDaily
)

const day = int64(24 * time.Hour)

func newArrivals(p *Producer, index int, seed uint64, runStart time.Time, runFor int64) *arrivals {
	a := &arrivals{
		rng:   rand.New(rand.NewPCG(seed, 0x70726f6475636572^uint64(index))),
		start: int64(p.Start),
		stop:  runFor,
		left:  -1,
	}
	if p.Stop > 0 && int64(p.Stop) < a.stop {
		a.stop = int64(p.Stop)
	}
	if p.Count > 0 {
		a.left = p.Count
	}
	a.t = a.start
	switch p.Arrival.Kind {
	case "constant":
		a.kind, a.rate = arrConstant, p.Arrival.Rate/1e9
	case "poisson":
		a.kind, a.rate = arrPoisson, p.Arrival.Rate/1e9
	case "burst":
		a.kind, a.size, a.every = arrBurst, p.Arrival.Size, int64(p.Arrival.Every)
	case "daily":
		a.kind = arrDaily
		a.weekends = p.Arrival.Weekends
		midnight := time.Date(runStart.Year(), runStart.Month(), runStart.Day(), 0, 0, 0, 0, runStart.Location())
		a.sod = int64(runStart.Sub(midnight))
		a.weekday = int(midnight.Weekday())
		a.segs = dailySegments(p.Arrival.Windows)
	}
	return a
}

// dailySegments turns possibly overlapping windows into disjoint segments
// covering the day, each with the sum of the rates of the windows over it.
func dailySegments(ws []Window) []segment {
	cuts := []int64{0, day}
	type win struct {
		from, to int64
		rate     float64
	}
	var wins []win
	for _, w := range ws {
		from, _ := parseClock(w.From)
		to, _ := parseClock(w.To)
		wins = append(wins, win{int64(from), int64(to), w.Rate / 1e9})
		cuts = append(cuts, int64(from), int64(to))
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i] < cuts[j] })
	var segs []segment
	for i := 0; i+1 < len(cuts); i++ {
		a, b := cuts[i], cuts[i+1]
		if a == b {
			continue
		}
		r := 0.0
		for _, w := range wins {
			if w.from <= a && b <= w.to {
				r += w.rate
			}
		}
		segs = append(segs, segment{a, b, r})
	}
	return segs
}

// next returns the next arrival: its time and how many messages arrive
// then. ok is false when the producer is done.
func (a *arrivals) next() (at int64, n int, ok bool) {
	if a.done || a.left == 0 {
		a.done = true
		return 0, 0, false
	}
	n = 1
	switch a.kind {
	case arrConstant:
		at = a.start + int64(math.Round(float64(a.k)/a.rate))
		a.k++
	case arrPoisson:
		a.t += int64(math.Round(-math.Log1p(-a.rng.Float64()) / a.rate))
		at = a.t
	case arrBurst:
		if a.every == 0 && a.k > 0 {
			at = a.stop
		} else {
			at = a.start + a.k*a.every
		}
		a.k++
		n = a.size
	case arrDaily:
		var found bool
		at, found = a.nextDaily()
		if !found {
			at = a.stop
		}
		a.t = at
	}
	if at >= a.stop || at < 0 {
		a.done = true
		return 0, 0, false
	}
	if a.left > 0 {
		n = int(min(int64(n), a.left))
		a.left -= int64(n)
	}
	return at, n, true
}

// nextDaily draws the next arrival of the daily profile after a.t: an
// exponential amount of "rate × time" is spent across the segments, which
// is exact for piecewise-constant rates.
func (a *arrivals) nextDaily() (int64, bool) {
	need := -math.Log1p(-a.rng.Float64()) // in units of rate·ns
	t := a.t
	idle := int64(0) // time passed without any rate, to detect a profile that never produces
	for t < a.stop {
		abs := t + a.sod
		d := abs / day
		tod := abs % day
		rateOn := a.weekends || !weekend((a.weekday+int(d))%7)
		// find the segment holding tod
		i := sort.Search(len(a.segs), func(i int) bool { return a.segs[i].to > tod })
		s := a.segs[i]
		span := s.to - tod
		r := s.rate
		if !rateOn {
			r = 0
			span = day - tod // skip the rest of the day
		}
		if r > 0 {
			idle = 0
			if need <= r*float64(span) {
				return t + int64(math.Ceil(need/r)), true
			}
			need -= r * float64(span)
		} else if idle += span; idle > 8*day {
			return 0, false // no window has a rate on any day
		}
		t += span
	}
	return 0, false
}

func weekend(wd int) bool { return wd == int(time.Saturday) || wd == int(time.Sunday) }
