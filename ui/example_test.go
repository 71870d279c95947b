package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/ui"
)

// A test server, or any program that holds azq Services, can show them
// in a browser by mounting the UI on its mux.
func ExampleNew() {
	svc := azq.NewService()
	jobs, _, _ := svc.CreateQueue(context.Background(), "jobs", nil)
	jobs.Put(context.Background(), "resize image 7", nil)

	mux := http.NewServeMux()
	mux.Handle("/queues/", ui.New(ui.Options{
		Prefix:   "/queues",
		Accounts: []ui.Account{{Name: "local", Service: svc}},
	}))
	hs := httptest.NewServer(mux)
	defer hs.Close()

	resp, err := http.Get(hs.URL + "/queues/a/local/jobs")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, strings.Contains(string(page), "resize image 7"))
	// Output: 200 OK true
}
