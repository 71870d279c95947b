package azq

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/azqlib/azq"

// imports returns the import paths of the non-test Go files in dir, by
// file name.
func imports(t *testing.T, dir string) map[string][]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(name)
		out[base] = []string{}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			out[base] = append(out[base], p)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return out
}

// TestDurableSeam: only the durable mode's face (durable*.go) knows the
// log; the queue's semantics reach it through the journal alone.
func TestDurableSeam(t *testing.T) {
	log := []string{modulePath + "/internal/durable", modulePath + "/internal/wal"}
	face := 0
	for file, paths := range imports(t, ".") {
		isFace := strings.HasPrefix(file, "durable")
		for _, p := range paths {
			for _, l := range log {
				if p == l && !isFace {
					t.Errorf("%s imports %s; only the durable face (durable*.go) may", file, p)
				}
			}
			if p == log[0] {
				face++
			}
		}
	}
	if face == 0 {
		t.Error("no file of the durable face imports internal/durable: the check looks at the wrong files")
	}
}

// TestDurableDoesNotImportTheQueue: internal/durable, and what it imports
// of this module, never import the root package, so that the seam stays
// one-way.
func TestDurableDoesNotImportTheQueue(t *testing.T) {
	seen := map[string]bool{}
	var walk func(pkg string, via []string)
	walk = func(pkg string, via []string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		dir := filepath.FromSlash(strings.TrimPrefix(pkg, modulePath+"/"))
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		for _, paths := range imports(t, dir) {
			for _, p := range paths {
				switch {
				case p == modulePath:
					t.Errorf("%s imports the root package (via %s)", pkg, strings.Join(append(via, pkg), " → "))
				case strings.HasPrefix(p, modulePath+"/"):
					walk(p, append(via, pkg))
				}
			}
		}
	}
	walk(modulePath+"/internal/durable", nil)
	if !seen[modulePath+"/internal/wal"] {
		t.Error("internal/wal is not among internal/durable's imports: the check looks at the wrong files")
	}
}
