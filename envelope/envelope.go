package envelope

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Version is the envelope version that Encode writes and Decode reads.
const Version = 1

// Member names of version 1.
const (
	memberVersion  = "azqenvelope"
	memberID       = "id"
	memberMetadata = "metadata"
	memberBody     = "body"
	memberBody64   = "body64"
)

// maxDepth bounds the nesting of the unknown members that Decode skips, so
// that a hostile text cannot exhaust the stack.
const maxDepth = 64

// Envelope is a message as the drivers see it: a body with the producer's
// ID and metadata.
type Envelope struct {
	// ID is the producer's message ID; empty if it gave none.
	ID string
	// Metadata are the message's name–value pairs; nil if none.
	Metadata map[string]string
	// Body is the message's payload, any bytes.
	Body []byte
}

var (
	// ErrNotEnvelope is Decode's error for a text that is not an envelope
	// at all: not a JSON object, or one without the "azqenvelope" member.
	ErrNotEnvelope = errors.New("envelope: the text is not an envelope")
	// ErrVersion is Decode's error for an envelope of a version other than
	// Version.
	ErrVersion = errors.New("envelope: unsupported envelope version")
	// ErrInvalidUTF8 is Encode's error for an ID or metadata name or value
	// that is not valid UTF-8; only the body may hold any bytes.
	ErrInvalidUTF8 = errors.New("envelope: ID and metadata must be valid UTF-8")
)

// SyntaxError reports an envelope that Decode could not read: the text
// claims to be an envelope or looks like one but breaks the format.
type SyntaxError struct {
	Offset int    // byte offset in the text where the problem was found
	Msg    string // what was wrong
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("envelope: %s at offset %d", e.Msg, e.Offset)
}

// Encode returns the envelope's text. It fails with ErrInvalidUTF8 if the
// ID or a metadata name or value is not valid UTF-8. It allocates the text
// alone: the envelope is written into a pooled buffer first.
func Encode(e *Envelope) (string, error) {
	buf := bufPool.Get().(*[]byte)
	defer bufPool.Put(buf)
	var err error
	if *buf, err = Append((*buf)[:0], e); err != nil {
		return "", err
	}
	return string(*buf), nil
}

// bufPool holds the buffers Encode writes envelopes into.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// Append appends the envelope's text to dst, as Encode returns it.
func Append(dst []byte, e *Envelope) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"`+memberVersion+`":`...)
	dst = append(dst, versionText...)
	var ok bool
	if e.ID != "" {
		dst = append(dst, `,"`+memberID+`":`...)
		if dst, ok = appendString(dst, e.ID); !ok {
			return dst[:start], fmt.Errorf("%w: the ID is not", ErrInvalidUTF8)
		}
	}
	if len(e.Metadata) > 0 {
		dst = append(dst, `,"`+memberMetadata+`":{`...)
		if len(e.Metadata) == 1 {
			for k, v := range e.Metadata {
				if dst, ok = appendPair(dst, k, v); !ok {
					return dst[:start], fmt.Errorf("%w: metadata %q is not", ErrInvalidUTF8, k)
				}
			}
		} else {
			keys := make([]string, 0, len(e.Metadata))
			for k := range e.Metadata {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for i, k := range keys {
				if i > 0 {
					dst = append(dst, ',')
				}
				if dst, ok = appendPair(dst, k, e.Metadata[k]); !ok {
					return dst[:start], fmt.Errorf("%w: metadata %q is not", ErrInvalidUTF8, k)
				}
			}
		}
		dst = append(dst, '}')
	}
	if len(e.Body) > 0 {
		bodyStart := len(dst)
		dst = append(dst, `,"`+memberBody+`":`...)
		if dst, ok = appendString(dst, e.Body); !ok {
			// Not UTF-8: base64.
			dst = append(dst[:bodyStart], `,"`+memberBody64+`":"`...)
			dst = base64.StdEncoding.AppendEncode(dst, e.Body)
			dst = append(dst, '"')
		}
	}
	return append(dst, '}'), nil
}

// versionText is Version as Encode writes it.
var versionText = strconv.Itoa(Version)

func appendPair(dst []byte, k, v string) ([]byte, bool) {
	dst, ok := appendString(dst, k)
	if !ok {
		return dst, false
	}
	dst = append(dst, ':')
	return appendString(dst, v)
}

const hexDigits = "0123456789abcdef"

