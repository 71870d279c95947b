package ui_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/internal/uitest"
	"github.com/azqlib/azq/ui"
)

// testNow and prefix are the fixture's (internal/uitest).
var testNow = uitest.Now

const prefix = uitest.Prefix

// fixture is uitest's, with the requests the tests make of its page.
type fixture struct{ *uitest.Fixture }

func newFixture(t testing.TB, withAdvance bool, opts ui.Options) *fixture {
	t.Helper()
	return &fixture{uitest.New(t, withAdvance, opts)}
}

type response struct {
	status int
	header http.Header
	body   string
}

func (f *fixture) do(t testing.TB, method, path string, form url.Values, hdr map[string]string) response {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, f.Server.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(b)}
}

// row returns the HTML of the table row with the attribute.
func row(t testing.TB, page, attr string) string {
	t.Helper()
	i := strings.Index(page, "<tr "+attr)
	if i < 0 {
		t.Fatalf("no row %s in\n%s", attr, page)
	}
	j := strings.Index(page[i:], "</tr>")
	return page[i : i+j]
}

func cell(t testing.TB, row, class string) string {
	t.Helper()
	m := regexp.MustCompile(`<td class="[^"]*\b` + class + `\b[^"]*"[^>]*>([^<]*)<`).FindStringSubmatch(row)
	if m == nil {
		t.Fatalf("no %s cell in %s", class, row)
	}
	return m[1]
}

func TestIndex(t *testing.T) {
	f := newFixture(t, true, ui.Options{})
	r := f.do(t, "GET", prefix+"/", nil, nil)
	if r.status != 200 || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("%d %v", r.status, r.header)
	}
	for _, c := range []struct {
		queue                             string
		count, visible, invisible, oldest string
	}{
		// orders: one leased, one delayed; the oldest put 3 minutes ago.
		{"orders", "3", "1", "2", "3m00s old"},
		{"invoices", "1", "1", "0", "2h03m old"},
		{"empty", "0", "0", "0", ""},
		{"audit", "1", "1", "0", "0s old"},
	} {
		tr := row(t, r.body, `data-queue="`+c.queue+`"`)
		if cell(t, tr, "count") != c.count || cell(t, tr, "visible") != c.visible || cell(t, tr, "invisible") != c.invisible {
			t.Errorf("%s: %s", c.queue, tr)
		}
		if c.oldest != "" && cell(t, tr, "oldest") != c.oldest {
			t.Errorf("%s oldest: %s", c.queue, tr)
		}
		if strings.Contains(tr, "/clear") != (c.count != "0") {
			t.Errorf("%s: a clear button only for a queue with messages: %s", c.queue, tr)
		}
	}
	for _, want := range []string{
		"<h2>Account devstoreaccount1</h2>", "<h2>Account teststore2</h2>",
		`<time datetime="2031-05-17T14:03:00Z">2031-05-17 14:03:00Z</time>`,
		`href="/_azq/ui/a/devstoreaccount1/orders"`, `href="/_azq/ui/a/teststore2/audit"`,
		`<button name="by" value="168h">`, `data-refresh="2"`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("index lacks %q", want)
		}
	}
}

func TestQueuePage(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, true, ui.Options{})
	r := f.do(t, "GET", prefix+"/a/devstoreaccount1/orders", nil, nil)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if strings.Contains(r.body, "<script>alert") || !strings.Contains(r.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatal("message content is not escaped")
	}
	if n := strings.Count(r.body, "<tr data-id="); n != 3 {
		t.Fatalf("%d message rows, want 3", n)
	}
	leased := row(t, r.body, `data-id="`+f.Leased.ID.String()+`"`)
	if cell(t, leased, "dequeues") != "1" || cell(t, leased, "next") != "in 30s" || !strings.Contains(leased, `title="2031-05-17 14:03:30Z"`) {
		t.Errorf("leased message: %s", leased)
	}
	if !strings.Contains(r.body, `<span class="count">3</span> messages: 1 visible, 2 invisible; the oldest is 3m00s old.`) {
		t.Error("no summary")
	}
	// In insertion order, oldest first.
	if a, b := strings.Index(r.body, "order&#34;:42"), strings.Index(r.body, "order&#34;:44"); a < 0 || b < a {
		t.Errorf("messages out of order (%d, %d)", a, b)
	}

	// Looking changed nothing: the lease's receipt still deletes.
	q, _ := f.Main.Queue("orders")
	if err := q.Delete(ctx, f.Leased.ID, f.Leased.PopReceipt); err != nil {
		t.Fatalf("receipt after viewing: %v", err)
	}

	r = f.do(t, "GET", prefix+"/a/teststore2/audit", nil, nil)
	if !strings.Contains(row(t, r.body, "data-id"), "never") {
		t.Error("a message that never expires")
	}
	for _, p := range []string{"/a/devstoreaccount1/nosuch", "/a/nosuch/orders", "/nosuch", "/a/devstoreaccount1"} {
		if r := f.do(t, "GET", prefix+p, nil, nil); r.status != 404 {
			t.Errorf("GET %s: %d", p, r.status)
		}
	}
	if r := f.do(t, "GET", prefix, nil, nil); r.status != http.StatusFound || r.header.Get("Location") != prefix+"/" {
		t.Errorf("GET %s: %d %v", prefix, r.status, r.header)
	}
}

