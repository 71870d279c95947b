package server

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/azqlib/azq"
)

// serviceProperties are the queue service properties of one account.
// azq has no use for logging and metrics settings; the server keeps them
// so that clients read back what they wrote, and applies the CORS rules.
type serviceProperties struct {
	logging       logging
	hour, minute  metrics
	cors          []corsRule
	corsSpecified bool
}

type retention struct {
	enabled bool
	days    int
}

type logging struct {
	version          string
	del, read, write bool
	retention        retention
}

type metrics struct {
	version     string
	enabled     bool
	includeAPIs bool
	retention   retention
}

// defaultServiceProperties are a new account's, as Azure documents and
// answers them: logging off, hour metrics on with their APIs and kept 7
// days, minute metrics off, no CORS rules.
func defaultServiceProperties() serviceProperties {
	return serviceProperties{
		logging: logging{version: "1.0"},
		hour:    metrics{version: "1.0", enabled: true, includeAPIs: true, retention: retention{enabled: true, days: 7}},
		minute:  metrics{version: "1.0"},
	}
}

type retentionDoc struct {
	Enabled *string `xml:"Enabled"`
	Days    *string `xml:"Days"`
}

type metricsDoc struct {
	Version         *string       `xml:"Version"`
	Enabled         *string       `xml:"Enabled"`
	IncludeAPIs     *string       `xml:"IncludeAPIs"`
	RetentionPolicy *retentionDoc `xml:"RetentionPolicy"`
}

type propertiesDoc struct {
	XMLName xml.Name `xml:"StorageServiceProperties"`
	Logging *struct {
		Version         *string       `xml:"Version"`
		Delete          *string       `xml:"Delete"`
		Read            *string       `xml:"Read"`
		Write           *string       `xml:"Write"`
		RetentionPolicy *retentionDoc `xml:"RetentionPolicy"`
	} `xml:"Logging"`
	HourMetrics   *metricsDoc `xml:"HourMetrics"`
	MinuteMetrics *metricsDoc `xml:"MinuteMetrics"`
	Cors          *struct {
		Rules []corsRuleDoc `xml:"CorsRule"`
	} `xml:"Cors"`
	// DefaultServiceVersion is a Blob service property; the Queue
	// service rejects it.
	DefaultServiceVersion *string `xml:"DefaultServiceVersion"`
}

func nodeValue(reason string) error {
	return xmlError("InvalidXmlNodeValue", 0, 0, reason)
}

