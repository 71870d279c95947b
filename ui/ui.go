package ui

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/internal/guard"
	"github.com/benbjohnson/clock"
)

// Options configure the UI.
type Options struct {
	// Accounts are shown in this order.
	Accounts []Account
	// Clock is the time the page shows and measures ages against; nil
	// means the real clock. Give the clock the Services use.
	Clock clock.Clock
	// Advance, when set, moves the clock forward by d; the page then
	// offers buttons and a field to do so. It returns the new time.
	Advance func(d time.Duration) (time.Time, error)
	// Prefix is the path the handler is mounted at, such as "/_azq/ui";
	// every link and form starts with it. The handler expects requests
	// with their full path.
	Prefix string
	// Refresh is how often the page reloads itself: zero means every 2
	// seconds, a negative value never. A request can override it with
	// ?refresh=<seconds> (0 stops it).
	Refresh time.Duration
	// MaxMessages is how many of a queue's oldest messages its page
	// lists; zero means 100.
	MaxMessages int
	// Hosts are the host names, besides IP addresses and localhost (and
	// names under .localhost), that the page answers to; a request naming
	// any other Host is refused, so that a page under its own name that
	// resolves to this machine (DNS rebinding) cannot read the queues.
	Hosts []string
	// Faults, if set, is the fault injector of the server the page shows;
	// the page lists its rules with their hits, and its throttle.
	Faults *faults.Injector
}

// Account is one storage account the page shows.
type Account struct {
	Name string
	// Service holds the account's queues: any back end of azq's service
	// contract. The page reads them through the contract (ListQueues,
	// Properties, Peek, Clear); a queue whose QueueRef can also Inspect
	// itself, as an *azq.Service's can (azq.NamedQueue.Inspect), is shown
	// whole, invisible messages included. Of another back end's queues
	// the page shows the approximate message count and the visible
	// messages Peek gives (at most 32), and says so.
	Service azq.QueueService
}

// inspector is a QueueRef that shows its whole queue, invisible messages
// included, without changing anything: the in-memory back end's extra.
type inspector interface {
	Inspect(ctx context.Context, max int) (azq.Snapshot, error)
}

// maxPeek is the most messages one Peek returns.
const maxPeek = 32

// maxQueues bounds the queues listed per account, so that a test that
// creates thousands of queues still gets a page.
const maxQueues = 1000

// handler is the UI. It holds nothing but its options, so requests share
// it without locking.
type handler struct {
	opts  Options
	mux   *http.ServeMux
	hosts *guard.Hosts
}

// New returns the UI's handler.
func New(opts Options) http.Handler {
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	if opts.Refresh == 0 {
		opts.Refresh = 2 * time.Second
	}
	if opts.MaxMessages <= 0 {
		opts.MaxMessages = 100
	}
	opts.Prefix = strings.TrimSuffix(opts.Prefix, "/")
	h := &handler{opts: opts, mux: http.NewServeMux(), hosts: guard.NewHosts(opts.Hosts...)}
	h.mux.HandleFunc("GET /{$}", h.index)
	h.mux.HandleFunc("GET /a/{account}/{queue}", h.queue)
	h.mux.HandleFunc("POST /a/{account}/{queue}/clear", h.clear)
	h.mux.HandleFunc("POST /clock/advance", h.advance)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.render(w, r, http.StatusNotFound, &page{Error: "There is no such page."})
	})
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, h.opts.Prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if rest == "" {
		http.Redirect(w, r, h.opts.Prefix+"/", http.StatusFound)
		return
	}
	if refusal := h.hosts.Check(r); refusal != nil {
		http.Error(w, refusal.Reason, refusal.Status)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = rest
	r2.URL.RawPath = ""
	h.mux.ServeHTTP(w, r2)
}

// page is what the template renders.
type page struct {
	Prefix   string
	Now      time.Time
	Advance  bool // the clock can be moved
	Refresh  int  // seconds; 0: no reloading
	Back     string
	Accounts []accountView
	Queue    *queueView
	Error    string
	Faults   *faultsView
}

// faultsView is the fault rules and throttle the page lists.
type faultsView struct {
	Rules     []faultRow
	Throttle  string
	Throttled int64
}

type faultRow struct {
	Name, When, Then string
	Hits, Matches    int64
	Exhausted        bool
}

type accountView struct {
	Name    string
	Queues  []queueRow
	More    bool // more queues than listed
	Partial bool // some rows have the count only
}

