package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

// testedOnTheirOwn are the modules of go.work whose tests .ci/run runs in
// steps of their own rather than through testrun: the drivers and the
// PostgreSQL back end (with a PostgreSQL server, and their long runs) and
// the image builder (on the image it builds first).
var testedOnTheirOwn = []string{"gocloud", "watermill", "postgres", "cmd/azqd/image"}

// TestEveryModuleIsTested: each module go.work lists has its tests run by
// the README's test command (defaultPackages) or by a step of .ci/run of
// its own, so that a package carved out into a module of its own, which
// ./... no longer reaches, keeps its tests in CI.
func TestEveryModuleIsTested(t *testing.T) {
	out, err := exec.Command("go", "work", "edit", "-json", "../../go.work").Output()
	if err != nil {
		t.Fatalf("go work edit -json: %v", err)
	}
	var work struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal(out, &work); err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range work.Use {
		dir := path.Clean(u.DiskPath)
		pattern := "./" + dir + "/..."
		if dir == "." {
			pattern = "./..."
		}
		switch {
		case slices.Contains(defaultPackages, pattern):
		case slices.Contains(testedOnTheirOwn, dir):
			if !strings.Contains(string(ci), dir) {
				t.Errorf("module %s is to be tested by a step of .ci/run of its own, which does not name it", dir)
			}
		default:
			t.Errorf("no one runs the tests of module %s: add %s to defaultPackages (internal/testrun/main.go), or test it in .ci/run and list it in testedOnTheirOwn", dir, pattern)
		}
	}
}
