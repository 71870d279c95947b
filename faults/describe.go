package faults

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// String describes the condition in a line, as the web view shows it:
// "PutMessage, GetMessages on orders-* · every 3rd · 10% · at most 2 times".
func (w When) String() string {
	var parts []string
	what := "every operation"
	if len(w.Operations) > 0 {
		what = strings.Join(w.Operations, ", ")
	}
	switch {
	case strings.HasSuffix(w.Queue, "*") && w.Queue != "*":
		what += " on queues " + w.Queue
	case w.Queue == "*":
		what += " on any queue"
	case w.Queue != "":
		what += " on queue " + w.Queue
	}
	if w.Account != "" {
		what += " of account " + w.Account
	}
	parts = append(parts, what)
	if w.Every > 1 {
		parts = append(parts, "every "+ordinal(w.Every))
	}
	if w.Probability > 0 && w.Probability < 1 {
		parts = append(parts, strconv.FormatFloat(w.Probability*100, 'g', 4, 64)+"%")
	}
	if w.Times > 0 {
		parts = append(parts, fmt.Sprintf("at most %d times", w.Times))
	}
	switch {
	case !w.From.IsZero():
		parts = append(parts, "from "+w.From.UTC().Format(time.RFC3339))
	case w.After > 0:
		parts = append(parts, "after "+w.After.String())
	}
	switch {
	case !w.Until.IsZero():
		parts = append(parts, "until "+w.Until.UTC().Format(time.RFC3339))
	case w.For > 0:
		parts = append(parts, "for "+w.For.String())
	}
	return strings.Join(parts, " · ")
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

// String describes the result in a line: "wait 20ms–80ms, then 503
// ServerBusy (Operations per second is over the account limit.) after
// applying the operation".
func (t Then) String() string {
	var parts []string
	switch {
	case t.MaxDelay > t.Delay:
		parts = append(parts, "wait "+t.Delay.String()+"–"+t.MaxDelay.String())
	case t.Delay > 0:
		parts = append(parts, "wait "+t.Delay.String())
	}
	if e := t.AzureError(); e != nil {
		s := strconv.Itoa(e.StatusCode) + " " + string(e.Code)
		if e.Message != "" {
			s += " (" + e.Message + ")"
		}
		parts = append(parts, s)
	}
	switch t.Network {
	case NetworkClose:
		parts = append(parts, "close the connection")
	case NetworkReset:
		parts = append(parts, "reset the connection")
	case NetworkTruncate:
		parts = append(parts, "cut the answer off half way")
	}
	s := strings.Join(parts, ", then ")
	if t.Applied || t.Network == NetworkTruncate {
		s = "apply the operation, then " + s
	}
	return s
}