type queueRow struct {
	Name      string
	Count     int
	Visible   int
	Invisible int
	Oldest    string // age of the oldest message; "" when empty
	Gone      bool   // deleted while the page was built
	Err       string // why the figures are missing, if not Gone
	// Partial is set when the back end gave the approximate count only
	// (it cannot Inspect), without Visible, Invisible and Oldest.
	Partial bool
}

type queueView struct {
	Account  string
	Row      queueRow
	Messages []messageRow
	Shown    int
}

type messageRow struct {
	ID           string
	Content      string // cut short for the table
	Full         string
	Inserted     string
	InsertedAt   string
	Visible      bool
	NextVisible  string
	NextAt       string
	Expires      string
	ExpiresAt    string
	DequeueCount int64
}

func (h *handler) newPage(r *http.Request) *page {
	p := &page{Prefix: h.opts.Prefix, Now: h.opts.Clock.Now().UTC(), Advance: h.opts.Advance != nil, Back: r.URL.Path}
	if r.Method == http.MethodPost {
		p.Back = backPath(r)
	}
	if h.opts.Refresh > 0 {
		p.Refresh = max(1, int(h.opts.Refresh/time.Second))
	}
	p.Faults = h.faults()
	if v := r.URL.Query().Get("refresh"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			p.Refresh = n
		}
	}
	return p
}

// faults lists the injector's rules and throttle, or nil when there is
// no injector or it has neither.
func (h *handler) faults() *faultsView {
	if h.opts.Faults == nil {
		return nil
	}
	st := h.opts.Faults.Status()
	if len(st.Rules) == 0 && st.Throttle == nil {
		return nil
	}
	v := &faultsView{Throttled: st.Throttled}
	for _, r := range st.Rules {
		v.Rules = append(v.Rules, faultRow{Name: r.Name, When: r.When.String(), Then: r.Then.String(),
			Hits: r.Hits, Matches: r.Matches, Exhausted: r.Exhausted})
	}
	if t := st.Throttle; t != nil {
		var parts []string
		if t.QueueMessagesPerSecond > 0 {
			parts = append(parts, strconv.FormatFloat(t.QueueMessagesPerSecond, 'g', -1, 64)+" messages/s per queue")
		}
		if t.AccountRequestsPerSecond > 0 {
			parts = append(parts, strconv.FormatFloat(t.AccountRequestsPerSecond, 'g', -1, 64)+" requests/s per account")
		}
		v.Throttle = strings.Join(parts, ", ")
	}
	return v
}

func (h *handler) index(w http.ResponseWriter, r *http.Request) {
	p := h.newPage(r)
	for _, a := range h.opts.Accounts {
		av, err := accountRows(r.Context(), a)
		if err != nil {
			p.Error = err.Error()
		}
		p.Accounts = append(p.Accounts, av)
	}
	h.render(w, r, http.StatusOK, p)
}

// accountRows lists an account's queues with their figures.
func accountRows(ctx context.Context, a Account) (accountView, error) {
	av := accountView{Name: a.Name}
	opts := azq.ListQueuesOptions{}
	for {
		pg, err := a.Service.ListQueues(ctx, opts)
		if err != nil {
			return av, err
		}
		for _, it := range pg.Queues {
			if len(av.Queues) == maxQueues {
				av.More = true
				return av, nil
			}
			row := queueFigures(ctx, a.Service, it.Name)
			av.Partial = av.Partial || row.Partial
			av.Queues = append(av.Queues, row)
		}
		if pg.NextMarker == "" {
			return av, nil
		}
		opts.Marker = pg.NextMarker
	}
}

// queueFigures returns the row of the queue name of svc: from Inspect
// when its QueueRef has it, else the count Properties gives.
func queueFigures(ctx context.Context, svc azq.QueueService, name string) queueRow {
	ref, err := svc.Ref(name)
	if err != nil {
		return failedRow(name, err)
	}
	if in, ok := ref.(inspector); ok {
		snap, err := in.Inspect(ctx, 0)
		return figures(name, snap, err)
	}
	p, err := ref.Properties(ctx)
	if err != nil {
		return failedRow(name, err)
	}
	return queueRow{Name: name, Count: p.ApproximateMessagesCount, Partial: true}
}

