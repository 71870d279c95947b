package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// Dist is a distribution of durations: processing times, and the initial
// visibility delay of messages. A scenario file writes a constant as a plain
// duration string ("2s") and any other distribution as an object:
//
//	{"kind": "constant", "value": "2s"}
//	{"kind": "exponential", "mean": "2s"}
//	{"kind": "lognormal", "median": "20s", "sigma": 1}
//	{"kind": "uniform", "min": "1s", "max": "3s"}
//	{"kind": "empirical", "values": ["1s", "2s", "30s"], "weights": [6, 3, 1]}
//
// Min and Max, where given, clamp every draw of any kind (for uniform they
// are its bounds). The zero Dist is the constant 0.
type Dist struct {
	Kind    string     `json:"kind,omitempty"`
	Value   Duration   `json:"value,omitempty"`
	Mean    Duration   `json:"mean,omitempty"`
	Median  Duration   `json:"median,omitempty"`
	Sigma   float64    `json:"sigma,omitempty"`
	Values  []Duration `json:"values,omitempty"`
	Weights []float64  `json:"weights,omitempty"`
	Min     Duration   `json:"min,omitempty"`
	Max     Duration   `json:"max,omitempty"`
}

// Const returns the distribution that is always d.
func Const(d time.Duration) Dist { return Dist{Kind: "constant", Value: Duration(d)} }

// Exponential returns the exponential distribution with the given mean.
func Exponential(mean time.Duration) Dist { return Dist{Kind: "exponential", Mean: Duration(mean)} }

// LogNormal returns the log-normal distribution with the given median and
// shape sigma (the standard deviation of the logarithm).
func LogNormal(median time.Duration, sigma float64) Dist {
	return Dist{Kind: "lognormal", Median: Duration(median), Sigma: sigma}
}

// UnmarshalJSON reads a duration string (a constant) or an object.
func (d *Dist) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && (b[0] == '"' || b[0] == '-' || (b[0] >= '0' && b[0] <= '9')) {
		var v Duration
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*d = Const(v.D())
		return nil
	}
	type plain Dist // without this method
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("distribution: %w", err)
	}
	*d = Dist(p)
	return nil
}

// errDist wraps every problem with a distribution.
var errDist = errors.New("distribution")

// check validates d and fills in its kind when only a value is given.
func (d *Dist) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", errDist, d.Kind, fmt.Sprintf(format, args...))
	}
	if d.Kind == "" {
		d.Kind = "constant"
	}
	if d.Min < 0 || d.Max < 0 || (d.Max > 0 && d.Min > d.Max) {
		return bad("min %v and max %v are not a range", d.Min, d.Max)
	}
	switch d.Kind {
	case "constant":
		if d.Value < 0 {
			return bad("value %v is negative", d.Value)
		}
	case "exponential":
		if d.Mean <= 0 {
			return bad("mean must be positive")
		}
	case "lognormal":
		if d.Median <= 0 || d.Sigma < 0 || d.Sigma > 10 || math.IsNaN(d.Sigma) {
			return bad("needs a positive median and a sigma between 0 and 10")
		}
	case "uniform":
		if d.Max <= 0 {
			return bad("needs max (and optionally min)")
		}
	case "empirical":
		if len(d.Values) == 0 {
			return bad("needs values")
		}
		if d.Weights != nil && len(d.Weights) != len(d.Values) {
			return bad("has %d weights for %d values", len(d.Weights), len(d.Values))
		}
		total := 0.0
		for i, v := range d.Values {
			if v < 0 {
				return bad("value %v is negative", v)
			}
			if d.Weights != nil {
				w := d.Weights[i]
				if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
					return bad("weight %v is not a finite non-negative number", w)
				}
				total += w
			}
		}
		if d.Weights != nil && total <= 0 {
			return bad("weights add up to zero")
		}
	default:
		return fmt.Errorf("%w: unknown kind %q (constant, exponential, lognormal, uniform, empirical)", errDist, d.Kind)
	}
	return nil
}

// sampler draws from a checked Dist. Draws take uniforms from a keyed
// stream, so a message's processing time depends only on the seed, the
// message and the attempt, not on the order in which the simulation meets
// it: two runs that differ in one parameter see the same work.
type sampler struct {
	kind     byte
	a, b     float64 // parameters in nanoseconds (or log-nanoseconds)
	min, max int64   // clamp; max 0 means none
	values   []int64
	cum      []float64 // cumulative weights, normalised to end at 1
}

