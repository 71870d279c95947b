package envelope_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"maps"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/azqlib/azq/envelope"
)

func TestEncodeWritesTheDocumentedForm(t *testing.T) {
	tests := []struct {
		name string
		in   envelope.Envelope
		want string
	}{
		{"empty", envelope.Envelope{}, `{"azqenvelope":1}`},
		{"body", envelope.Envelope{Body: []byte("hello")}, `{"azqenvelope":1,"body":"hello"}`},
		{"all members, metadata sorted", envelope.Envelope{
			ID:       "4f1c",
			Metadata: map[string]string{"b": "2", "a": "1"},
			Body:     []byte(`{"x":1}`),
		}, `{"azqenvelope":1,"id":"4f1c","metadata":{"a":"1","b":"2"},"body":"{\"x\":1}"}`},
		{"control characters escaped", envelope.Envelope{Body: []byte("a\x00\t\n\r\x1f\x7f\\z")},
			`{"azqenvelope":1,"body":"a\u0000\t\n\r\u001f\u007f\\z"}`},
		{"noncharacters escaped, others kept", envelope.Envelope{Body: []byte("\ufffe\uffff\ufffd☺")},
			`{"azqenvelope":1,"body":"\ufffe\uffff` + "\ufffd☺" + `"}`},
		{"invalid UTF-8 body as base64", envelope.Envelope{Body: []byte{0xbd, 0xb2, 'x'}},
			`{"azqenvelope":1,"body64":"vbJ4"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := envelope.Encode(&tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Encode = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestEncodeRefusesInvalidUTF8OutsideTheBody(t *testing.T) {
	for _, e := range []envelope.Envelope{
		{ID: "\xbd"},
		{Metadata: map[string]string{"\xbd": "v"}},
		{Metadata: map[string]string{"k": "\xbd"}},
	} {
		if _, err := envelope.Encode(&e); !errors.Is(err, envelope.ErrInvalidUTF8) {
			t.Errorf("Encode(%+v) error = %v, want ErrInvalidUTF8", e, err)
		}
	}
}

func TestDecodeReadsAnyLayout(t *testing.T) {
	tests := []struct {
		name string
		text string
		want envelope.Envelope
	}{
		{"own form", `{"azqenvelope":1,"id":"x","metadata":{"a":"1"},"body":"hi"}`,
			envelope.Envelope{ID: "x", Metadata: map[string]string{"a": "1"}, Body: []byte("hi")}},
		{"other order and white space", " {\n \"body\" : \"hi\" ,\t\"azqenvelope\" : 1 }\r\n",
			envelope.Envelope{Body: []byte("hi")}},
		{"unknown members skipped", `{"azqenvelope":1,"trace":{"a":[1,2.5e3,true,false,null,"s",{}]},"body":"hi","n":-0.1}`,
			envelope.Envelope{Body: []byte("hi")}},
		{"escapes", `{"azqenvelope":1,"body":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud800x"}`,
			envelope.Envelope{Body: []byte("\"\\/\b\f\n\r\té😀\ufffdx")}},
		{"escaped member name", `{"\u0061zqenvelope":1,"b\u006fdy":"hi"}`,
			envelope.Envelope{Body: []byte("hi")}},
		{"base64 body", `{"azqenvelope":1,"body64":"vbJ4"}`, envelope.Envelope{Body: []byte{0xbd, 0xb2, 'x'}}},
		{"null metadata", `{"azqenvelope":1,"metadata":null}`, envelope.Envelope{}},
		{"empty metadata", `{"azqenvelope":1,"metadata":{}}`, envelope.Envelope{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := envelope.Decode(tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if !equal(got, tt.want) {
				t.Fatalf("Decode = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeRefusesBadEnvelopes(t *testing.T) {
	tests := []struct {
		name string
		text string
		want error // nil: a *SyntaxError
	}{
		{"plain text", "hello", envelope.ErrNotEnvelope},
		{"empty", "", envelope.ErrNotEnvelope},
		{"JSON without the marker", `{"body":"hi"}`, envelope.ErrNotEnvelope},
		{"JSON array", `[1]`, envelope.ErrNotEnvelope},
		{"version 2", `{"azqenvelope":2,"body":"hi"}`, envelope.ErrVersion},
		{"version 1.0", `{"azqenvelope":1.0}`, envelope.ErrVersion},
		{"version as a string", `{"azqenvelope":"1"}`, nil},
		{"body twice", `{"azqenvelope":1,"body":"a","body":"b"}`, nil},
		{"body and body64", `{"azqenvelope":1,"body":"a","body64":"Yg=="}`, nil},
		{"marker twice", `{"azqenvelope":1,"azqenvelope":1}`, nil},
		{"metadata name twice", `{"azqenvelope":1,"metadata":{"a":"1","a":"2"}}`, nil},
		{"metadata value not a string", `{"azqenvelope":1,"metadata":{"a":1}}`, nil},
		{"bad base64", `{"azqenvelope":1,"body64":"vbJ"}`, nil},
		{"raw control character", "{\"azqenvelope\":1,\"body\":\"a\x01\"}", nil},
		{"invalid UTF-8", "{\"azqenvelope\":1,\"body\":\"\xbd\"}", nil},
		{"bad escape", `{"azqenvelope":1,"body":"\x"}`, nil},
		{"short unicode escape", `{"azqenvelope":1,"body":"\u12"}`, nil},
		{"unterminated", `{"azqenvelope":1,"body":"hi`, nil},
		{"trailing text", `{"azqenvelope":1} x`, nil},
		{"trailing comma", `{"azqenvelope":1,}`, nil},
		{"deep nesting", `{"azqenvelope":1,"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := envelope.Decode(tt.text)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("Decode error = %v, want %v", err, tt.want)
				}
				return
			}
			var se *envelope.SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Decode error = %v (%T), want a *SyntaxError", err, err)
			}
		})
	}
}

func TestReadDeliversAPlainMessageAsItsText(t *testing.T) {
	for _, text := range []string{"hello", `{"order":42}`, `{"azqenvelope":2,"body":"x"}`, `{"azqenvelope":1,"body":`, ""} {
		e, ok := envelope.Read(text)
		if ok || string(e.Body) != text || e.ID != "" || e.Metadata != nil {
			t.Errorf("Read(%q) = %+v, %v; want the text as the body, false", text, e, ok)
		}
	}
	e, ok := envelope.Read(`{"azqenvelope":1,"body":"hi"}`)
	if !ok || string(e.Body) != "hi" {
		t.Errorf("Read of an envelope = %+v, %v", e, ok)
	}
}

// TestEncodedTextIsXMLCharacterData checks the promise that an envelope can
// stand as a message text in the REST API's XML whatever it carries.
func TestEncodedTextIsXMLCharacterData(t *testing.T) {
	var all []byte
	for r := rune(0); r < 0x30000; r++ {
		if utf8.ValidRune(r) {
			all = utf8.AppendRune(all, r)
		}
	}
	prefix := func(n int) string { return strings.ToValidUTF8(string(all[:n]), "") }
	text, err := envelope.Encode(&envelope.Envelope{ID: prefix(4096), Metadata: map[string]string{prefix(200): string(all)}, Body: all})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range text {
		if !isXMLChar(r) {
			t.Fatalf("character %U at %d may not stand in XML", r, i)
		}
	}
	var v struct {
		Text string `xml:"MessageText"`
	}
	var doc bytes.Buffer
	doc.WriteString("<QueueMessage><MessageText>")
	if err := xml.EscapeText(&doc, []byte(text)); err != nil {
		t.Fatal(err)
	}
	doc.WriteString("</MessageText></QueueMessage>")
	if err := xml.Unmarshal(doc.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	got, err := envelope.Decode(v.Text)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Body, all) {
		t.Fatal("body changed through XML")
	}
}

// isXMLChar reports whether r is a Char of XML 1.0.
func isXMLChar(r rune) bool {
	return r == 0x9 || r == 0xA || r == 0xD ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

func equal(a, b envelope.Envelope) bool {
	return a.ID == b.ID && maps.Equal(a.Metadata, b.Metadata) && bytes.Equal(a.Body, b.Body)
}

// FuzzDecode: Decode never panics and keeps to its allocation bound; what
// it accepts is valid JSON that encoding/json reads to the same members,
// and it survives Encode and Decode again unchanged; Read never loses the
// text. And any envelope built from the input encodes to a text that
// decodes to it.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"azqenvelope":1}`,
		`{"azqenvelope":1,"id":"x","metadata":{"a":"1","b":""},"body":"hi"}`,
		`{"azqenvelope":1,"body64":"vbJ4"}`,
		`{"body":"\ud83d\ude00","azqenvelope":1,"extra":[{"a":null},1e-3,true]}`,
		`{"azqenvelope":2}`,
		`{"azqenvelope":1,"body":"a","body":"b"}`,
		`{"azqenvelope":1,"metadata":{"a":"\u0000\ufffe"}}`,
		"plain text",
		`{"order":42}`,
		``,
	} {
		f.Add(s)
	}
	for _, h := range hostileTexts {
		f.Add(h.text(4 << 10))
	}
	f.Fuzz(func(t *testing.T, text string) {
		if e, ok := envelope.Read(text); !ok && string(e.Body) != text {
			t.Fatalf("Read lost the text of a plain message")
		}
		e, err := envelope.Decode(text)
		// An envelope decoded without metadata made no map: the tighter
		// bound holds.
		bound := allocBound(text, err != nil || e.Metadata != nil)
		if n := decodeAllocation(text, bound); n > bound {
			t.Fatalf("Decode of %d bytes allocated %d; the bound is %d", len(text), n, bound)
		}
		if err == nil {
			checkAgainstEncodingJSON(t, text, e)
			again, err := envelope.Encode(&e)
			if err != nil {
				t.Fatalf("Encode of a decoded envelope: %v", err)
			}
			e2, err := envelope.Decode(again)
			if err != nil || !equal(e, e2) {
				t.Fatalf("Decode(Encode(e)) = %+v, %v; want %+v", e2, err, e)
			}
		}
		// Any envelope built from the input round-trips.
		built := envelope.Envelope{ID: strings.ToValidUTF8(text, "?"), Body: []byte(text)}
		if len(text) > 0 {
			built.Metadata = map[string]string{strings.ToValidUTF8(text[:len(text)/2], ""): strings.ToValidUTF8(text[len(text)/2:], "")}
		}
		enc, err := envelope.Encode(&built)
		if err != nil {
			t.Fatal(err)
		}
		got, err := envelope.Decode(enc)
		if err != nil || !equal(got, built) {
			t.Fatalf("Decode(Encode(%+v)) = %+v, %v", built, got, err)
		}
		if !json.Valid([]byte(enc)) {
			t.Fatalf("Encode wrote invalid JSON: %s", enc)
		}
	})
}

// checkAgainstEncodingJSON fails unless encoding/json reads text as a JSON
// object with the same members that Decode found.
func checkAgainstEncodingJSON(t *testing.T, text string, e envelope.Envelope) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("Decode accepted %q, which encoding/json refuses: %v", text, err)
	}
	var id string
	if raw, ok := m["id"]; ok {
		if err := json.Unmarshal(raw, &id); err != nil {
			t.Fatalf("id: %v", err)
		}
	}
	var md map[string]string
	if raw, ok := m["metadata"]; ok {
		if err := json.Unmarshal(raw, &md); err != nil {
			t.Fatalf("metadata: %v", err)
		}
	}
	var body []byte
	if raw, ok := m["body"]; ok {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("body: %v", err)
		}
		body = []byte(s)
	}
	if raw, ok := m["body64"]; ok {
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("body64: %v", err)
		}
	}
	if want := (envelope.Envelope{ID: id, Metadata: md, Body: body}); !equal(e, want) {
		t.Fatalf("Decode(%q) = %+v, encoding/json reads %+v", text, e, want)
	}
}
