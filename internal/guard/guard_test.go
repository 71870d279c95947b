package guard

import (
	"net/http/httptest"
	"testing"
)

func TestAllowedHosts(t *testing.T) {
	h := NewHosts("azqd", "Queue.Example.")
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"127.0.0.1:10001", true},
		{"127.0.0.1", true},
		{"[::1]:10001", true},
		{"[fe80::1%25eth0]:10001", true},
		{"192.168.1.20:10001", true},
		{"localhost:10001", true},
		{"LOCALHOST.:10001", true},
		{"devstoreaccount1.localhost:10001", true},
		{"azqd:10001", true},
		{"queue.example", true},
		{"", true},
		{"rebind.evil.example:10001", false},
		{"localhost.evil.example", false},
		{"127.0.0.1.nip.io:10001", false},
		{"azqd.evil.example", false},
	} {
		if got := h.Allowed(tc.host); got != tc.want {
			t.Errorf("Allowed(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	h := NewHosts()
	for _, tc := range []struct {
		name   string
		method string
		host   string
		hdr    map[string]string
		status int // 0: allowed
	}{
		{"program's POST", "POST", "127.0.0.1:10001", nil, 0},
		{"same-origin POST", "POST", "127.0.0.1:10001", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:10001"}, 0},
		{"typed URL", "POST", "127.0.0.1:10001", map[string]string{"Sec-Fetch-Site": "none"}, 0},
		{"cross-site form", "POST", "127.0.0.1:10001", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, 403},
		{"same-site other port", "POST", "127.0.0.1:10001", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:3000"}, 403},
		{"Origin only, other", "POST", "127.0.0.1:10001", map[string]string{"Origin": "https://evil.example"}, 403},
		{"Origin only, null", "POST", "127.0.0.1:10001", map[string]string{"Origin": "null"}, 403},
		{"Origin only, same", "POST", "127.0.0.1:10001", map[string]string{"Origin": "http://127.0.0.1:10001"}, 0},
		{"cross-site form, text/plain", "POST", "127.0.0.1:10001", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}, 403},
		{"cross-site with JSON (preflighted)", "POST", "127.0.0.1:10001", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}, 0},
		{"cross-site with X-Requested-With", "DELETE", "127.0.0.1:10001", map[string]string{"Origin": "https://evil.example", "X-Requested-With": "x"}, 0},
		{"cross-site GET reads", "GET", "127.0.0.1:10001", map[string]string{"Sec-Fetch-Site": "cross-site"}, 0},
		{"rebinding GET", "GET", "rebind.evil.example:10001", map[string]string{"Sec-Fetch-Site": "same-origin"}, 421},
		{"rebinding POST", "POST", "rebind.evil.example:10001", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://rebind.evil.example:10001"}, 421},
	} {
		r := httptest.NewRequest(tc.method, "http://x/_azq/reset", nil)
		r.Host = tc.host
		for k, v := range tc.hdr {
			r.Header.Set(k, v)
		}
		got := h.Check(r)
		switch {
		case tc.status == 0 && got != nil:
			t.Errorf("%s: refused %+v", tc.name, got)
		case tc.status != 0 && (got == nil || got.Status != tc.status):
			t.Errorf("%s: %+v, want %d", tc.name, got, tc.status)
		}
	}
}