// plain[c] reports whether byte c stands for itself in a JSON string as
// Encode writes it and needs no check when Decode reads it: printable
// ASCII but '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString appends s as a JSON string, escaping '"', '\\', every
// control character (U+0000 to U+001F and U+007F) and the two
// noncharacters U+FFFE and U+FFFF, none of which may stand in XML text.
// It reports false, having appended part of s, if s is not valid UTF-8.
func appendString[T string | []byte](dst []byte, s T) ([]byte, bool) {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := decodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			return dst, false
		}
		if r == 0xfffe || r == 0xffff {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', 'f', 'f', 'f', hexDigits[r&0xf])
			start = i + n
		}
		i += n
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), true
}

// decodeRune is utf8.DecodeRune for a string or a byte slice.
func decodeRune[T string | []byte](s T) (rune, int) {
	switch s := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(s)
	case []byte:
		return utf8.DecodeRune(s)
	}
	panic("unreachable")
}

// Read returns the envelope that text holds and true, or, if text is not a
// valid envelope (a plain message from another producer, or one that breaks
// the format), an Envelope whose Body is the whole text, and false.
func Read(text string) (Envelope, bool) {
	e, err := Decode(text)
	if err != nil {
		return Envelope{Body: []byte(text)}, false
	}
	return e, true
}

// Decode reads an envelope. It returns ErrNotEnvelope if text is not one,
// an error matching ErrVersion for another version, and a *SyntaxError for
// a text that looks like an envelope but breaks the format.
//
// Its cost is linear in the text's length, whatever the text holds: see
// the package documentation for the bound.
func Decode(text string) (Envelope, error) {
	d := decoder{s: text}
	d.space()
	if !d.consume('{') {
		return Envelope{}, ErrNotEnvelope
	}
	var (
		e                                     Envelope
		seenVersion, seenID, seenMD, seenBody bool
		version                               string
		body                                  jsonString
		body64                                bool
		versionOff                            int
	)
	d.space()
	if !d.consume('}') {
		for {
			d.space()
			keyOff := d.i
			key, err := d.scanString()
			if err != nil {
				return Envelope{}, err
			}
			d.space()
			if !d.consume(':') {
				return Envelope{}, d.errorf("want ':' after a member name")
			}
			d.space()
			dup := false
			member := d.member(key)
			switch member {
			case memberVersion:
				dup, seenVersion = seenVersion, true
				versionOff = d.i
				if version, err = d.number(); err != nil {
					return Envelope{}, err
				}
			case memberID:
				dup, seenID = seenID, true
				if e.ID, err = d.string(); err != nil {
					return Envelope{}, err
				}
			case memberMetadata:
				dup, seenMD = seenMD, true
				if e.Metadata, err = d.metadata(); err != nil {
					return Envelope{}, err
				}
			case memberBody, memberBody64:
				dup, seenBody = seenBody, true
				body64 = member == memberBody64
				if body, err = d.scanString(); err != nil {
					return Envelope{}, err
				}
			default:
				if err := d.skipValue(0); err != nil {
					return Envelope{}, err
				}
			}
			if dup {
				if member == memberBody || member == memberBody64 {
					return Envelope{}, &SyntaxError{keyOff, `"body" and "body64" together, or either twice`}
				}
				return Envelope{}, &SyntaxError{keyOff, fmt.Sprintf("member %q twice", member)}
			}
			d.space()
			if d.consume(',') {
				continue
			}
			if d.consume('}') {
				break
			}
			return Envelope{}, d.errorf("want ',' or '}' after a member")
		}
	}
	d.space()
	if d.i != len(d.s) {
		return Envelope{}, d.errorf("text after the envelope's object")
	}
	if !seenVersion {
		return Envelope{}, ErrNotEnvelope
	}
	if version != "1" {
		return Envelope{}, &versionError{version, versionOff}
	}
	if seenBody && body.raw != "" {
		if body64 {
			var err error
			if body.escaped {
				src := d.value(body)
				b := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
				var n int
				n, err = base64.StdEncoding.Decode(b, src)
				e.Body = b[:n]
			} else {
				e.Body, err = base64.StdEncoding.DecodeString(body.raw)
			}
			if err != nil {
				return Envelope{}, &SyntaxError{0, `"body64" is not standard base64: ` + err.Error()}
			}
		} else if body.escaped {
			// The value is never longer than its escaped text.
			e.Body = appendUnescaped(make([]byte, 0, len(body.raw)), body.raw)
		} else {
			e.Body = []byte(body.raw)
		}
	}
	if len(e.Body) == 0 {
		e.Body = nil
	}
	return e, nil
}