func TestLongContentIsCut(t *testing.T) {
	f := newFixture(t, false, ui.Options{MaxMessages: 1})
	q, _ := f.Main.Queue("empty")
	long := strings.Repeat("é", 100) // 200 bytes
	q.Put(context.Background(), long, nil)
	q.Put(context.Background(), "second", nil)
	r := f.do(t, "GET", prefix+"/a/devstoreaccount1/empty", nil, nil)
	tr := row(t, r.body, "data-id")
	if !strings.Contains(tr, `title="`+long+`"`) || !strings.Contains(tr, ">"+strings.Repeat("é", 60)+"…<") {
		t.Fatalf("long content: %s", tr)
	}
	if !strings.Contains(r.body, "The oldest 1 of 2 messages.") || strings.Contains(r.body, "second") {
		t.Fatal("MaxMessages not applied")
	}
}

func TestClear(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false, ui.Options{})
	count := func() int {
		q, _ := f.Main.Queue("orders")
		n, _ := q.ApproximateCount(ctx)
		return n
	}
	back := url.Values{"back": {"/a/devstoreaccount1/orders"}}
	for _, h := range []map[string]string{
		{"Origin": "https://elsewhere.example"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site", "Origin": f.Server.URL},
	} {
		if r := f.do(t, "POST", prefix+"/a/devstoreaccount1/orders/clear", back, h); r.status != 403 || count() != 3 {
			t.Fatalf("cross-origin clear %v: %d, %d messages left", h, r.status, count())
		}
	}
	if r := f.do(t, "GET", prefix+"/a/devstoreaccount1/orders/clear", nil, nil); r.status != 404 || count() != 3 {
		t.Fatalf("GET clear: %d", r.status)
	}
	r := f.do(t, "POST", prefix+"/a/devstoreaccount1/orders/clear", back, map[string]string{"Origin": f.Server.URL, "Sec-Fetch-Site": "same-origin"})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != prefix+"/a/devstoreaccount1/orders" || count() != 0 {
		t.Fatalf("clear: %d %v, %d messages left", r.status, r.header, count())
	}
	// A back field that leaves the UI goes to the index instead.
	for _, b := range []string{"//evil.example/", "https://evil.example/", "/x?y", ""} {
		r := f.do(t, "POST", prefix+"/a/devstoreaccount1/orders/clear", url.Values{"back": {b}}, nil)
		if r.header.Get("Location") != prefix+"/" {
			t.Errorf("back %q: redirected to %q", b, r.header.Get("Location"))
		}
	}
	if r := f.do(t, "POST", prefix+"/a/devstoreaccount1/nosuch/clear", nil, nil); r.status != 404 {
		t.Fatalf("clear of a missing queue: %d", r.status)
	}
}

func TestAdvance(t *testing.T) {
	f := newFixture(t, true, ui.Options{})
	start := f.Clock.Now()
	r := f.do(t, "POST", prefix+"/clock/advance", url.Values{"by": {"1h30m"}, "back": {"/"}}, nil)
	if r.status != http.StatusSeeOther || !f.Clock.Now().Equal(start.Add(90*time.Minute)) {
		t.Fatalf("advance: %d, clock %v", r.status, f.Clock.Now())
	}
	for _, by := range []string{"", "soon", "-1h", "0s", "3600"} {
		r := f.do(t, "POST", prefix+"/clock/advance", url.Values{"by": {by}, "back": {"/a/devstoreaccount1/orders"}}, nil)
		if r.status != 400 || !strings.Contains(r.body, `role="alert"`) {
			t.Errorf("advance by %q: %d", by, r.status)
		}
		// The error page's forms still return to the page the
		// request came from.
		if !strings.Contains(r.body, `name="back" value="/a/devstoreaccount1/orders"`) {
			t.Errorf("advance by %q: the error page forgot where it came from", by)
		}
	}
	if len(f.Advanced) != 1 {
		t.Fatalf("advanced %v, want one move", f.Advanced)
	}

	g := newFixture(t, false, ui.Options{})
	r = g.do(t, "GET", prefix+"/", nil, nil)
	if strings.Contains(r.body, "/clock/advance") || !strings.Contains(r.body, "(real time)") {
		t.Fatal("advance offered without a way to move the clock")
	}
	if r := g.do(t, "POST", prefix+"/clock/advance", url.Values{"by": {"1h"}}, nil); r.status != 404 || !g.Clock.Now().Equal(testNow.Add(2*time.Hour+3*time.Minute)) {
		t.Fatalf("advance without Advance: %d", r.status)
	}
}