// failedRow is the row of a queue whose figures could not be read.
func failedRow(name string, err error) queueRow {
	if errors.Is(err, azq.ErrQueueNotFound) {
		return queueRow{Name: name, Gone: true}
	}
	return queueRow{Name: name, Err: err.Error()}
}

func figures(name string, s azq.Snapshot, err error) queueRow {
	if err != nil {
		return failedRow(name, err)
	}
	row := queueRow{Name: name, Count: s.Count, Visible: s.Count - s.Invisible, Invisible: s.Invisible}
	if s.Count > 0 {
		row.Oldest = age(s.Time.Sub(s.Oldest))
	}
	return row
}

// lookup returns the queue a request names, which need not exist; the
// string says why there is none.
func (h *handler) lookup(r *http.Request) (Account, azq.QueueRef, string) {
	name, queue := r.PathValue("account"), r.PathValue("queue")
	for _, a := range h.opts.Accounts {
		if a.Name != name {
			continue
		}
		q, err := a.Service.Ref(queue)
		if err != nil {
			return a, nil, noQueue(name, queue)
		}
		return a, q, ""
	}
	return Account{}, nil, "There is no account named " + name + "."
}

func noQueue(account, queue string) string {
	return "The account " + account + " has no queue named " + queue + "."
}

func (h *handler) queue(w http.ResponseWriter, r *http.Request) {
	p := h.newPage(r)
	a, q, missing := h.lookup(r)
	var qv *queueView
	if q != nil {
		qv = h.queueView(r.Context(), a, q)
		if qv.Row.Gone {
			missing = noQueue(a.Name, q.Name())
		}
	}
	if q == nil || qv.Row.Gone {
		p.Error = missing
		h.render(w, r, http.StatusNotFound, p)
		return
	}
	p.Queue = qv
	h.render(w, r, http.StatusOK, p)
}

// queueView shows the queue q: all of it through Inspect when q has it,
// else its approximate count and the visible messages Peek gives.
func (h *handler) queueView(ctx context.Context, a Account, q azq.QueueRef) *queueView {
	qv := &queueView{Account: a.Name}
	if in, ok := q.(inspector); ok {
		snap, err := in.Inspect(ctx, h.opts.MaxMessages)
		qv.Row, qv.Shown = figures(q.Name(), snap, err), len(snap.Messages)
		for _, m := range snap.Messages {
			qv.Messages = append(qv.Messages, messageView(m, snap.Time))
		}
		return qv
	}
	props, err := q.Properties(ctx)
	if err != nil {
		qv.Row = failedRow(q.Name(), err)
		return qv
	}
	qv.Row = queueRow{Name: q.Name(), Count: props.ApproximateMessagesCount, Partial: true}
	now := a.Service.Clock().Now()
	ms, err := q.Peek(ctx, min(h.opts.MaxMessages, maxPeek))
	if err != nil {
		qv.Row.Err = err.Error()
	}
	qv.Shown = len(ms)
	for _, m := range ms {
		qv.Messages = append(qv.Messages, messageView(m, now))
	}
	return qv
}

// maxShownContent is how much of a message the table shows; the rest is in
// the cell's tooltip.
const maxShownContent = 120

