package server

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/azqlib/azq"
)

const metaPrefix = "X-Ms-Meta-"

// maxListResults is the largest List Queues page.
const maxListResults = 5000

// requestMetadata collects x-ms-meta-* headers. net/http canonicalizes
// header names ("x-ms-meta-myKey" arrives as "X-Ms-Meta-Mykey"), so the
// case a client sent is lost; names are stored in lower case, which is
// exact for the usual all-lower-case names and, since Azure compares
// metadata names ignoring case, equivalent for the rest. Two headers whose
// names differ only in case arrive as one header with two values, which
// Azure rejects as duplicate metadata.
func (q *request) requestMetadata() (map[string]string, error) {
	var md map[string]string
	for k, vs := range q.r.Header {
		if len(k) < len(metaPrefix) || !strings.EqualFold(k[:len(metaPrefix)], metaPrefix) {
			continue
		}
		name := strings.ToLower(k[len(metaPrefix):])
		if len(vs) > 1 {
			return nil, &azq.Error{Code: azq.CodeInvalidMetadata, StatusCode: http.StatusBadRequest,
				Details: []azq.Detail{{Name: "MetadataName", Value: truncate(name, 256)}, {Name: "Reason", Value: "duplicate metadata name"}}}
		}
		if md == nil {
			md = make(map[string]string)
		}
		md[name] = vs[0]
	}
	return md, nil
}

func (q *request) createQueue() error {
	md, err := q.requestMetadata()
	if err != nil {
		return err
	}
	qu, err := q.queueHandle()
	if err != nil {
		return err
	}
	created, err := qu.Create(q.r.Context(), md)
	if err != nil {
		return err
	}
	if created {
		q.writeHeader(http.StatusCreated)
	} else {
		q.writeHeader(http.StatusNoContent)
	}
	return nil
}

func (q *request) deleteQueue() error {
	if err := q.acct.svc.DeleteQueue(q.r.Context(), q.queue); err != nil {
		return err
	}
	q.writeHeader(http.StatusNoContent)
	return nil
}

func (q *request) getQueueMetadata() error {
	qu, err := q.queueHandle()
	if err != nil {
		return err
	}
	p, err := qu.Properties(q.r.Context())
	if err != nil {
		return err
	}
	h := q.w.Header()
	for k, v := range p.Metadata {
		// Written with the stored case; clients compare case-insensitively.
		h["x-ms-meta-"+k] = []string{v}
	}
	h["X-Ms-Approximate-Messages-Count"] = []string{strconv.Itoa(p.ApproximateMessagesCount)}
	h["Cache-Control"] = noCache
	h["Content-Length"] = []string{"0"}
	q.writeHeader(http.StatusOK)
	return nil
}

func (q *request) setQueueMetadata() error {
	md, err := q.requestMetadata()
	if err != nil {
		return err
	}
	qu, err := q.queueHandle()
	if err != nil {
		return err
	}
	if err := qu.SetMetadata(q.r.Context(), md); err != nil {
		return err
	}
	q.writeHeader(http.StatusNoContent)
	return nil
}

const aclTimeLayout = "2006-01-02T15:04:05.0000000Z"

func (q *request) getQueueACL() error {
	qu, err := q.queueHandle()
	if err != nil {
		return err
	}
	ps, err := qu.AccessPolicies(q.r.Context())
	if err != nil {
		return err
	}
	b := getBuf()
	defer putBuf(b)
	b.b = append(b.b, xmlHeader...)
	b.b = append(b.b, "<SignedIdentifiers>"...)
	for _, p := range ps {
		b.b = append(b.b, "<SignedIdentifier><Id>"...)
		b.b = appendEscaped(b.b, p.ID)
		b.b = append(b.b, "</Id>"...)
		if p.Start.IsZero() && p.Expiry.IsZero() && p.Permission == "" {
			// An identifier without a policy is written as Azure
			// writes it, with no empty AccessPolicy.
			b.b = append(b.b, "</SignedIdentifier>"...)
			continue
		}
		b.b = append(b.b, "<AccessPolicy>"...)
		if !p.Start.IsZero() {
			b.b = append(b.b, "<Start>"...)
			b.b = p.Start.UTC().AppendFormat(b.b, aclTimeLayout)
			b.b = append(b.b, "</Start>"...)
		}
		if !p.Expiry.IsZero() {
			b.b = append(b.b, "<Expiry>"...)
			b.b = p.Expiry.UTC().AppendFormat(b.b, aclTimeLayout)
			b.b = append(b.b, "</Expiry>"...)
		}
		if p.Permission != "" {
			b.b = append(b.b, "<Permission>"...)
			b.b = appendEscaped(b.b, p.Permission)
			b.b = append(b.b, "</Permission>"...)
		}
		b.b = append(b.b, "</AccessPolicy></SignedIdentifier>"...)
	}
	b.b = append(b.b, "</SignedIdentifiers>"...)
	q.writeXML(http.StatusOK, b.b)
	return nil
}

