package server

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/azqlib/azq"
)

// maxRequestBody is the most bytes Azure reads of a request body (128.5
// KiB); a longer body is 413 RequestBodyTooLarge with this MaxLimit.
const maxRequestBody = 131584

type buffer struct{ b []byte }

var bufPool = sync.Pool{New: func() any { return &buffer{b: make([]byte, 0, 1024)} }}

func getBuf() *buffer { return bufPool.Get().(*buffer) }

func putBuf(b *buffer) {
	if cap(b.b) > 256<<10 {
		return
	}
	b.b = b.b[:0]
	bufPool.Put(b)
}

// readBody reads the request body into b, refusing more than
// maxRequestBody bytes without reading them all.
func (q *request) readBody(b *buffer) error {
	if q.r.ContentLength > maxRequestBody {
		return bodyTooLarge(maxRequestBody)
	}
	if q.r.Body == nil || q.r.Body == http.NoBody {
		return nil
	}
	lr := io.LimitedReader{R: q.r.Body, N: maxRequestBody + 1}
	for {
		if len(b.b) == cap(b.b) {
			b.b = append(b.b, 0)[:len(b.b)]
		}
		n, err := lr.Read(b.b[len(b.b):cap(b.b)])
		b.b = b.b[:len(b.b)+n]
		if len(b.b) > maxRequestBody {
			return bodyTooLarge(maxRequestBody)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &azq.Error{Code: "InvalidInput", StatusCode: 400, Message: "the request body could not be read"}
		}
	}
}

// parseMessageText reads <QueueMessage><MessageText>…</MessageText></QueueMessage>.
// A body of any other shape is InvalidXmlDocument.
func parseMessageText(body []byte) (string, error) {
	if s, ok := fastMessageText(body); ok {
		return s, nil
	}
	return slowMessageText(body)
}

const (
	msgOpen  = "<QueueMessage><MessageText>"
	msgClose = "</MessageText></QueueMessage>"
)

// fastMessageText handles the body every SDK sends for plain ASCII text
// without touching the XML decoder. Anything unusual (entities,
// non-ASCII, control characters, attributes, other layouts) falls back to
// the full parser, so both paths accept exactly the same documents.
func fastMessageText(body []byte) (string, bool) {
	b := body
	if bytes.HasPrefix(b, []byte("<?xml ")) {
		end := bytes.Index(b, []byte("?>"))
		if end < 0 {
			return "", false
		}
		decl := string(b[6:end])
		enc := procInstParam(decl, "encoding")
		if enc != "" && !strings.EqualFold(enc, "utf-8") || procInstParam(decl, "version") != "1.0" {
			return "", false
		}
		b = bytes.TrimLeft(b[end+2:], " \t\r\n")
	}
	b = bytes.TrimRight(b, " \t\n")
	if !bytes.HasPrefix(b, []byte(msgOpen)) || !bytes.HasSuffix(b, []byte(msgClose)) || len(b) < len(msgOpen)+len(msgClose) {
		return "", false
	}
	t := b[len(msgOpen) : len(b)-len(msgClose)]
	for _, c := range t {
		if c < 0x20 && c != '\t' && c != '\n' || c >= 0x7f || c == '<' || c == '&' || c == ']' {
			return "", false
		}
	}
	return string(t), true
}

func slowMessageText(body []byte) (string, error) {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = true
	fail := func(reason string) error {
		line, col := d.InputPos()
		return xmlError(azq.CodeInvalidXMLDocument, line, col, reason)
	}
	depth := 0
	var text strings.Builder
	seenRoot, seenText, inText := false, false, false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				return "", fail(se.Msg)
			}
			return "", fail(err.Error())
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch {
			case depth == 0 && !seenRoot && t.Name.Local == "QueueMessage":
				seenRoot = true
			case depth == 1 && t.Name.Local == "MessageText" && !seenText:
				seenText, inText = true, true
			default:
				return "", fail("unexpected element " + truncate(t.Name.Local, 64))
			}
			depth++
		case xml.EndElement:
			depth--
			inText = false
		case xml.CharData:
			if inText {
				text.Write(t)
			} else if len(bytes.TrimSpace(t)) != 0 {
				return "", fail("unexpected text")
			}
		case xml.ProcInst:
			if t.Target == "xml" {
				if enc := procInstParam(string(t.Inst), "encoding"); enc != "" && !strings.EqualFold(enc, "utf-8") && !strings.EqualFold(enc, "utf8") {
					return "", fail("unsupported encoding " + truncate(enc, 32))
				}
			}
		case xml.Directive:
			return "", fail("unexpected directive")
		}
	}
	if !seenRoot || !seenText {
		return "", fail("the body must be a QueueMessage with a MessageText element")
	}
	s := text.String()
	if !utf8.ValidString(s) {
		return "", fail("invalid UTF-8")
	}
	return s, nil
}

// procInstParam returns the value of param in an XML declaration.
func procInstParam(s, param string) string {
	i := strings.Index(s, param+"=")
	if i < 0 {
		return ""
	}
	s = s[i+len(param)+1:]
	if s == "" {
		return ""
	}
	q := s[0]
	if q != '"' && q != '\'' {
		return ""
	}
	s = s[1:]
	j := strings.IndexByte(s, q)
	if j < 0 {
		return ""
	}
	return s[:j]
}
