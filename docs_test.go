package azq_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/azqlib/azq/envelope"
	"github.com/azqlib/azq/faults"
)

// docFiles are the Markdown files a reader is sent to: README.md and every
// file under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append(files, more...)
}

// TestDocGoSnippetsAreExcerptsOfGoFiles checks that every Go snippet of
// README.md and docs/*.md is an excerpt of a Go file of the module (an
// Example, a test or a program under examples/), which go vet and go test
// compile: each snippet's lines, trimmed, must appear in the same order in
// one such file. A line that is only "// ..." stands for lines left out.
// It does not compile the snippets themselves.
func TestDocGoSnippetsAreExcerptsOfGoFiles(t *testing.T) {
	sources := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasPrefix(d.Name(), "_") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if strings.Contains(string(b), "//go:build ignore") {
				return nil // never compiled
			}
			sources[path] = trimmedLines(string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, doc := range docFiles(t) {
		md, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		snippets := goSnippets(string(md))
		total += len(snippets)
		for _, s := range snippets {
			if where := findInOrder(s.lines, sources); where == "" {
				t.Errorf("%s line %d: this Go snippet is not in any Go file of the module (in order, line by line):\n%s",
					doc, s.line, strings.Join(s.lines, "\n"))
			}
		}
	}
	if total == 0 {
		t.Fatal("no Go snippets found in README.md or docs/*.md")
	}
}

// TestDocLinksResolve checks every relative link and image of README.md and
// docs/*.md: the file or directory it names exists, and a #fragment names a
// heading of the Markdown file it points into, as GitHub derives anchors.
// Links to other sites are not followed.
func TestDocLinksResolve(t *testing.T) {
	checked := 0
	for _, doc := range docFiles(t) {
		md, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(md)) {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			checked++
			if err := resolveLink(doc, l.target); err != nil {
				t.Errorf("%s line %d: link %q: %v", doc, l.line, l.target, err)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found")
	}
}

// TestDocJSONExamples checks the JSON that the docs show as input to azq:
// docs/faults.md's rules file is one that azqd's -faults accepts
// (faults.Parse, which refuses unknown fields), and docs/pubsub.md's
// envelope is one that the drivers read, with the metadata and body it
// shows.
func TestDocJSONExamples(t *testing.T) {
	rules := jsonBlocks(t, "docs/faults.md")
	if len(rules) != 1 {
		t.Fatalf("docs/faults.md has %d JSON blocks, want the rules file alone", len(rules))
	}
	cfg, err := faults.Parse([]byte(rules[0]))
	if err != nil {
		t.Errorf("docs/faults.md's rules file: %v", err)
	} else if len(cfg.Rules) != 3 || cfg.Throttle == nil {
		t.Errorf("docs/faults.md's rules file gave %d rules and throttle %v, want 3 rules and a throttle", len(cfg.Rules), cfg.Throttle)
	}
	envs := jsonBlocks(t, "docs/pubsub.md")
	if len(envs) != 1 {
		t.Fatalf("docs/pubsub.md has %d JSON blocks, want the envelope alone", len(envs))
	}
	env, err := envelope.Decode(strings.TrimSpace(envs[0]))
	if err != nil {
		t.Fatalf("docs/pubsub.md's envelope: %v", err)
	}
	if env.Metadata["type"] != "order.created" || string(env.Body) != `{"total":9.5}` {
		t.Errorf("docs/pubsub.md's envelope decodes to metadata %v, body %q", env.Metadata, env.Body)
	}
}

// jsonBlocks returns the bodies of the ```json blocks of a Markdown file.
func jsonBlocks(t *testing.T, file string) []string {
	t.Helper()
	md, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(md), -1) {
		out = append(out, m[1])
	}
	return out
}

type link struct {
	line   int
	target string
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
)

// markdownLinks returns the targets of inline links, images and link
// definitions outside code blocks and code spans.
func markdownLinks(md string) []link {
	var out []link
	fenced := false
	for i, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if m := refLink.FindStringSubmatch(l); m != nil {
			out = append(out, link{i + 1, m[1]})
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(l, ""), -1) {
			out = append(out, link{i + 1, m[1]})
		}
	}
	return out
}

func resolveLink(from, target string) error {
	path, frag, _ := strings.Cut(target, "#")
	file := from
	if path != "" {
		file = filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
		if _, err := os.Stat(file); err != nil {
			return err
		}
	}
	if frag == "" {
		return nil
	}
	if !strings.HasSuffix(file, ".md") {
		return fmt.Errorf("a fragment on a file that is not Markdown")
	}
	md, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	for _, a := range headingAnchors(string(md)) {
		if a == frag {
			return nil
		}
	}
	return fmt.Errorf("%s has no heading with anchor #%s", file, frag)
}

// headingAnchors returns the anchors GitHub gives a Markdown file's
// headings: lower case, code marks and punctuation other than '-' and '_'
// dropped, spaces made '-', and "-1", "-2", ... added to repeats.
func headingAnchors(md string) []string {
	var out []string
	seen := map[string]int{}
	fenced := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(l, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
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
