package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
)

// TestRunAgainstTheServer runs the program against azq's REST server over
// loopback, as it runs against azqd.
func TestRunAgainstTheServer(t *testing.T) {
	srv := azqtest.NewServer(t)
	var out bytes.Buffer
	if err := run(context.Background(), srv.ConnectionString, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "got: hello\ndeleted\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if qs, _ := srv.Service.ListQueues(context.Background(), azq.ListQueuesOptions{}); len(qs.Queues) != 0 {
		t.Errorf("queues left behind: %v", qs.Queues)
	}
}

// TestDocStartsAzqdAsTheREADMEDoes: the package comment starts azqd as
// the built binary in the background, as the README does, so that the
// kill %1 that ends the session stops azqd itself and frees its port; go
// run ./cmd/azqd & would leave go run's child running.
func TestDocStartsAzqdAsTheREADMEDoes(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(src), "\npackage main")
	var commands []string
	for _, line := range strings.Split(doc, "\n") {
		if cmd, ok := strings.CutPrefix(line, "//\t"); ok {
			commands = append(commands, cmd)
		}
	}
	want := []string{"go build -o azqd ./cmd/azqd", "./azqd &", "go run ./examples/azqueue", "kill %1; wait"}
	if len(commands) < len(want) || !slices.Equal(commands[:len(want)], want) {
		t.Errorf("the package comment's commands are\n%s\nwant them to begin\n%s", strings.Join(commands, "\n"), strings.Join(want, "\n"))
	}
	for _, c := range commands {
		if strings.Contains(c, "go run ./cmd/azqd") {
			t.Errorf("the package comment runs azqd with go run, which kill %%1 does not stop: %q", c)
		}
	}
}