// versionError is Decode's error for another version; it matches
// ErrVersion.
type versionError struct {
	version string
	offset  int
}

func (e *versionError) Error() string {
	return fmt.Sprintf("envelope: version %s at offset %d; this reader knows version %d", e.version, e.offset, Version)
}

func (e *versionError) Is(target error) bool { return target == ErrVersion }

// decoder reads JSON from s, from offset i on.
type decoder struct {
	s string
	i int
	// scratch holds the value of the last escaped string read, before it
	// is copied or compared. It grows to the longest such string's
	// escaped text, exactly, so that its allocations add up to no more
	// than the text's length.
	scratch []byte
}

// jsonString is a JSON string as it stands in the text, between its
// quotes, checked: raw is its value unless escaped.
type jsonString struct {
	raw     string
	escaped bool
}

func (d *decoder) errorf(format string, args ...any) error {
	return &SyntaxError{d.i, fmt.Sprintf(format, args...)}
}

func (d *decoder) space() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) consume(c byte) bool {
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

// metadata reads an object of string values, or null (no metadata).
func (d *decoder) metadata() (map[string]string, error) {
	if d.literal("null") {
		return nil, nil
	}
	if !d.consume('{') {
		return nil, d.errorf(`"metadata" is not an object`)
	}
	d.space()
	if d.consume('}') {
		return nil, nil
	}
	// Made for its pairs at once: a map grown pair by pair allocates
	// about twice as much.
	md := make(map[string]string, d.countPairs())
	for {
		d.space()
		keyOff := d.i
		key, err := d.scanString()
		if err != nil {
			return nil, err
		}
		d.space()
		if !d.consume(':') {
			return nil, d.errorf("want ':' after a metadata name")
		}
		d.space()
		if d.i < len(d.s) && d.s[d.i] != '"' {
			return nil, d.errorf("metadata %q is not a string", d.text(key))
		}
		k := d.text(key)
		v, err := d.string()
		if err != nil {
			return nil, err
		}
		if _, dup := md[k]; dup {
			return nil, &SyntaxError{keyOff, fmt.Sprintf("metadata %q twice", k)}
		}
		md[k] = v
		d.space()
		if d.consume(',') {
			continue
		}
		if d.consume('}') {
			return md, nil
		}
		return nil, d.errorf("want ',' or '}' in metadata")
	}
}

// countPairs counts the well-formed name–value pairs of the metadata
// object that starts at d.i, up to its end or the first fault, which
// metadata then reports. It allocates nothing and leaves d.i as it was.
func (d *decoder) countPairs() (n int) {
	start := d.i
	defer func() { d.i = start }()
	for {
		d.space()
		if _, err := d.scanString(); err != nil {
			return n
		}
		d.space()
		if !d.consume(':') {
			return n
		}
		d.space()
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			return n
		}
		if _, err := d.scanString(); err != nil {
			return n
		}
		n++
		d.space()
		if !d.consume(',') {
			return n
		}
	}
}

// literal consumes word (true, false or null) if it is next.
func (d *decoder) literal(word string) bool {
	if len(d.s)-d.i >= len(word) && d.s[d.i:d.i+len(word)] == word {
		d.i += len(word)
		return true
	}
	return false
}

// number reads a JSON number and returns its text.
func (d *decoder) number() (string, error) {
	start := d.i
	d.consume('-')
	switch {
	case d.consume('0'):
	case d.i < len(d.s) && d.s[d.i] >= '1' && d.s[d.i] <= '9':
		d.digits()
	default:
		return "", d.errorf("want a number")
	}
	if d.consume('.') {
		if d.digits() == 0 {
			return "", d.errorf("want digits after '.'")
		}
	}
	if d.consume('e') || d.consume('E') {
		if !d.consume('+') {
			d.consume('-')
		}
		if d.digits() == 0 {
			return "", d.errorf("want digits in the exponent")
		}
	}
	return d.s[start:d.i], nil
}

func (d *decoder) digits() int {
	start := d.i
	for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
		d.i++
	}
	return d.i - start
}

// string reads a JSON string and returns its value: a slice of the text
// if it has no escape, a copy of its own otherwise.
func (d *decoder) string() (string, error) {
	s, err := d.scanString()
	if err != nil {
		return "", err
	}
	return d.text(s), nil
}

// text returns s's value as a string of its own if it is escaped, and as
// a slice of the text otherwise.
func (d *decoder) text(s jsonString) string {
	if !s.escaped {
		return s.raw
	}
	return string(d.value(s))
}

