package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/azqlib/azq/server"
)

// A server on loopback answers only the Host names of this machine: a
// request that names another, as a page under its own name resolving to
// 127.0.0.1 would send, is refused before its credentials are looked at.
func ExampleOptions_checkHost() {
	srv := server.New(server.Options{CheckHost: true, AllowedHosts: []string{"queues.test"}, AllowAnonymous: true})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Close()

	for _, host := range []string{"127.0.0.1", "queues.test", "rebind.evil.example"} {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+"/devstoreaccount1?comp=list", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		code := resp.Header.Get("x-ms-error-code")
		if code == "" {
			code = "-"
		}
		fmt.Println(req.Host, resp.Status, code)
	}
	// Output:
	// 127.0.0.1 200 OK -
	// queues.test 200 OK -
	// rebind.evil.example 421 Misdirected Request HostNotAllowed
}
