package faults

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/azqlib/azq/internal/editdist"
)

// Config is a rules file: the seed of the rules' random choices, the
// rules in the order they are tried, and the throttling limits.
//
//	{
//	  "seed": 7,
//	  "rules": [
//	    {"name": "busy-puts",
//	     "when": {"operations": ["PutMessage"], "queue": "orders-*", "every": 3, "times": 2},
//	     "then": {"error": "ServerBusy", "reason": "operations"}},
//	    {"name": "lost-delete",
//	     "when": {"operations": ["DeleteMessage"], "probability": 0.1},
//	     "then": {"applied": true, "network": "reset"}},
//	    {"then": {"delay": "20ms", "max_delay": "80ms"}}
//	  ],
//	  "throttle": {"queue_messages_per_second": 2000, "account_requests_per_second": 20000}
//	}
type Config struct {
	Seed     uint64
	Rules    []Rule
	Throttle *Throttle
}

// The JSON forms of Config, Rule, When, Then and Throttle. Durations are
// Go duration strings ("250ms") and times RFC 3339 ("2030-01-01T00:00:00Z").
type (
	configJSON struct {
		Seed     uint64            `json:"seed,omitempty"`
		Rules    []json.RawMessage `json:"rules"`
		Throttle json.RawMessage   `json:"throttle,omitempty"`
	}
	ruleJSON struct {
		Name string   `json:"name,omitempty"`
		When whenJSON `json:"when"`
		Then thenJSON `json:"then"`
	}
	whenJSON struct {
		Operations  []string `json:"operations,omitempty"`
		Queue       string   `json:"queue,omitempty"`
		Account     string   `json:"account,omitempty"`
		Every       int      `json:"every,omitempty"`
		Probability float64  `json:"probability,omitempty"`
		Times       int      `json:"times,omitempty"`
		From        string   `json:"from,omitempty"`
		Until       string   `json:"until,omitempty"`
		After       string   `json:"after,omitempty"`
		For         string   `json:"for,omitempty"`
	}
	thenJSON struct {
		Error    string `json:"error,omitempty"`
		Status   int    `json:"status,omitempty"`
		Message  string `json:"message,omitempty"`
		Reason   string `json:"reason,omitempty"`
		Network  string `json:"network,omitempty"`
		Delay    string `json:"delay,omitempty"`
		MaxDelay string `json:"max_delay,omitempty"`
		Applied  bool   `json:"applied,omitempty"`
	}
	// throttleJSON has Throttle's fields, so that each converts to the other.
	throttleJSON struct {
		QueueMessagesPerSecond   float64 `json:"queue_messages_per_second,omitempty"`
		AccountRequestsPerSecond float64 `json:"account_requests_per_second,omitempty"`
	}
)

// maxConfig bounds a rules file or body: rules are a few hundred bytes.
const maxConfig = 1 << 20

// Load reads and checks a rules file: a regular file of at most 1 MiB.
// Its errors name the file and the field (a *FieldError), or say that the
// file is something else (a directory, a named pipe, a device such as
// /dev/zero) or longer, before reading it; or they are the error of
// opening or reading it.
func Load(file string) (Config, error) {
	data, err := readRules(file)
	if err != nil {
		return Config{}, err
	}
	c, err := Parse(data)
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			f := *fe
			f.File = file
			return Config{}, &f
		}
		return Config{}, fmt.Errorf("%s: %w", file, err)
	}
	return c, nil
}

// readRules reads file, refusing what is not a regular file of at most
// maxConfig bytes before reading it: a named pipe or a device may never
// end, and a long file is not rules.
func readRules(file string) ([]byte, error) {
	// Stat first, so that a named pipe is refused without opening it
	// (opening one for reading waits for a writer); then check what was
	// opened, without blocking, in case the file changed in between.
	info, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	if err := checkRulesFile(file, info); err != nil {
		return nil, err
	}
	return openRules(file)
}