func parseBoolNode(name string, s *string, def bool) (bool, error) {
	if s == nil {
		return def, nil
	}
	switch strings.ToLower(strings.TrimSpace(*s)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, nodeValue(name + " must be true or false")
}

func parseRetention(d *retentionDoc, cur retention) (retention, error) {
	if d == nil {
		return cur, nil
	}
	var r retention
	var err error
	if r.enabled, err = parseBoolNode("RetentionPolicy/Enabled", d.Enabled, false); err != nil {
		return r, err
	}
	if d.Days != nil && strings.TrimSpace(*d.Days) != "" {
		n, err := strconv.Atoi(strings.TrimSpace(*d.Days))
		if err != nil || n < 1 || n > 365 {
			return r, nodeValue("RetentionPolicy/Days must be between 1 and 365")
		}
		r.days = n
	}
	if r.enabled && r.days == 0 {
		return r, nodeValue("RetentionPolicy/Days is required when retention is enabled")
	}
	if !r.enabled {
		r.days = 0
	}
	return r, nil
}

func parseVersionNode(s *string, cur string) (string, error) {
	if s == nil {
		return cur, nil
	}
	v := strings.TrimSpace(*s)
	if v != "1.0" {
		return "", nodeValue("Version must be 1.0")
	}
	return v, nil
}

func parseMetrics(d *metricsDoc, cur metrics) (metrics, error) {
	if d == nil {
		return cur, nil
	}
	var m metrics
	var err error
	if m.version, err = parseVersionNode(d.Version, "1.0"); err != nil {
		return m, err
	}
	if m.enabled, err = parseBoolNode("Enabled", d.Enabled, false); err != nil {
		return m, err
	}
	if m.includeAPIs, err = parseBoolNode("IncludeAPIs", d.IncludeAPIs, false); err != nil {
		return m, err
	}
	if !m.enabled {
		m.includeAPIs = false
	}
	if m.retention, err = parseRetention(d.RetentionPolicy, retention{}); err != nil {
		return m, err
	}
	return m, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// applyServiceProperties parses a Set Queue Service Properties body and
// returns cur with the sections it names replaced; omitted sections keep
// their values.
func applyServiceProperties(body []byte, cur serviceProperties) (serviceProperties, error) {
	var doc propertiesDoc
	if err := unmarshalXML(body, &doc); err != nil {
		return cur, err
	}
	if doc.DefaultServiceVersion != nil {
		return cur, xmlError(azq.CodeInvalidXMLDocument, 0, 0, "DefaultServiceVersion is not a property of the Queue service")
	}
	next := cur
	var err error
	if l := doc.Logging; l != nil {
		var lg logging
		if lg.version, err = parseVersionNode(l.Version, "1.0"); err != nil {
			return cur, err
		}
		if lg.del, err = parseBoolNode("Delete", l.Delete, false); err != nil {
			return cur, err
		}
		if lg.read, err = parseBoolNode("Read", l.Read, false); err != nil {
			return cur, err
		}
		if lg.write, err = parseBoolNode("Write", l.Write, false); err != nil {
			return cur, err
		}
		if lg.retention, err = parseRetention(l.RetentionPolicy, retention{}); err != nil {
			return cur, err
		}
		next.logging = lg
	}
	if next.hour, err = parseMetrics(doc.HourMetrics, cur.hour); err != nil {
		return cur, err
	}
	if next.minute, err = parseMetrics(doc.MinuteMetrics, cur.minute); err != nil {
		return cur, err
	}
	if c := doc.Cors; c != nil {
		rules, err := parseCorsRules(c.Rules)
		if err != nil {
			return cur, err
		}
		next.cors = rules
		next.corsSpecified = true
	}
	return next, nil
}

// unmarshalXML decodes a whole document into v; syntax errors and a wrong
// root element are InvalidXmlDocument with the position.
func unmarshalXML(body []byte, v any) error {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = true
	if err := d.Decode(v); err != nil {
		line, col := d.InputPos()
		msg := err.Error()
		var se *xml.SyntaxError
		if errors.As(err, &se) {
			msg = se.Msg
		}
		if err == io.EOF {
			msg = "the document is empty"
		}
		return xmlError(azq.CodeInvalidXMLDocument, line, col, msg)
	}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil
		}
		line, col := d.InputPos()
		if err != nil {
			return xmlError(azq.CodeInvalidXMLDocument, line, col, err.Error())
		}
		switch t := tok.(type) {
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return xmlError(azq.CodeInvalidXMLDocument, line, col, "text after the document element")
			}
		case xml.Comment, xml.ProcInst:
		default:
			return xmlError(azq.CodeInvalidXMLDocument, line, col, "content after the document element")
		}
	}
}