const (
	distConst byte = iota
	distExp
	distLogNormal
	distUniform
	distEmpirical
)

func newSampler(d Dist) sampler {
	s := sampler{min: int64(d.Min), max: int64(d.Max)}
	switch d.Kind {
	case "constant", "":
		s.kind, s.a = distConst, float64(d.Value)
	case "exponential":
		s.kind, s.a = distExp, float64(d.Mean)
	case "lognormal":
		s.kind, s.a, s.b = distLogNormal, math.Log(float64(d.Median)), d.Sigma
	case "uniform":
		s.kind, s.a, s.b = distUniform, float64(d.Min), float64(d.Max)
	case "empirical":
		s.kind = distEmpirical
		s.values = make([]int64, len(d.Values))
		s.cum = make([]float64, len(d.Values))
		total := 0.0
		for i, v := range d.Values {
			s.values[i] = int64(v)
			w := 1.0
			if d.Weights != nil {
				w = d.Weights[i]
			}
			total += w
			s.cum[i] = total
		}
		for i := range s.cum {
			s.cum[i] /= total
		}
	}
	return s
}

// draw returns a duration in nanoseconds, taking uniforms from r.
func (s *sampler) draw(r *keyed) int64 {
	var v float64
	switch s.kind {
	case distConst:
		v = s.a
	case distExp:
		v = -s.a * math.Log1p(-r.float())
	case distLogNormal:
		v = math.Exp(s.a + s.b*r.normal())
	case distUniform:
		v = s.a + (s.b-s.a)*r.float()
	case distEmpirical:
		u := r.float()
		i := sort.SearchFloat64s(s.cum, u)
		for i < len(s.cum)-1 && s.cum[i] <= u {
			i++
		}
		v = float64(s.values[min(i, len(s.values)-1)])
	}
	if v > math.MaxInt64/4 {
		v = math.MaxInt64 / 4 // far beyond any run; keeps sums from overflowing
	}
	n := int64(v)
	if n < s.min {
		n = s.min
	}
	if s.max > 0 && n > s.max {
		n = s.max
	}
	return n
}

// mean returns the distribution's mean in nanoseconds, ignoring the clamp
// except for uniform, for the report.
func (s *sampler) mean() float64 {
	switch s.kind {
	case distConst:
		return s.a
	case distExp:
		return s.a
	case distLogNormal:
		return math.Exp(s.a + s.b*s.b/2)
	case distUniform:
		return (s.a + s.b) / 2
	default:
		m, prev := 0.0, 0.0
		for i, c := range s.cum {
			m += (c - prev) * float64(s.values[i])
			prev = c
		}
		return m
	}
}

// keyed is a stream of pseudo-random numbers determined by a key: the
// SplitMix64 sequence started at a hash of the key. It is cheap to start,
// so every decision about one delivery gets a fresh stream.
type keyed struct{ s uint64 }

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// newKeyed starts the stream for the given key parts.
func newKeyed(parts ...uint64) keyed {
	h := uint64(0x9e3779b97f4a7c15)
	for _, p := range parts {
		h = mix64(h ^ p + 0x9e3779b97f4a7c15)
	}
	return keyed{s: h}
}

func (k *keyed) next() uint64 {
	k.s += 0x9e3779b97f4a7c15
	return mix64(k.s)
}

// float returns a uniform number in [0, 1).
func (k *keyed) float() float64 { return float64(k.next()>>11) * 0x1p-53 }

// normal returns a standard normal number (Box-Muller).
func (k *keyed) normal() float64 {
	u1 := 1 - k.float() // (0, 1]
	u2 := k.float()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// upper returns the largest value a checked d can draw, and false if there
// is no bound.
func (d Dist) upper() (Duration, bool) {
	var hi Duration
	switch d.Kind {
	case "constant", "":
		hi = d.Value
	case "uniform":
		hi = d.Max
	case "empirical":
		for _, v := range d.Values {
			hi = max(hi, v)
		}
	default:
		if d.Max == 0 {
			return 0, false
		}
		hi = d.Max
	}
	if d.Max > 0 {
		hi = min(hi, d.Max)
	}
	return max(hi, d.Min), true
}
