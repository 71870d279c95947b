package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/azqlib/azq/internal/longrun"
)

// TestTidy runs "release tidy" on a copy of the working tree: every
// module is tidy already, so nothing changes; and with a requirement
// dropped from cmd/azqd/go.mod, which has no replace of the root module,
// tidy puts it back, and leaves the go.mod without a replace. A long run:
// go mod tidy in every module, twice.
func TestTidy(t *testing.T) {
	longrun.Skip(t)
	setGitIdentity(t)
	dir := copyClone(t)
	if out, err := release("tidy", "-repo", dir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if st := runIn(t, dir, nil, "git", "status", "--porcelain"); st != "" {
		t.Errorf("tidy changed a tidy working tree:\n%s\n%s", st, runIn(t, dir, nil, "git", "diff"))
	}

	gomod := filepath.Join(dir, "cmd", "azqd", "go.mod")
	runIn(t, filepath.Dir(gomod), nil, "go", "mod", "edit", "-droprequire=github.com/benbjohnson/clock")
	if out, err := release("tidy", "-repo", dir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	data, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "\tgithub.com/benbjohnson/clock ") || strings.Contains(string(data), "replace") {
		t.Errorf("cmd/azqd/go.mod after tidy:\n%s", data)
	}
	if st := runIn(t, dir, nil, "git", "status", "--porcelain"); st != "" {
		t.Errorf("tidy left changes:\n%s\n%s", st, runIn(t, dir, nil, "git", "diff"))
	}
}
