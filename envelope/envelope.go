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
		body                                  string
		body64                                bool
		versionOff                            int
	)
	d.space()
	if !d.consume('}') {
		for {
			d.space()
			keyOff := d.i
			key, err := d.string()
			if err != nil {
				return Envelope{}, err
			}
			d.space()
			if !d.consume(':') {
				return Envelope{}, d.errorf("want ':' after a member name")
			}
			d.space()
			dup := false
			switch key {
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
				body64 = key == memberBody64
				if body, err = d.string(); err != nil {
					return Envelope{}, err
				}
			default:
				if err := d.skipValue(0); err != nil {
					return Envelope{}, err
				}
			}
			if dup {
				if key == memberBody || key == memberBody64 {
					return Envelope{}, &SyntaxError{keyOff, `"body" and "body64" together, or either twice`}
				}
				return Envelope{}, &SyntaxError{keyOff, fmt.Sprintf("member %q twice", key)}
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
	if seenBody {
		if body64 {
			b, err := base64.StdEncoding.DecodeString(body)
			if err != nil {
				return Envelope{}, &SyntaxError{0, `"body64" is not standard base64: ` + err.Error()}
			}
			e.Body = b
		} else {
			e.Body = []byte(body)
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
	md := make(map[string]string)
	d.space()
	if d.consume('}') {
		return nil, nil
	}
	for {
		d.space()
		keyOff := d.i
		k, err := d.string()
		if err != nil {
			return nil, err
		}
		d.space()
		if !d.consume(':') {
			return nil, d.errorf("want ':' after a metadata name")
		}
		d.space()
		if d.i < len(d.s) && d.s[d.i] != '"' {
			return nil, d.errorf("metadata %q is not a string", k)
		}
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

// string reads a JSON string and returns its value. A string without
// escapes is returned as a slice of the text, without copying.
func (d *decoder) string() (string, error) {
	if !d.consume('"') {
		return "", d.errorf("want a string")
	}
	start := d.i
	for d.i < len(d.s) {
		c := d.s[d.i]
		if plain[c] {
			d.i++
			continue
		}
		switch {
		case c == '"':
			s := d.s[start:d.i]
			d.i++
			return s, nil
		case c == '\\':
			return d.unescape(start)
		case c < 0x20:
			return "", d.errorf("control character in a string")
		case c < utf8.RuneSelf:
			d.i++
		default:
			r, n := utf8.DecodeRuneInString(d.s[d.i:])
			if r == utf8.RuneError && n == 1 {
				return "", d.errorf("invalid UTF-8")
			}
			d.i += n
		}
	}
	return "", d.errorf("unterminated string")
}

// unescape finishes reading a string that has an escape at d.i, its
// characters since start being plain.
func (d *decoder) unescape(start int) (string, error) {
	b := make([]byte, 0, len(d.s)-start)
	b = append(b, d.s[start:d.i]...)
	for d.i < len(d.s) {
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			return string(b), nil
		case c == '\\':
			if d.i+1 >= len(d.s) {
				return "", d.errorf("unterminated string")
			}
			e := d.s[d.i+1]
			d.i += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return "", d.errorf(`want four hex digits after \u`)
				}
				if utf16.IsSurrogate(r) {
					// A high surrogate followed by an escaped low one is
					// one character; a surrogate alone is U+FFFD, as
					// encoding/json reads it.
					save := d.i
					r2 := utf8.RuneError
					if d.i+1 < len(d.s) && d.s[d.i] == '\\' && d.s[d.i+1] == 'u' {
						d.i += 2
						if lo, ok := d.hex4(); ok {
							r2 = lo
						}
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
					} else {
						d.i = save
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", d.errorf("invalid escape '\\%c'", e)
			}
		case c < 0x20:
			return "", d.errorf("control character in a string")
		case c < utf8.RuneSelf:
			b = append(b, c)
			d.i++
		default:
			r, n := utf8.DecodeRuneInString(d.s[d.i:])
			if r == utf8.RuneError && n == 1 {
				return "", d.errorf("invalid UTF-8")
			}
			b = append(b, d.s[d.i:d.i+n]...)
			d.i += n
		}
	}
	return "", d.errorf("unterminated string")
}

// hex4 reads four hex digits.
func (d *decoder) hex4() (rune, bool) {
	if len(d.s)-d.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(d.s[d.i : d.i+4]) {
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
	d.i += 4
	return r, true
}

// skipValue reads and discards any JSON value: a member this version does
// not know.
func (d *decoder) skipValue(depth int) error {
	if depth > maxDepth {
		return d.errorf("values nested deeper than %d", maxDepth)
	}
	if d.i >= len(d.s) {
		return d.errorf("want a value")
	}
	switch c := d.s[d.i]; {
	case c == '"':
		_, err := d.string()
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
				if _, err := d.string(); err != nil {
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