func messageView(m azq.Message, now time.Time) messageRow {
	row := messageRow{
		ID:           m.ID.String(),
		Full:         m.Content,
		Content:      m.Content,
		Inserted:     age(now.Sub(m.InsertionTime)) + " ago",
		InsertedAt:   stamp(m.InsertionTime),
		Visible:      !m.NextVisibleTime.After(now),
		NextVisible:  "visible",
		NextAt:       stamp(m.NextVisibleTime),
		Expires:      "in " + age(m.ExpirationTime.Sub(now)),
		ExpiresAt:    stamp(m.ExpirationTime),
		DequeueCount: m.DequeueCount,
	}
	if len(row.Content) > maxShownContent {
		cut := maxShownContent
		for cut > 0 && !isRuneStart(row.Content[cut]) {
			cut--
		}
		row.Content = row.Content[:cut] + "…"
	}
	if !row.Visible {
		row.NextVisible = "in " + age(m.NextVisibleTime.Sub(now))
	}
	if m.NextVisibleTime.IsZero() {
		row.NextAt = "" // a peeked message: visible, at no time given
	}
	if m.ExpirationTime.Year() == 9999 {
		row.Expires = "never"
	}
	return row
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func (h *handler) clear(w http.ResponseWriter, r *http.Request) {
	a, q, missing := h.lookup(r)
	if q == nil {
		p := h.newPage(r)
		p.Error = missing
		h.render(w, r, http.StatusNotFound, p)
		return
	}
	if err := q.Clear(r.Context()); err != nil {
		p := h.newPage(r)
		status := http.StatusConflict
		p.Error = err.Error()
		if errors.Is(err, azq.ErrQueueNotFound) {
			status, p.Error = http.StatusNotFound, noQueue(a.Name, q.Name())
		}
		h.render(w, r, status, p)
		return
	}
	h.back(w, r)
}

func (h *handler) advance(w http.ResponseWriter, r *http.Request) {
	p := h.newPage(r)
	if h.opts.Advance == nil {
		p.Error = "The clock cannot be moved: it follows real time. Start azqd with -clock-control to move it."
		h.render(w, r, http.StatusNotFound, p)
		return
	}
	by := r.PostFormValue("by")
	d, err := time.ParseDuration(by)
	if err == nil && d <= 0 {
		err = errors.New("the clock only moves forward")
	}
	if err == nil {
		_, err = h.opts.Advance(d)
	}
	if err != nil {
		p.Error = fmt.Sprintf("Cannot advance the clock by %q: %v. Give a Go duration such as 90s, 1h30m or 168h.", by, err)
		h.render(w, r, http.StatusBadRequest, p)
		return
	}
	h.back(w, r)
}

// back redirects to the page a form came from.
func (h *handler) back(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, h.opts.Prefix+backPath(r), http.StatusSeeOther)
}

// backPath is a form's "back" field, the path below the prefix of the page
// the form is on, or the index's when it is not such a path.
func backPath(r *http.Request) string {
	to := r.PostFormValue("back")
	if !strings.HasPrefix(to, "/") || strings.HasPrefix(to, "//") || strings.ContainsAny(to, "\\?#") {
		return "/"
	}
	return to
}

// age writes a duration the way the page shows ages: two units at most.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// step is one of the page's buttons that move the clock.
type step struct{ By, Label string }

var steps = []step{{"1m", "+1 min"}, {"10m", "+10 min"}, {"1h", "+1 hour"}, {"24h", "+1 day"}, {"168h", "+7 days"}}

//go:embed page.html
var pageHTML string

// script reloads the page every data-refresh seconds, except while an
// input has the focus, so that typing a duration is not cut short.
const script = `(function () {
  var s = Number(document.body.dataset.refresh);
  if (!(s > 0)) return;
  setInterval(function () {
    var a = document.activeElement;
    if (a && a.tagName === "INPUT") return;
    location.reload();
  }, s * 1000);
})();`

const style = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1b1f24; background: #f6f8fa; }
header { background: #0b3d6b; color: #fff; padding: 10px 20px; display: flex; gap: 24px; align-items: center; flex-wrap: wrap; }
header a { color: #fff; }
header a.brand { text-decoration: none; font-weight: 600; font-size: 16px; }
header .muted { color: #b6c8da; }
header form { display: inline; }
main { padding: 12px 20px; }
h2 { font-size: 16px; margin: 18px 0 6px; }
table { border-collapse: collapse; background: #fff; width: 100%; }
section.faults { background: #fff8c5; border: 1px solid #d4a72c; padding: 4px 12px 10px; margin: 8px 0; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eaeef2; font-weight: 600; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
td.content { font-family: ui-monospace, monospace; word-break: break-all; }
.inv { color: #9a6700; }
.vis { color: #1a7f37; }
.error { background: #ffebe9; border: 1px solid #ff8182; padding: 8px; margin: 8px 0; }
.muted { color: #57606a; }
button { font: inherit; }
input[name=by] { width: 6em; }
`

var (
	tmpl = template.Must(template.New("page").Funcs(template.FuncMap{"steps": func() []step { return steps }}).Parse(pageHTML))
	// csp allows the page's own script and style and nothing else: no
	// other scripts, no loads from anywhere, forms only to this origin.
	csp = "default-src 'none'; script-src '" + hash(script) + "'; style-src '" + hash(style) +
		"'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, p *page) {
	if p.Prefix == "" {
		p.Prefix = h.opts.Prefix
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Content-Security-Policy", csp)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	_ = tmpl.Execute(w, struct {
		*page
		Script template.JS
		Style  template.CSS
	}{p, template.JS(script), template.CSS(style)})
}
