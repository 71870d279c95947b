package sim

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// WriteFiles writes the report into dir, which it creates if need be:
//
//	report.txt       the text summary (WriteText)
//	report.json      the summary as JSON
//	timeseries.csv   the time series, one row per sample
//	timeseries.json  the same as JSON
//	latency.csv      the latency histogram
//
// and, unless format is "", the plots depth, latency, histogram and
// transactions in that format ("png" or "svg"). It returns the names of
// the files written.
func (r *Report) WriteFiles(dir, format string) ([]string, error) {
	write, written, err := fileWriter(dir)
	if err != nil {
		return nil, err
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		return *written, err
	}
	if err := write("report.txt", text.Bytes()); err != nil {
		return *written, err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return *written, err
	}
	if err := write("report.json", append(js, '\n')); err != nil {
		return *written, err
	}
	if err := write("timeseries.csv", r.seriesCSV()); err != nil {
		return *written, err
	}
	js, err = json.MarshalIndent(r.Series, "", "  ")
	if err != nil {
		return *written, err
	}
	if err := write("timeseries.json", append(js, '\n')); err != nil {
		return *written, err
	}
	if err := write("latency.csv", r.histogramCSV()); err != nil {
		return *written, err
	}
	if format == "" {
		return *written, nil
	}
	plots, err := r.plots()
	if err != nil {
		return *written, err
	}
	for _, f := range plots {
		b, err := render(f, f.w, f.h, format)
		if err != nil {
			return *written, err
		}
		if err := write(f.name+"."+format, b); err != nil {
			return *written, err
		}
	}
	return *written, nil
}

func ftoa(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

func (r *Report) seriesCSV() []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	head := []string{"t_seconds", "depth", "in_flight", "consumers", "busy", "put", "completed",
		"duplicates", "expired", "empty_gets"}
	for _, op := range OpNames {
		head = append(head, "tx_"+op)
	}
	head = append(head, "latency_p50_s", "latency_p99_s", "latency_max_s")
	w.Write(head)
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	for _, s := range r.Series {
		row := []string{ftoa(s.T), i64(s.Depth), i64(s.InFlight), i64(s.Consumers), i64(s.Busy), i64(s.Put),
			i64(s.Completed), i64(s.Duplicates), i64(s.Expired), i64(s.EmptyGets)}
		for _, n := range s.Ops {
			row = append(row, i64(n))
		}
		row = append(row, ftoa(s.LatencyP50), ftoa(s.LatencyP99), ftoa(s.LatencyMax))
		w.Write(row)
	}
	w.Flush()
	return b.Bytes()
}

func (r *Report) histogramCSV() []byte {
	var b bytes.Buffer
	fmt.Fprintln(&b, "latency_s,count")
	for _, h := range r.Histogram {
		fmt.Fprintf(&b, "%s,%d\n", ftoa(h.Seconds), h.Count)
	}
	return b.Bytes()
}

// fileWriter makes dir and returns a function that writes one file into
// it, and the list of the paths written so far.
func fileWriter(dir string) (write func(name string, b []byte) error, written *[]string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	written = new([]string)
	write = func(name string, b []byte) error {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
		*written = append(*written, p)
		return nil
	}
	return write, written, nil
}
