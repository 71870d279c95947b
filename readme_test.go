package azq_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeSnippetsAreCompiled holds the README to its promise that every
// Go snippet in it comes from code that compiles and runs: each snippet's
// lines, trimmed, must appear in the same order in one Go file of the
// module (an Example, a test or a program under examples/). A line that is
// only "// ..." stands for lines left out.
func TestReadmeSnippetsAreCompiled(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string][]string{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sources[path] = trimmedLines(string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	snippets := goSnippets(string(readme))
	if len(snippets) == 0 {
		t.Fatal("no Go snippets found in README.md")
	}
	for _, s := range snippets {
		if where := findInOrder(s.lines, sources); where == "" {
			t.Errorf("README.md line %d: this Go snippet is not in any Go file of the module (in order, line by line):\n%s",
				s.line, strings.Join(s.lines, "\n"))
		}
	}
}

type snippet struct {
	line  int // of the opening fence
	lines []string
}

// goSnippets returns the trimmed, non-blank lines of every ```go block.
func goSnippets(md string) []snippet {
	var out []snippet
	var cur *snippet
	for i, l := range strings.Split(md, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(l) == "```go":
			cur = &snippet{line: i + 1}
		case cur != nil && strings.TrimSpace(l) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			if t := strings.TrimSpace(l); t != "" {
				cur.lines = append(cur.lines, t)
			}
		}
	}
	return out
}

func trimmedLines(src string) []string {
	var out []string
	for _, l := range strings.Split(src, "\n") {
		if t := strings.TrimSpace(l); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// findInOrder returns the name of a file holding want's lines in order,
// with any lines between them where want has "// ...", and consecutively
// elsewhere.
func findInOrder(want []string, sources map[string][]string) string {
	for path, have := range sources {
		for start := range have {
			if matchFrom(want, have[start:]) {
				return path
			}
		}
	}
	return ""
}

func matchFrom(want, have []string) bool {
	j := 0
	gap := false
	for _, w := range want {
		if w == "// ..." {
			gap = true
			continue
		}
		for {
			if j >= len(have) {
				return false
			}
			if have[j] == w {
				j++
				break
			}
			if !gap {
				return false
			}
			j++
		}
		gap = false
	}
	return true
}
