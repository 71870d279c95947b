// Package sastest makes shared access signatures for package server's
// tests, as the Azure SDK's sas package makes them (the same fields, the
// same string to sign, the same query), so that the tests of server's
// SAS authorization, which are internal tests of package server, need no
// Azure SDK in the root module. The tests of server/sdktest check that it
// signs and encodes exactly as the SDK does.
//
// The strings to sign are the documented ones: "Create a service SAS"
// and "Create an account SAS" in the Azure Storage REST reference, at
// service version 2020-02-10 unless a Version is given.
package sastest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Version is the service version a SAS is signed for when its values name
// none: the SDK's (azqueue v1.0.1).
const Version = "2020-02-10"

// timeFormat is how a start or expiry time is written.
const timeFormat = "2006-01-02T15:04:05Z"

// Protocol is a SAS's allowed protocols (spr).
type Protocol string

// The protocols a SAS can allow.
const (
	ProtocolHTTPS        Protocol = "https"
	ProtocolHTTPSandHTTP Protocol = "https,http"
)

// IPRange is a SAS's allowed client addresses (sip): Start alone, or
// Start-End.
type IPRange struct {
	Start, End net.IP
}

// String is the range as sip writes it; "" when Start is not set.
func (r IPRange) String() string {
	switch {
	case len(r.Start) == 0:
		return ""
	case len(r.End) == 0:
		return r.Start.String()
	}
	return r.Start.String() + "-" + r.End.String()
}

// SharedKeyCredential is an account's name and one of its keys.
type SharedKeyCredential struct {
	account string
	key     []byte
}

// NewSharedKeyCredential decodes the account's base64 key.
func NewSharedKeyCredential(account, key string) (*SharedKeyCredential, error) {
	b, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		return nil, fmt.Errorf("sastest: the key is not base64: %w", err)
	}
	return &SharedKeyCredential{account: account, key: b}, nil
}

// sign is the base64 HMAC-SHA256 of s under the key.
func (c *SharedKeyCredential) sign(s string) string {
	h := hmac.New(sha256.New, c.key)
	h.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// QueryParameters are a signed SAS's parameters.
type QueryParameters struct {
	values url.Values
}

// Encode is the SAS as a query string, its parameters sorted by name.
func (p QueryParameters) Encode() string { return p.values.Encode() }

// QueueSignatureValues are a service SAS's values, for one queue.
type QueueSignatureValues struct {
	Version     string
	Protocol    Protocol
	StartTime   time.Time
	ExpiryTime  time.Time
	Permissions string // some of "raup", in any order
	IPRange     IPRange
	Identifier  string // a stored access policy's ID
	QueueName   string
}

// QueuePermissions are a service SAS's permissions, as flags.
type QueuePermissions struct {
	Read, Add, Update, Process bool
}

// String is the permissions in their canonical order.
func (p *QueuePermissions) String() string {
	return flags([]bool{p.Read, p.Add, p.Update, p.Process}, "raup")
}

// SignWithSharedKey signs v for the credential's account.
func (v QueueSignatureValues) SignWithSharedKey(c *SharedKeyCredential) (QueryParameters, error) {
	if v.Identifier == "" && (v.ExpiryTime.IsZero() || v.Permissions == "") {
		return QueryParameters{}, errors.New("sastest: a service SAS without a stored policy needs ExpiryTime and Permissions")
	}
	perms, err := canonical(v.Permissions, "raup")
	if err != nil {
		return QueryParameters{}, err
	}
	if v.Version == "" {
		v.Version = Version
	}
	st, se := formatTime(v.StartTime), formatTime(v.ExpiryTime)
	sig := c.sign(strings.Join([]string{
		perms, st, se, "/queue/" + c.account + "/" + v.QueueName, v.Identifier,
		v.IPRange.String(), string(v.Protocol), v.Version,
	}, "\n"))
	q := common(v.Version, v.Protocol, st, se, v.IPRange, perms, sig)
	if v.Identifier != "" {
		q.Set("si", v.Identifier)
	}
	return QueryParameters{q}, nil
}

// AccountSignatureValues are an account SAS's values, for the queue
// service.
type AccountSignatureValues struct {
	Version       string
	Protocol      Protocol
	StartTime     time.Time
	ExpiryTime    time.Time
	Permissions   string // some of "rwdxylacuptfi", in any order
	IPRange       IPRange
	ResourceTypes string // some of "sco", in any order
}

// AccountPermissions are an account SAS's permissions, as flags.
type AccountPermissions struct {
	Read, Write, Delete, List, Add, Create, Update, Process bool
}

// String is the permissions in their canonical order.
func (p *AccountPermissions) String() string {
	return flags([]bool{p.Read, p.Write, p.Delete, false, false, p.List, p.Add, p.Create, p.Update, p.Process}, "rwdxylacup")
}

// AccountResourceTypes are an account SAS's resource types, as flags.
type AccountResourceTypes struct {
	Service, Container, Object bool
}

// String is the resource types in their canonical order.
func (r *AccountResourceTypes) String() string {
	return flags([]bool{r.Service, r.Container, r.Object}, "sco")
}

// SignWithSharedKey signs v for the credential's account.
func (v AccountSignatureValues) SignWithSharedKey(c *SharedKeyCredential) (QueryParameters, error) {
	if v.ExpiryTime.IsZero() || v.Permissions == "" || v.ResourceTypes == "" {
		return QueryParameters{}, errors.New("sastest: an account SAS needs ExpiryTime, Permissions and ResourceTypes")
	}
	if v.Version == "" {
		v.Version = Version
	}
	perms, err := canonical(v.Permissions, "rwdxylacuptfi")
	if err != nil {
		return QueryParameters{}, err
	}
	types, err := canonical(v.ResourceTypes, "sco")
	if err != nil {
		return QueryParameters{}, err
	}
	st, se := formatTime(v.StartTime), formatTime(v.ExpiryTime)
	// The account SAS's string to sign ends in a newline.
	sig := c.sign(strings.Join([]string{
		c.account, perms, "q", types, st, se, v.IPRange.String(), string(v.Protocol), v.Version, "",
	}, "\n"))
	q := common(v.Version, v.Protocol, st, se, v.IPRange, perms, sig)
	q.Set("ss", "q")
	q.Set("srt", types)
	return QueryParameters{q}, nil
}

// common are the parameters of every SAS, those given.
func common(version string, protocol Protocol, st, se string, ip IPRange, perms, sig string) url.Values {
	q := url.Values{}
	for _, p := range [][2]string{
		{"sv", version}, {"spr", string(protocol)}, {"st", st}, {"se", se},
		{"sip", ip.String()}, {"sp", perms}, {"sig", sig},
	} {
		if p[1] != "" {
			q.Set(p[0], p[1])
		}
	}
	return q
}

// formatTime writes a start or expiry time; "" for none.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(timeFormat)
}

// canonical puts the letters of s in the order of all, refusing another.
func canonical(s, all string) (string, error) {
	seen := make([]bool, len(all))
	for _, r := range s {
		i := strings.IndexRune(all, r)
		if i < 0 {
			return "", fmt.Errorf("sastest: %q is not one of %q", r, all)
		}
		seen[i] = true
	}
	return flags(seen, all), nil
}

// flags are the letters of all whose flag is set, in order.
func flags(set []bool, all string) string {
	var b strings.Builder
	for i, on := range set {
		if on {
			b.WriteByte(all[i])
		}
	}
	return b.String()
}