// openRules reads file as readRules does, checking what it opened.
func openRules(file string) ([]byte, error) {
	f, err := os.OpenFile(file, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkRulesFile(file, info); err != nil {
		return nil, err
	}
	// The file may grow while it is read: read one byte past the limit
	// at most.
	data, err := io.ReadAll(io.LimitReader(f, maxConfig+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfig {
		return nil, tooLong(file)
	}
	return data, nil
}

// checkRulesFile refuses a file that is not a regular file of at most
// maxConfig bytes.
func checkRulesFile(file string, info os.FileInfo) error {
	if mode := info.Mode(); !mode.IsRegular() {
		what := "not a regular file"
		switch {
		case mode.IsDir():
			what = "a directory, not a file"
		case mode&os.ModeNamedPipe != 0:
			what = "a named pipe, not a regular file"
		case mode&os.ModeDevice != 0:
			what = "a device, not a regular file"
		case mode&os.ModeSocket != 0:
			what = "a socket, not a regular file"
		}
		return &FieldError{File: file, Err: errors.New(what + ": the rules are read from a JSON file")}
	}
	if info.Size() > maxConfig {
		return tooLong(file)
	}
	return nil
}

func tooLong(file string) error {
	return &FieldError{File: file, Err: fmt.Errorf("longer than %d bytes (1 MiB), the most a rules file holds", maxConfig)}
}

// Parse reads and checks a rules file's contents: JSON with the fields
// Config's example shows, spelled exactly (case and all), nothing else. Its errors are *FieldErrors that
// name the field, as "rules[2].when.probability".
func Parse(data []byte) (Config, error) {
	var cj configJSON
	if err := decodeStrict(data, &cj); err != nil {
		return Config{}, jsonError("", data, err)
	}
	c := Config{Seed: cj.Seed}
	for i, raw := range cj.Rules {
		r, err := ParseRule(raw)
		if err != nil {
			return Config{}, within(fmt.Sprintf("rules[%d]", i), err)
		}
		c.Rules = append(c.Rules, r)
	}
	if len(cj.Throttle) > 0 && string(cj.Throttle) != "null" {
		var tj throttleJSON
		if err := decodeStrict(cj.Throttle, &tj); err != nil {
			return Config{}, jsonError("throttle", cj.Throttle, err)
		}
		t := Throttle(tj)
		if err := t.Validate(); err != nil {
			return Config{}, within("throttle", err)
		}
		c.Throttle = &t
	}
	if err := checkNames(c.Rules); err != nil {
		return Config{}, err
	}
	return c, nil
}

// checkNames refuses two rules of one name.
func checkNames(rules []Rule) error {
	seen := map[string]int{}
	for i, r := range rules {
		if r.Name == "" {
			continue
		}
		if j, ok := seen[r.Name]; ok {
			return fieldErr(fmt.Sprintf("rules[%d].name", i), "%q is the name of rules[%d] too", r.Name, j)
		}
		seen[r.Name] = i
	}
	return nil
}

// ParseRule reads and checks one rule in its JSON form, as the admin
// endpoint receives it. Its errors are *FieldErrors relative to the rule
// ("when.probability").
func ParseRule(data []byte) (Rule, error) {
	var rj ruleJSON
	if err := decodeStrict(data, &rj); err != nil {
		return Rule{}, jsonError("", data, err)
	}
	r := Rule{Name: rj.Name}
	w, t := rj.When, rj.Then
	r.When = When{Operations: w.Operations, Queue: w.Queue, Account: w.Account, Every: w.Every, Probability: w.Probability, Times: w.Times}
	var err error
	if r.When.From, err = parseTime("when.from", w.From); err != nil {
		return Rule{}, err
	}
	if r.When.Until, err = parseTime("when.until", w.Until); err != nil {
		return Rule{}, err
	}
	if r.When.After, err = parseDuration("when.after", w.After); err != nil {
		return Rule{}, err
	}
	if r.When.For, err = parseDuration("when.for", w.For); err != nil {
		return Rule{}, err
	}
	r.Then = Then{Error: t.Error, Status: t.Status, Message: t.Message, Reason: Reason(t.Reason), Network: Network(t.Network), Applied: t.Applied}
	if r.Then.Delay, err = parseDuration("then.delay", t.Delay); err != nil {
		return Rule{}, err
	}
	if r.Then.MaxDelay, err = parseDuration("then.max_delay", t.MaxDelay); err != nil {
		return Rule{}, err
	}
	if err := r.Validate(); err != nil {
		return Rule{}, err
	}
	return r, nil
}

// MarshalJSON writes r in the form ParseRule reads.
func (r Rule) MarshalJSON() ([]byte, error) { return json.Marshal(r.toJSON()) }

// toJSON is r in the form ParseRule reads.
func (r *Rule) toJSON() ruleJSON {
	rj := ruleJSON{Name: r.Name}
	w, t := r.When, r.Then
	rj.When = whenJSON{Operations: w.Operations, Queue: w.Queue, Account: w.Account, Every: w.Every, Probability: w.Probability, Times: w.Times}
	if !w.From.IsZero() {
		rj.When.From = w.From.Format(time.RFC3339Nano)
	}
	if !w.Until.IsZero() {
		rj.When.Until = w.Until.Format(time.RFC3339Nano)
	}
	rj.When.After, rj.When.For = formatDuration(w.After), formatDuration(w.For)
	rj.Then = thenJSON{Error: t.Error, Status: t.Status, Message: t.Message, Reason: string(t.Reason), Network: string(t.Network),
		Delay: formatDuration(t.Delay), MaxDelay: formatDuration(t.MaxDelay), Applied: t.Applied}
	return rj
}

// UnmarshalJSON reads r as ParseRule does.
func (r *Rule) UnmarshalJSON(data []byte) error {
	v, err := ParseRule(data)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

func formatDuration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// decodeStrict decodes data into v, refusing any field v does not have:
// names differing only in case, which encoding/json would take, as much
// as unknown ones.
func decodeStrict(data []byte, v any) error {
	if len(data) > maxConfig {
		return fmt.Errorf("longer than %d bytes", maxConfig)
	}
	if err := exactFields(data, reflect.TypeOf(v).Elem()); err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("text after the JSON value")
	}
	return nil
}

// exactFields refuses the first field of the JSON object data, in the
// document's order, whose name is not exactly one of the JSON names of
// struct type t, as a *FieldError that gives the name it comes nearest
// to. It looks into the fields that are structs themselves (a rule's when
// and then). What is not an object, or not valid JSON, it leaves to the
// decoder to refuse.
func exactFields(data []byte, t reflect.Type) error {
	d := json.NewDecoder(bytes.NewReader(data))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	fields := jsonFields(t)
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := d.Decode(&value); err != nil {
			return nil
		}
		ft, ok := fields[key]
		if !ok {
			names := make([]string, 0, len(fields))
			for i := 0; i < t.NumField(); i++ {
				names = append(names, jsonName(t.Field(i)))
			}
			if near := nearest(key, names); near != "" {
				return fieldErr("", "unknown field %q; did you mean %q?", key, near)
			}
			return fieldErr("", "unknown field %q; the fields are %s", key, strings.Join(names, ", "))
		}
		if ft.Kind() == reflect.Struct {
			if err := exactFields(value, ft); err != nil {
				return within(key, err)
			}
		}
	}
	return nil
}

// jsonFields maps the JSON names of struct type t's fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		m[jsonName(t.Field(i))] = t.Field(i).Type
	}
	return m
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// nearest returns the name of names that key comes nearest to, for a
// did-you-mean hint: one that differs in case only, else one that starts
// with key (a name cut short), else the nearest within two edits; or "".
func nearest(key string, names []string) string {
	lower := strings.ToLower(key)
	for _, n := range names {
		if strings.EqualFold(n, key) {
			return n
		}
	}
	if len(key) >= 3 {
		for _, n := range names {
			if strings.HasPrefix(n, lower) {
				return n
			}
		}
	}
	best, bestDist := "", 3
	for _, n := range names {
		if d := editdist.Distance(lower, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// jsonError turns a decoding error into a FieldError naming the field
// (type errors) or the place in data (syntax errors).
func jsonError(path string, data []byte, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		if path == "" {
			return fe
		}
		return within(path, fe)
	}
	join := func(field string) string {
		switch {
		case path == "":
			return field
		case field == "":
			return path
		}
		return path + "." + field
	}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return fieldErr(join(te.Field), "want %s, got a JSON %s", jsonKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		line, col := lineCol(data, se.Offset)
		return fieldErr(path, "line %d, column %d: %s", line, col, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.EOF):
		return fieldErr(path, "empty; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		line, col := lineCol(data, int64(len(data)))
		return fieldErr(path, "line %d, column %d: the JSON text ends early", line, col)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return fieldErr(path, "unknown field %s", name)
	}
	return fieldErr(path, "%s", msg)
}

func jsonKind(k string) string {
	switch k {
	case "int", "int64", "uint64", "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return k
}

func lineCol(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line = 1 + bytes.Count(data[:off], []byte("\n"))
	return line, int(off) - bytes.LastIndexByte(data[:off], '\n')
}

func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fieldErr(field, "%q: want a duration such as 250ms or 2s", s)
	}
	return d, nil
}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fieldErr(field, "%q: want an RFC 3339 time such as 2030-01-01T00:00:00Z", s)
	}
	return t, nil
}

// MarshalJSON writes c in the form Parse reads.
func (c Config) MarshalJSON() ([]byte, error) {
	cj := configJSON{Seed: c.Seed, Rules: []json.RawMessage{}}
	for _, r := range c.Rules {
		b, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		cj.Rules = append(cj.Rules, b)
	}
	if c.Throttle != nil {
		b, err := json.Marshal(throttleJSON(*c.Throttle))
		if err != nil {
			return nil, err
		}
		cj.Throttle = b
	}
	return json.Marshal(cj)
}

// MarshalJSON writes s as the admin endpoint shows it: the seed, each
// rule in the rules file's form with its counters, the throttle, and the
// number of requests refused by a throttle since the Injector was made.
func (s Status) MarshalJSON() ([]byte, error) {
	type ruleView struct {
		ruleJSON
		Added     time.Time `json:"added"`
		Matches   int64     `json:"matches"`
		Hits      int64     `json:"hits"`
		Exhausted bool      `json:"exhausted,omitempty"`
	}
	v := struct {
		Seed      uint64        `json:"seed"`
		Rules     []ruleView    `json:"rules"`
		Throttle  *throttleJSON `json:"throttle,omitempty"`
		Throttled int64         `json:"throttled"`
	}{Seed: s.Seed, Rules: []ruleView{}, Throttled: s.Throttled}
	for _, rs := range s.Rules {
		v.Rules = append(v.Rules, ruleView{ruleJSON: rs.Rule.toJSON(), Added: rs.Added.UTC(), Matches: rs.Matches, Hits: rs.Hits, Exhausted: rs.Exhausted})
	}
	if s.Throttle != nil {
		tj := throttleJSON(*s.Throttle)
		v.Throttle = &tj
	}
	return json.Marshal(v)
}
