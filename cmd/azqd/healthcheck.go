package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/azqlib/azq/server/admin"
)

// healthcheckTimeout bounds azqd -healthcheck: a container engine runs the
// check every few seconds and must not wait on a stuck one for long (its
// own default timeout is 30 s). It is below the image's HEALTHCHECK
// --timeout (4 s), so that a check of an azqd that does not answer ends
// with its reason in the container's health log, not killed by the engine
// without one.
const healthcheckTimeout = 2 * time.Second

// healthcheck is azqd -healthcheck URL, the health check of the scratch
// image, which has no curl: it asks URL (azqd's GET /_azq/health) and
// returns nil if azqd answered 200 with status "ok", an error otherwise,
// so that the process exits 0 or 1 as a container engine's HEALTHCHECK
// reads it (2 is reserved there, so no mistake here exits 2). It sends
// the URL's host as the Host header, as any client does: an IP address or
// localhost, which the admin endpoints' host guard lets through. An https
// URL is not verified: the check talks to azqd in its own container,
// whose certificate names the host clients use, and sends no secret.
func healthcheck(ctx context.Context, rawURL string, stdout io.Writer) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("-healthcheck %q: want azqd's health URL, such as http://127.0.0.1:10001/_azq/health", rawURL)
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	client := &http.Client{
		Transport: &http.Transport{
			Proxy:             nil, // the check is about this azqd, never a proxy's answer
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("unhealthy: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("unhealthy: %s did not answer within %v", u, healthcheckTimeout)
		}
		return fmt.Errorf("unhealthy: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("unhealthy: reading the answer of %s: %w", u, err)
	}
	text := strings.TrimSpace(string(body))
	var h admin.Health
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &h) != nil || h.Status != "ok" {
		return fmt.Errorf("unhealthy: %s answered %s: %.300s", u, resp.Status, text)
	}
	fmt.Fprintln(stdout, "azqd: healthy:", text)
	return nil
}
