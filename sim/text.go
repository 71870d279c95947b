package sim

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the report as the text summary the command prints. It
// holds nothing that depends on the machine, such as how long the run took,
// so the same seed gives the same text, byte for byte.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	title := r.Name
	if title == "" {
		title = "scenario"
	}
	fmt.Fprintf(&b, "azqsim: %s\n", title)
	if r.Description != "" {
		fmt.Fprintf(&b, "%s\n", r.Description)
	}
	if r.Parameter != "" {
		fmt.Fprintf(&b, "%s = %s\n", r.Parameter, r.Value)
	}
	fmt.Fprintf(&b, "simulated %v from %s, seed %d\n\n", r.Duration, r.Start.UTC().Format("2006-01-02 15:04 MST (Mon)"), r.Seed)

	m := &r.Messages
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	fmt.Fprintln(&b, "messages")
	row("put", count(m.Put), "")
	row("completed", count(m.Completed), fmt.Sprintf("%s/s", num(r.Throughput)))
	row("deliveries", count(m.Deliveries), "")
	row("duplicate deliveries", count(m.Duplicates), pct(m.Duplicates, m.Deliveries-m.Duplicates)+" of messages delivered")
	row("processed again", count(m.ProcessedAgain), "")
	row("stale deletes", count(m.StaleDeletes), "")
	row("failed attempts", count(m.Failed), "")
	row("poisoned", count(m.Poisoned), "")
	row("expired", count(m.Expired), "")
	row("crashes", count(m.Crashes), "")
	row("in the queue at the end", count(m.InQueue), "")
	row("held by consumers at the end", count(m.InFlight), "")
	row("lost", count(m.Lost), "")
	tw.Flush()

	l := &r.Latency
	fmt.Fprintf(&b, "\nlatency, put to delete (%s messages)\n", count(l.Count))
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	row("mean", "p50", "p90", "p99", "max")
	row(secs(l.Mean), secs(l.P50), secs(l.P90), secs(l.P99), secs(l.Max))
	tw.Flush()

	q := &r.Queue
	fmt.Fprintf(&b, "\nqueue depth: max %s, mean %s; in flight: max %s\n", count(q.MaxDepth), num(q.MeanDepth), count(q.MaxInFlight))

	t := &r.Transactions
	fmt.Fprintf(&b, "\nstorage transactions at %s %s per 10,000\n", num(t.PerTenThousand), t.Currency)
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	row("operation", "count", "cost")
	for i, c := range t.Count {
		name := OpNames[i]
		if i == OpGet {
			name = fmt.Sprintf("Get (%s empty)", count(t.EmptyGets))
		}
		row(name, count(c), money(float64(c)/1e4*t.PerTenThousand))
	}
	row("total", count(t.Total), money(t.Cost)+" "+t.Currency)
	tw.Flush()

	fmt.Fprintln(&b, "\nfleets")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	row("fleet", "model", "consumers", "consumer-hours", "utilisation", "deliveries", "completed", "empty Gets", "crashes")
	for _, f := range r.Fleets {
		row(f.Name, f.Model, strconv.Itoa(f.MaxConsumers), num(f.ConsumerHours), fmt.Sprintf("%.1f %%", 100*f.Utilisation),
			count(f.Deliveries), count(f.Completed), count(f.EmptyGets), count(f.Crashes))
	}
	tw.Flush()

	if len(r.Violations) == 0 {
		fmt.Fprintln(&b, "\ncheck: every message is accounted for")
	} else {
		fmt.Fprintln(&b, "\nCHECK FAILED:")
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "  %s\n", v)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// count writes n with thousands separators.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// num writes x with about four significant digits.
func num(x float64) string {
	switch {
	case x == 0:
		return "0"
	case math.Abs(x) >= 1e4:
		return count(int64(math.Round(x)))
	default:
		return strconv.FormatFloat(x, 'g', 4, 64)
	}
}

func money(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }

func pct(n, of int64) string {
	if of <= 0 {
		return "0 %"
	}
	return fmt.Sprintf("%.3g %%", 100*float64(n)/float64(of))
}

// secs writes a number of seconds as a duration a reader takes in at once.
func secs(s float64) string {
	d := time.Duration(s * 1e9)
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	default:
		return Duration(d.Round(time.Second)).String()
	}
}