func appendBoolElem(b []byte, name string, v bool) []byte {
	b = append(b, '<')
	b = append(b, name...)
	b = append(b, '>')
	b = strconv.AppendBool(b, v)
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

func appendRetention(b []byte, r retention) []byte {
	b = append(b, "<RetentionPolicy>"...)
	b = appendBoolElem(b, "Enabled", r.enabled)
	if r.enabled {
		b = append(b, "<Days>"...)
		b = strconv.AppendInt(b, int64(r.days), 10)
		b = append(b, "</Days>"...)
	}
	return append(b, "</RetentionPolicy>"...)
}

func appendMetrics(b []byte, name string, m metrics) []byte {
	b = append(b, '<')
	b = append(b, name...)
	b = append(b, "><Version>"...)
	b = appendEscaped(b, m.version)
	b = append(b, "</Version>"...)
	b = appendBoolElem(b, "Enabled", m.enabled)
	if m.enabled {
		b = appendBoolElem(b, "IncludeAPIs", m.includeAPIs)
	}
	b = appendRetention(b, m.retention)
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

func (p *serviceProperties) appendXML(b []byte) []byte {
	b = append(b, xmlHeader...)
	b = append(b, "<StorageServiceProperties><Logging><Version>"...)
	b = appendEscaped(b, p.logging.version)
	b = append(b, "</Version>"...)
	// Azure's order, as its answers show it: Version, Read, Write,
	// Delete (the REST reference lists Delete first).
	b = appendBoolElem(b, "Read", p.logging.read)
	b = appendBoolElem(b, "Write", p.logging.write)
	b = appendBoolElem(b, "Delete", p.logging.del)
	b = appendRetention(b, p.logging.retention)
	b = append(b, "</Logging>"...)
	b = appendMetrics(b, "HourMetrics", p.hour)
	b = appendMetrics(b, "MinuteMetrics", p.minute)
	if len(p.cors) == 0 {
		b = append(b, "<Cors />"...)
	} else {
		b = append(b, "<Cors>"...)
		for _, r := range p.cors {
			// Azure's order, as its answers show it; the REST
			// reference lists the elements in another.
			b = append(b, "<CorsRule><AllowedMethods>"...)
			b = appendEscaped(b, r.methods)
			b = append(b, "</AllowedMethods><AllowedOrigins>"...)
			b = appendEscaped(b, r.origins)
			b = append(b, "</AllowedOrigins><AllowedHeaders>"...)
			b = appendEscaped(b, r.headers)
			b = append(b, "</AllowedHeaders><ExposedHeaders>"...)
			b = appendEscaped(b, r.exposed)
			b = append(b, "</ExposedHeaders><MaxAgeInSeconds>"...)
			b = strconv.AppendInt(b, int64(r.maxAge), 10)
			b = append(b, "</MaxAgeInSeconds></CorsRule>"...)
		}
		b = append(b, "</Cors>"...)
	}
	return append(b, "</StorageServiceProperties>"...)
}

func (q *request) getServiceProperties() error {
	p, err := q.acct.properties(q.r.Context())
	if err != nil {
		return err
	}
	b := getBuf()
	defer putBuf(b)
	b.b = p.appendXML(b.b)
	q.writeXML(http.StatusOK, b.b)
	return nil
}

func (q *request) setServiceProperties() error {
	b := getBuf()
	defer putBuf(b)
	if err := q.readBody(b); err != nil {
		return err
	}
	var err error
	if k := q.acct.keeper; k != nil {
		// Applied to the stored properties in the back end's
		// transaction: sections the body omits keep the values another
		// server may have stored a moment ago.
		err = k.UpdateServiceProperties(q.r.Context(), func(stored []byte) ([]byte, error) {
			cur := defaultServiceProperties()
			if stored != nil {
				var err error
				if cur, err = parseStoredProperties(stored); err != nil {
					return nil, err
				}
			}
			next, err := applyServiceProperties(b.b, cur)
			if err != nil {
				return nil, err
			}
			return next.appendXML(nil), nil
		})
	} else {
		q.acct.mu.Lock()
		var next serviceProperties
		next, err = applyServiceProperties(b.b, q.acct.props)
		if err == nil {
			err = q.acct.setProperties(next)
		}
		q.acct.mu.Unlock()
	}
	if err != nil {
		return err
	}
	q.writeHeader(http.StatusAccepted)
	return nil
}

func (q *request) getServiceStats() error {
	if !q.secondary {
		// Azure serves replication statistics only on the secondary
		// endpoint of a read-access geo-redundant account.
		return invalidQueryValue("comp", "stats", "Get Queue Service Stats is only available on the secondary location endpoint")
	}
	b := getBuf()
	defer putBuf(b)
	b.b = append(b.b, xmlHeader...)
	b.b = append(b.b, "<StorageServiceStats><GeoReplication><Status>live</Status><LastSyncTime>"...)
	b.b = q.now.UTC().AppendFormat(b.b, rfc1123GMT)
	b.b = append(b.b, "</LastSyncTime></GeoReplication></StorageServiceStats>"...)
	q.writeXML(http.StatusOK, b.b)
	return nil
}
