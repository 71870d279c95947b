package deps

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// A direction is a rule of the import graph: pkg links none of banned. An
// entry that ends in "/" bans every package under that path; any other
// bans that package alone.
type direction struct {
	pkg    string
	banned []string
	why    string
}

var directions = []direction{
	{"github.com/azqlib/azq", []string{"net/http"},
		"the queue and its contract are for any program; HTTP is the server's"},
	{"github.com/azqlib/azq/server", []string{"github.com/prometheus/", "github.com/Azure/"},
		"the REST server reports what it answers, and package metrics counts that for Prometheus; the Azure SDK is for its clients"},
	{"github.com/azqlib/azq/queuetest", []string{"github.com/Azure/", "github.com/prometheus/", "github.com/golang-jwt/"},
		"a back end's author runs the contract suites without the Azure SDK, metrics or tokens"},
	{"github.com/azqlib/azq/azqtest", []string{"github.com/prometheus/"},
		"a test server needs no metrics stack; a test that wants one imports package metrics"},
}

// listed is what go list says of one package.
type listed struct {
	ImportPath string
	Imports    []string
	Error      *struct{ Err string }
}

// TestImportDirections checks every direction with one go list of the
// packages and what they import, and names the chain of imports that
// breaks a rule.
func TestImportDirections(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" {
			t.Fatalf("CI=%s, and the go command is not on PATH: %v", ci, err)
		}
		t.Skipf("the go command is not on PATH: %v", err)
	}
	args := []string{"list", "-e", "-deps", "-json=ImportPath,Imports,Error"}
	for _, d := range directions {
		args = append(args, d.pkg)
	}
	cmd := exec.Command(goTool, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	imports := map[string][]string{}
	broken := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list's output: %v", err)
		}
		imports[p.ImportPath] = p.Imports
		if p.Error != nil {
			broken[p.ImportPath] = p.Error.Err
		}
	}
	for _, d := range directions {
		if msg, ok := broken[d.pkg]; ok {
			t.Errorf("%s: %s", d.pkg, msg)
			continue
		}
		if _, ok := imports[d.pkg]; !ok {
			t.Errorf("go list did not list %s", d.pkg)
			continue
		}
		for _, chain := range bannedChains(imports, d.pkg, d.banned) {
			t.Errorf("%s links %s (%s), which it must not: %s", d.pkg, chain[len(chain)-1], strings.Join(chain, " → "), d.why)
		}
	}
}

// bannedChains returns, for each banned package that from links, the
// shortest chain of imports from from to it (the first found, for a
// banned prefix).
func bannedChains(imports map[string][]string, from string, banned []string) [][]string {
	// A breadth-first walk, keeping each package's importer.
	via := map[string]string{from: ""}
	queue := []string{from}
	var found []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range imports[p] {
			if _, seen := via[q]; seen {
				continue
			}
			via[q] = p
			queue = append(queue, q)
			if isBanned(q, banned) {
				found = append(found, q)
			}
		}
	}
	var chains [][]string
	reported := map[string]bool{}
	for _, f := range found {
		rule := ruleOf(f, banned)
		if reported[rule] {
			continue
		}
		reported[rule] = true
		var chain []string
		for p := f; p != ""; p = via[p] {
			chain = append(chain, p)
		}
		slices.Reverse(chain)
		chains = append(chains, chain)
	}
	return chains
}

func isBanned(pkg string, banned []string) bool { return ruleOf(pkg, banned) != "" }

// ruleOf returns the entry of banned that bans pkg, or "".
func ruleOf(pkg string, banned []string) string {
	for _, b := range banned {
		if pkg == b || strings.HasSuffix(b, "/") && strings.HasPrefix(pkg, b) {
			return b
		}
	}
	return ""
}