func TestRefresh(t *testing.T) {
	for _, c := range []struct {
		opt   time.Duration
		query string
		want  string
	}{
		{0, "", `data-refresh="2"`},
		{5 * time.Second, "", `data-refresh="5"`},
		{-1, "", `data-refresh="0"`},
		{0, "?refresh=0", `data-refresh="0"`},
		{-1, "?refresh=3", `data-refresh="3"`},
		{0, "?refresh=x", `data-refresh="2"`},
	} {
		f := newFixture(t, false, ui.Options{Refresh: c.opt})
		if r := f.do(t, "GET", prefix+"/"+c.query, nil, nil); !strings.Contains(r.body, c.want) {
			t.Errorf("Refresh %v, query %q: want %s", c.opt, c.query, c.want)
		}
	}
}

// TestContentSecurityPolicy: the page's inline script and style are
// allowed by hash, and nothing else is; a wrong hash would silently stop
// the page from refreshing itself.
func TestContentSecurityPolicy(t *testing.T) {
	f := newFixture(t, false, ui.Options{})
	r := f.do(t, "GET", prefix+"/", nil, nil)
	csp := r.header.Get("Content-Security-Policy")
	for _, tag := range []string{"script", "style"} {
		m := regexp.MustCompile(`(?s)<`+tag+`>(.*?)</`+tag+`>`).FindAllStringSubmatch(r.body, -1)
		if len(m) != 1 {
			t.Fatalf("%d %s elements", len(m), tag)
		}
		sum := sha256.Sum256([]byte(m[0][1]))
		want := tag + "-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "form-action 'self'") {
		t.Errorf("CSP %q", csp)
	}
}

func TestAges(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false, ui.Options{})
	q, _ := f.Main.Queue("empty")
	q.Put(ctx, "x", nil)
	for _, c := range []struct {
		by   time.Duration
		want string
	}{
		{59 * time.Second, "59s old"},
		{time.Second, "1m00s old"},
		{59*time.Minute + 5*time.Second, "1h00m old"},
		{22*time.Hour + 59*time.Minute, "23h59m old"},
		{time.Minute, "1d00h old"},
		{5*24*time.Hour + 7*time.Hour, "6d07h old"},
	} {
		f.Clock.Add(c.by)
		r := f.do(t, "GET", prefix+"/", nil, nil)
		if got := cell(t, row(t, r.body, `data-queue="empty"`), "oldest"); got != c.want {
			t.Errorf("age %q, want %q", got, c.want)
		}
	}
}

// contractOnly is a back end that offers the service contract and
// nothing more: its QueueRefs cannot Inspect.
type contractOnly struct{ azq.QueueService }

func (c contractOnly) Ref(name string) (azq.QueueRef, error) {
	r, err := c.QueueService.Ref(name)
	if err != nil {
		return nil, err
	}
	return struct{ azq.QueueRef }{r}, nil
}

// An account on a back end that cannot Inspect shows what the contract
// gives: the approximate count, the visible messages Peek returns, and a
// note saying that the rest is not shown.
func TestBackEndWithoutInspect(t *testing.T) {
	f := newFixture(t, false, ui.Options{})
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", ui.New(ui.Options{Clock: f.Clock, Prefix: prefix,
		Accounts: []ui.Account{{Name: "devstoreaccount1", Service: contractOnly{f.Main}}}}))
	g := *f
	g.Server = httptest.NewServer(mux)
	t.Cleanup(g.Server.Close)

	r := g.do(t, "GET", prefix+"/", nil, nil)
	tr := row(t, r.body, `data-queue="orders"`)
	if r.status != 200 || cell(t, tr, "count") != "3" || !strings.Contains(tr, "not shown by this back end") {
		t.Fatalf("%d, orders row: %s", r.status, tr)
	}
	if !strings.Contains(r.body, `class="muted partial-note"`) {
		t.Error("the index does not say that the back end shows the count only")
	}

	r = g.do(t, "GET", prefix+"/a/devstoreaccount1/orders", nil, nil)
	// Of the three messages, one is leased and one delayed: Peek shows
	// the third.
	if r.status != 200 || strings.Count(r.body, "<tr data-id=") != 1 || !strings.Contains(r.body, "order&#34;:43") {
		t.Fatalf("%d, queue page:\n%s", r.status, r.body)
	}
	for _, want := range []string{`About <span class="count">3</span> messages.`, "shows only its visible messages", "1 visible messages shown."} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the queue page lacks %q", want)
		}
	}
	if strings.Contains(r.body, "0001-01-01") {
		t.Error("a peeked message shows a next-visible time of year 1")
	}
	if r := g.do(t, "GET", prefix+"/a/devstoreaccount1/nosuch", nil, nil); r.status != 404 || !strings.Contains(r.body, "has no queue named nosuch") {
		t.Errorf("a missing queue: %d", r.status)
	}
	if r := g.do(t, "POST", prefix+"/a/devstoreaccount1/nosuch/clear", nil, nil); r.status != 404 {
		t.Errorf("clear of a missing queue: %d", r.status)
	}
	back := url.Values{"back": {"/a/devstoreaccount1/orders"}}
	if r := g.do(t, "POST", prefix+"/a/devstoreaccount1/orders/clear", back, nil); r.status != http.StatusSeeOther {
		t.Fatalf("clear: %d %s", r.status, r.body)
	}
	if n, _ := f.Main.Named("orders").ApproximateCount(context.Background()); n != 0 {
		t.Fatalf("%d messages left after clear", n)
	}
}
