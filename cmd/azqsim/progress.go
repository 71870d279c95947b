package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/azqlib/azq/sim"
)

// progress draws a progress bar on stderr while a run takes long enough to
// need one: redrawn in place on a terminal, as a line every few seconds
// otherwise.
type progress struct {
	w      io.Writer
	on     bool
	tty    bool
	start  time.Time
	last   time.Time
	label  string
	shown  bool
	prevTx int
	// run and runs place a run in a sweep (1 of runs); runs is 0 for a
	// single run.
	run, runs int
}

func newProgress(w io.Writer, on bool) *progress {
	p := &progress{w: w, on: on, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// update returns the callback for sim.Options.Progress, labelled.
func (p *progress) update(label string) func(sim.Progress) {
	p.label = label
	return p.show
}

func (p *progress) show(pr sim.Progress) {
	if !p.on {
		return
	}
	now := time.Now()
	every := 200 * time.Millisecond
	if !p.tty {
		every = 5 * time.Second
	}
	if now.Sub(p.start) < 500*time.Millisecond || now.Sub(p.last) < every {
		return
	}
	p.last = now
	p.shown = true
	line := p.line(pr)
	if p.tty {
		pad := ""
		if len(line) < p.prevTx {
			pad = strings.Repeat(" ", p.prevTx-len(line))
		}
		fmt.Fprint(p.w, "\r"+line+pad)
		p.prevTx = len(line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

// line is the text of the bar: for a sweep, the bar and the percentage
// are the whole sweep's, then the run's own.
func (p *progress) line(pr sim.Progress) string {
	frac := 0.0
	if pr.Total > 0 {
		frac = float64(pr.Done) / float64(pr.Total)
	}
	overall := frac
	if p.runs > 1 {
		overall = (float64(p.run-1) + frac) / float64(p.runs)
	}
	const width = 30
	n := min(int(overall*width), width)
	bar := strings.Repeat("=", n) + strings.Repeat(" ", width-n)
	line := fmt.Sprintf("[%s] %3.0f%%  ", bar, 100*overall)
	if p.runs > 1 {
		line += fmt.Sprintf("run %d of %d, %3.0f%%: ", p.run, p.runs, 100*frac)
	}
	line += fmt.Sprintf("%v of %v  %d messages", sim.Duration(pr.Done.Round(time.Second)), sim.Duration(pr.Total), pr.Put)
	if p.label != "" {
		line += "  " + p.label
	}
	return line
}

// done ends the bar's line.
func (p *progress) done() {
	if p.shown && p.tty {
		fmt.Fprintln(p.w)
	}
	p.shown = false
}

func newBufWriter(w io.Writer) *bufio.Writer { return bufio.NewWriterSize(w, 1<<16) }