// value returns the value of s, an escaped string, in d.scratch: valid
// until the next call.
func (d *decoder) value(s jsonString) []byte {
	if cap(d.scratch) < len(s.raw) {
		d.scratch = make([]byte, 0, len(s.raw))
	}
	d.scratch = appendUnescaped(d.scratch[:0], s.raw)
	return d.scratch
}

// member returns the name of version 1 that s is, or "" for another
// name, without allocating.
func (d *decoder) member(s jsonString) string {
	if !s.escaped {
		return s.raw
	}
	v := d.value(s)
	for _, m := range [...]string{memberVersion, memberID, memberMetadata, memberBody, memberBody64} {
		if string(v) == m {
			return m
		}
	}
	return ""
}

// scanString reads a JSON string, checking it, and returns it as it
// stands in the text. It allocates nothing: its value, if escaped, is
// made by appendUnescaped when it is wanted.
func (d *decoder) scanString() (jsonString, error) {
	if !d.consume('"') {
		return jsonString{}, d.errorf("want a string")
	}
	start := d.i
	escaped := false
	for d.i < len(d.s) {
		c := d.s[d.i]
		if plain[c] {
			d.i++
			continue
		}
		switch {
		case c == '"':
			s := jsonString{d.s[start:d.i], escaped}
			d.i++
			return s, nil
		case c == '\\':
			escaped = true
			if d.i+1 >= len(d.s) {
				return jsonString{}, d.errorf("unterminated string")
			}
			e := d.s[d.i+1]
			d.i += 2
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, ok := hex4(d.s[d.i:]); !ok {
					return jsonString{}, d.errorf(`want four hex digits after \u`)
				}
				d.i += 4
			default:
				return jsonString{}, d.errorf("invalid escape '\\%c'", e)
			}
		case c < 0x20:
			return jsonString{}, d.errorf("control character in a string")
		case c < utf8.RuneSelf:
			d.i++
		default:
			r, n := utf8.DecodeRuneInString(d.s[d.i:])
			if r == utf8.RuneError && n == 1 {
				return jsonString{}, d.errorf("invalid UTF-8")
			}
			d.i += n
		}
	}
	return jsonString{}, d.errorf("unterminated string")
}

// appendUnescaped appends the value of raw, a string that scanString
// checked, to dst. The value is never longer than raw: an escape stands
// for at most as many bytes as it takes.
func appendUnescaped(dst []byte, raw string) []byte {
	for i := 0; i < len(raw); {
		// The run of bytes up to the next escape stands for itself.
		j := i
		for j < len(raw) && raw[j] != '\\' {
			j++
		}
		dst = append(dst, raw[i:j]...)
		if j == len(raw) {
			break
		}
		e := raw[j+1]
		i = j + 2
		switch e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(raw[i:])
			i += 4
			if utf16.IsSurrogate(r) {
				// A high surrogate followed by an escaped low one is one
				// character; a surrogate alone is U+FFFD, as
				// encoding/json reads it.
				lo := utf8.RuneError
				if len(raw)-i >= 6 && raw[i] == '\\' && raw[i+1] == 'u' {
					lo, _ = hex4(raw[i+2:])
				}
				if dec := utf16.DecodeRune(r, lo); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
	}
	return dst
}

// hex4 reads the four hex digits that s starts with.
func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// skipValue reads and discards any JSON value: a member this version does
// not know. It allocates nothing.
func (d *decoder) skipValue(depth int) error {
	if depth > maxDepth {
		return d.errorf("values nested deeper than %d", maxDepth)
	}
	if d.i >= len(d.s) {
		return d.errorf("want a value")
	}
	switch c := d.s[d.i]; {
	case c == '"':
		_, err := d.scanString()
		return err
	case c == '{' || c == '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		d.i++
		d.space()
		if d.consume(end) {
			return nil
		}
		for {
			d.space()
			if c == '{' {
				if _, err := d.scanString(); err != nil {
					return err
				}
				d.space()
				if !d.consume(':') {
					return d.errorf("want ':' after a member name")
				}
				d.space()
			}
			if err := d.skipValue(depth + 1); err != nil {
				return err
			}
			d.space()
			if d.consume(',') {
				continue
			}
			if d.consume(end) {
				return nil
			}
			return d.errorf("want ',' or '%c'", end)
		}
	case c == 't':
		if d.literal("true") {
			return nil
		}
	case c == 'f':
		if d.literal("false") {
			return nil
		}
	case c == 'n':
		if d.literal("null") {
			return nil
		}
	default:
		_, err := d.number()
		return err
	}
	return d.errorf("want a value")
}
