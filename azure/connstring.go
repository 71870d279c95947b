package azure

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/azqlib/azq/internal/devstore"
)

// Azure's shortcut for the storage emulator's development account, and
// the one setting that may go with it.
const (
	useDevelopmentStorage      = "UseDevelopmentStorage"
	developmentStorageProxyURI = "DevelopmentStorageProxyUri"
)

// expandConnectionString returns connectionString as the Go SDK takes
// it: Azure's shortcut for the storage emulator, UseDevelopmentStorage=true,
// which the SDK refuses, becomes the full connection string it stands for,
// devstoreaccount1 with its well-known key at
// http://127.0.0.1:10001/devstoreaccount1; any other string is returned
// as it is, for the SDK to parse.
//
// As Azure's own parsers do, the shortcut takes one other setting,
// DevelopmentStorageProxyUri: its scheme and host replace http and
// 127.0.0.1, while the port stays the queue service's, 10001, and the
// path the account's. Any other setting beside the shortcut, or a value
// other than true, is an error rather than a string the SDK would read
// differently. Setting names and the value true are matched without
// regard to case.
func expandConnectionString(connectionString string) (string, error) {
	parts := strings.Split(connectionString, ";")
	shortcut := false
	for _, part := range parts {
		name, _, _ := strings.Cut(part, "=")
		shortcut = shortcut || strings.EqualFold(strings.TrimSpace(name), useDevelopmentStorage)
	}
	if !shortcut {
		return connectionString, nil // the SDK's to parse
	}
	var use, proxy *string
	for _, part := range parts {
		if strings.TrimSpace(part) == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		var slot **string
		switch {
		case !ok:
			return "", fmt.Errorf("azure: connection string: %q is not name=value", part)
		case strings.EqualFold(name, useDevelopmentStorage):
			slot = &use
		case strings.EqualFold(name, developmentStorageProxyURI):
			slot = &proxy
		default:
			return "", fmt.Errorf("azure: connection string: %s=true takes no other setting than %s, and %s is one; "+
				"for another account or endpoint, give the full connection string (AccountName, AccountKey, QueueEndpoint)",
				useDevelopmentStorage, developmentStorageProxyURI, name)
		}
		if *slot != nil {
			return "", fmt.Errorf("azure: connection string: %s is given twice", name)
		}
		*slot = &value
	}
	if !strings.EqualFold(strings.TrimSpace(*use), "true") {
		return "", fmt.Errorf("azure: connection string: %s=%s: the only value is true", useDevelopmentStorage, *use)
	}
	scheme, host := "http", devstore.Host
	if proxy != nil {
		u, err := url.Parse(strings.TrimSpace(*proxy))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return "", errors.New("azure: connection string: " + developmentStorageProxyURI + "=" + *proxy +
				": want an absolute http or https URI, such as http://ipv4.fiddler")
		}
		scheme, host = u.Scheme, u.Hostname()
	}
	return "DefaultEndpointsProtocol=" + scheme + ";AccountName=" + devstore.AccountName +
		";AccountKey=" + devstore.AccountKey + ";QueueEndpoint=" + devstore.QueueEndpoint(scheme, host) + ";", nil
}
