package deps

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// modulePath is the root module's path, which the package map leaves off.
const modulePath = "github.com/azqlib/azq"

// mapRow is one row of docs/internals.md's package map.
type mapRow struct {
	layer   int
	imports []string
	line    int
}

// readPackageMap reads the table between the package map's markers in
// docs/internals.md: package, layer and imports, short names as written.
func readPackageMap(t *testing.T) map[string]mapRow {
	t.Helper()
	f, err := os.Open("../../docs/internals.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]mapRow{}
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case l == "<!-- package map: begin -->":
			in = true
			continue
		case l == "<!-- package map: end -->":
			return rows
		case !in || !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| layer") || strings.HasPrefix(l, "| ---"):
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("docs/internals.md:%d: %q is not a row of layer, package and imports", n, l)
		}
		layer, err := strconv.Atoi(strings.TrimSpace(cells[0]))
		if err != nil {
			t.Fatalf("docs/internals.md:%d: layer %q: %v", n, cells[0], err)
		}
		pkg := strings.Trim(strings.TrimSpace(cells[1]), "`")
		var imports []string
		if s := strings.TrimSpace(cells[2]); s != "—" {
			for _, i := range strings.Split(s, ",") {
				imports = append(imports, strings.Trim(strings.TrimSpace(i), "`"))
			}
		}
		if _, dup := rows[pkg]; dup {
			t.Fatalf("docs/internals.md:%d: %s is in the map twice", n, pkg)
		}
		rows[pkg] = mapRow{layer, imports, n}
	}
	t.Fatal("docs/internals.md has no package map between its markers")
	return nil
}

// shortName is a package's name in the map: its import path without the
// module's, and azq for the root package.
func shortName(path string) string {
	if path == modulePath {
		return "azq"
	}
	return strings.TrimPrefix(path, modulePath+"/")
}

// TestPackageMap keeps docs/internals.md's package map what go list says
// of the workspace's packages: every package there, each with exactly the
// azq packages it imports, and its layer one above the highest of them,
// so that every import in the table points down.
func TestPackageMap(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" {
			t.Fatalf("CI=%s, and the go command is not on PATH: %v", ci, err)
		}
		t.Skipf("the go command is not on PATH: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-e", "-json=ImportPath,Imports", modulePath+"/...")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	listedImports := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list's output: %v", err)
		}
		var own []string
		for _, i := range p.Imports {
			if i == modulePath || strings.HasPrefix(i, modulePath+"/") {
				own = append(own, shortName(i))
			}
		}
		slices.Sort(own)
		listedImports[shortName(p.ImportPath)] = own
	}

	rows := readPackageMap(t)
	for pkg, imports := range listedImports {
		row, ok := rows[pkg]
		if !ok {
			t.Errorf("docs/internals.md's package map has no row for %s (imports: %s)", pkg, strings.Join(imports, ", "))
			continue
		}
		if got := slices.Sorted(slices.Values(row.imports)); !slices.Equal(got, imports) {
			t.Errorf("docs/internals.md:%d: %s imports %v, the map says %v", row.line, pkg, imports, got)
		}
		want := 0
		for _, i := range imports {
			if r, ok := rows[i]; ok {
				want = max(want, r.layer+1)
			}
		}
		if row.layer != want {
			t.Errorf("docs/internals.md:%d: %s is at layer %d, want %d (one above the highest it imports)", row.line, pkg, row.layer, want)
		}
	}
	for pkg, row := range rows {
		if _, ok := listedImports[pkg]; !ok {
			t.Errorf("docs/internals.md:%d: the package map names %s, which go list does not", row.line, pkg)
		}
	}
}
