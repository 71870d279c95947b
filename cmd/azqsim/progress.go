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
	frac := 0.0
	if pr.Total > 0 {
		frac = float64(pr.Done) / float64(pr.Total)
	}
	const width = 30
	n := int(frac * width)
	bar := strings.Repeat("=", n) + strings.Repeat(" ", width-n)
	line := fmt.Sprintf("[%s] %3.0f%%  %v of %v  %d messages  %s", bar, 100*frac,
		sim.Duration(pr.Done.Round(time.Second)), sim.Duration(pr.Total), pr.Put, p.label)
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

// done ends the bar's line.
func (p *progress) done() {
	if p.shown && p.tty {
		fmt.Fprintln(p.w)
	}
	p.shown = false
}

func newBufWriter(w io.Writer) *bufio.Writer { return bufio.NewWriterSize(w, 1<<16) }