type aclDoc struct {
	XMLName     xml.Name `xml:"SignedIdentifiers"`
	Identifiers []struct {
		ID     *string `xml:"Id"`
		Policy *struct {
			Start      *string `xml:"Start"`
			Expiry     *string `xml:"Expiry"`
			Permission *string `xml:"Permission"`
		} `xml:"AccessPolicy"`
	} `xml:"SignedIdentifier"`
}

// Azure's reasons for a Set Queue ACL body it refuses (InvalidXmlDocument).
const (
	reasonACLID       = "Signed identifier ID cannot be empty or over 64 characters in length"
	reasonACLTooMany  = "At most 5 signed identifier is allowed in the request body"
	maxSignedIDLength = 64
)

// parseACL reads a Set Queue ACL body. An empty body clears the ACL.
//
// Azure checks each SignedIdentifier as it finishes reading it: a bad
// permission first (InvalidXmlDocument with line and position 0 and an
// empty reason), then an empty or over-long Id, then an Id seen before,
// both reported at the line and position of the node that follows the
// identifier; only after the whole body, that there are at most five.
// The core checks the same rules again; these checks come first so that
// the answer carries Azure's details.
func parseACL(body []byte) ([]azq.AccessPolicy, error) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, nil
	}
	var doc aclDoc
	if err := unmarshalXML(body, &doc); err != nil {
		return nil, err
	}
	ends := identifierEnds(body)
	ps := make([]azq.AccessPolicy, 0, len(doc.Identifiers))
	for i, si := range doc.Identifiers {
		var p azq.AccessPolicy
		if si.ID != nil {
			p.ID = *si.ID
		}
		if si.Policy != nil && si.Policy.Permission != nil {
			p.Permission = *si.Policy.Permission
			for _, c := range p.Permission {
				if !strings.ContainsRune("raup", c) {
					return nil, xmlErrorAt(azq.CodeInvalidXMLDocument, 0, 0, "")
				}
			}
		}
		line, pos := 0, 0
		if i < len(ends) {
			line, pos = nextNodePosition(body, ends[i])
		}
		if p.ID == "" || utf8.RuneCountInString(p.ID) > maxSignedIDLength {
			return nil, xmlErrorAt(azq.CodeInvalidXMLDocument, line, pos, reasonACLID)
		}
		for _, prev := range ps {
			if prev.ID == p.ID {
				return nil, xmlErrorAt(azq.CodeInvalidXMLDocument, line, pos, "Signed identifier "+truncate(p.ID, 64)+" not unique")
			}
		}
		if si.Policy != nil {
			var err error
			if si.Policy.Start != nil {
				if p.Start, err = parseACLTime(*si.Policy.Start); err != nil {
					return nil, err
				}
			}
			if si.Policy.Expiry != nil {
				if p.Expiry, err = parseACLTime(*si.Policy.Expiry); err != nil {
					return nil, err
				}
			}
		}
		ps = append(ps, p)
	}
	if len(ps) > azq.MaxAccessPolicies {
		return nil, xmlErrorAt(azq.CodeInvalidXMLDocument, 0, 0, reasonACLTooMany)
	}
	return ps, nil
}

// identifierEnds returns the byte offset just past the end tag of each
// SignedIdentifier element of a well-formed SignedIdentifiers document.
func identifierEnds(body []byte) []int {
	d := xml.NewDecoder(bytes.NewReader(body))
	var ends []int
	depth := 0
	for {
		tok, err := d.RawToken()
		if err != nil {
			return ends
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
		case xml.EndElement:
			if depth == 2 && t.Name.Local == "SignedIdentifier" {
				ends = append(ends, int(d.InputOffset()))
			}
			depth--
		}
	}
}

// nextNodePosition is where Azure's XML reader stands after reading an
// element that ends at offset off: on the next node, skipping white
// space, whose position is that of its name (past "<" or "</"), as .NET's
// XmlReader counts lines and positions from 1, in characters.
func nextNodePosition(body []byte, off int) (line, pos int) {
	for off < len(body) && strings.IndexByte(" \t\r\n", body[off]) >= 0 {
		off++
	}
	name := off
	if rest := body[off:]; len(rest) > 0 && rest[0] == '<' {
		switch {
		case bytes.HasPrefix(rest, []byte("<!--")):
			name += 4
		case bytes.HasPrefix(rest, []byte("<![CDATA[")):
			name += 9
		case bytes.HasPrefix(rest, []byte("</")), bytes.HasPrefix(rest, []byte("<?")):
			name += 2
		default:
			name++
		}
	}
	line = 1 + bytes.Count(body[:name], []byte("\n"))
	lineStart := bytes.LastIndexByte(body[:name], '\n') + 1
	return line, 1 + utf8.RuneCount(body[lineStart:name])
}

// parseACLTime accepts the ISO 8601 forms Azure accepts for policy times:
// with or without fractional seconds, a UTC offset, or a bare date.
func parseACLTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.9999999", "2006-01-02T15:04Z07:00", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, xmlError("InvalidXmlNodeValue", 0, 0, "invalid date "+truncate(s, 64))
}

func (q *request) setQueueACL() error {
	b := getBuf()
	defer putBuf(b)
	if err := q.readBody(b); err != nil {
		return err
	}
	ps, err := parseACL(b.b)
	if err != nil {
		return err
	}
	qu, err := q.queueHandle()
	if err != nil {
		return err
	}
	if err := qu.SetAccessPolicies(q.r.Context(), ps); err != nil {
		return err
	}
	q.writeHeader(http.StatusNoContent)
	return nil
}

func (q *request) listQueues() error {
	opts := azq.ListQueuesOptions{}
	prefix, hasPrefix := q.query.get("prefix")
	marker, hasMarker := q.query.get("marker")
	opts.Prefix, opts.Marker = prefix, marker
	mr, hasMax := q.query.get("maxresults")
	requestedMax := 0
	if hasMax {
		n, err := parseInt32("maxresults", mr)
		if err != nil {
			return err
		}
		if n < 1 {
			return outOfRange("maxresults", mr, "1", "5000")
		}
		// Azure's REST specification: a value over 5000 returns up to
		// 5000 items rather than failing.
		opts.MaxResults = min(n, maxListResults)
		requestedMax = n
	}
	if inc, ok := q.query.get("include"); ok {
		for _, part := range strings.Split(inc, ",") {
			switch part {
			case "metadata":
				opts.IncludeMetadata = true
			case "":
			default:
				return invalidQueryValue("include", inc, "")
			}
		}
	}
	page, err := q.acct.svc.ListQueues(q.r.Context(), opts)
	if err != nil {
		return err
	}
	b := getBuf()
	defer putBuf(b)
	b.b = append(b.b, xmlHeader...)
	b.b = append(b.b, `<EnumerationResults ServiceEndpoint="`...)
	b.b = appendEscaped(b.b, q.serviceEndpoint())
	b.b = append(b.b, `">`...)
	if hasPrefix {
		b.b = append(b.b, "<Prefix>"...)
		b.b = appendEscaped(b.b, prefix)
		b.b = append(b.b, "</Prefix>"...)
	}
	if hasMarker {
		b.b = append(b.b, "<Marker>"...)
		b.b = appendEscaped(b.b, marker)
		b.b = append(b.b, "</Marker>"...)
	}
	if hasMax {
		b.b = append(b.b, "<MaxResults>"...)
		b.b = strconv.AppendInt(b.b, int64(requestedMax), 10)
		b.b = append(b.b, "</MaxResults>"...)
	}
	b.b = append(b.b, "<Queues>"...)
	for _, it := range page.Queues {
		b.b = append(b.b, "<Queue><Name>"...)
		b.b = appendEscaped(b.b, it.Name)
		b.b = append(b.b, "</Name>"...)
		if opts.IncludeMetadata {
			b.b = append(b.b, "<Metadata>"...)
			keys := make([]string, 0, len(it.Metadata))
			for k := range it.Metadata {
				if validXMLName(k) {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				b.b = append(b.b, '<')
				b.b = append(b.b, k...)
				b.b = append(b.b, '>')
				b.b = appendEscaped(b.b, it.Metadata[k])
				b.b = append(b.b, "</"...)
				b.b = append(b.b, k...)
				b.b = append(b.b, '>')
			}
			b.b = append(b.b, "</Metadata>"...)
		}
		b.b = append(b.b, "</Queue>"...)
	}
	b.b = append(b.b, "</Queues>"...)
	if page.NextMarker == "" {
		b.b = append(b.b, "<NextMarker />"...)
	} else {
		b.b = append(b.b, "<NextMarker>"...)
		b.b = appendEscaped(b.b, page.NextMarker)
		b.b = append(b.b, "</NextMarker>"...)
	}
	b.b = append(b.b, "</EnumerationResults>"...)
	q.writeXML(http.StatusOK, b.b)
	return nil
}

// serviceEndpoint is the account's queue endpoint as the client addressed
// it, with a trailing slash.
func (q *request) serviceEndpoint() string {
	scheme := "http://"
	if q.r.TLS != nil {
		scheme = "https://"
	}
	ep := scheme + q.r.Host + "/"
	if q.pathStyle {
		ep += q.accountSeg + "/"
	}
	return ep
}
