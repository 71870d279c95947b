package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/azqlib/azq/internal/longrun"
)

// A module whose package has a test that passes, long runs, tests
// skipped for other reasons, and a test that fails when asked to.
var fixture = map[string]string{
	"go.mod": "module example.com/fixture\n\ngo 1.23\n",
	"a/a_test.go": `package a

import (
	"os"
	"testing"
)

func TestPasses(t *testing.T) {}

func TestLong(t *testing.T) {
	if os.Getenv("` + longrun.Env + `") != "1" {
		t.Skip("` + longrun.Reason + `")
	}
	t.Log("the long run ran")
}

func TestTable(t *testing.T) {
	t.Run("short", func(t *testing.T) {})
	t.Run("long", func(t *testing.T) {
		if os.Getenv("` + longrun.Env + `") != "1" {
			t.Skip("` + longrun.Reason + `")
		}
	})
}

func TestNotHere(t *testing.T) { t.Skip("needs something else") }

func TestSkippedSubtest(t *testing.T) {
	t.Run("inner", func(t *testing.T) {
		t.Log("a line before the reason")
		t.Skip("needs something else")
	})
}

func TestSkipsOnTwoLines(t *testing.T) { t.Skip("needs a tool:\ninstall it") }

func TestFailsOnRequest(t *testing.T) {
	if os.Getenv("FIXTURE_FAIL") == "1" {
		t.Error("failed on request")
	}
}
`,
	"b/b.go": "package b\n",
}

// fixtureEnv runs the fixture's tests afresh, without go vet, which
// these tests do not need, and with the long runs off whatever the
// environment says.
var fixtureEnv = []string{longrun.Env + "=", "GOFLAGS=-count=1 -vet=off"}

// sharedFixture is one copy of the fixture for the tests that do not
// change it, so that go test compiles it once.
var sharedFixture string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "testrun")
	if err == nil {
		err = writeFixture(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedFixture = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func writeFixture(dir string) error {
	for name, text := range fixture {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func TestRunSaysWhatItLeftOut(t *testing.T) {
	t.Parallel()
	dir := sharedFixture
	var out bytes.Buffer
	if status := run(context.Background(), &out, options{pkgs: []string{"./..."}, dir: dir, env: fixtureEnv}); status != 0 {
		t.Fatalf("status %d:\n%s", status, &out)
	}
	got := out.String()
	for _, want := range []string{
		"testrun: 2 packages, each one's line printed as it ends\n",
		"/2] ok  \texample.com/fixture/a\t",
		"/2] ?   \texample.com/fixture/b\t[no test files]",
		"skipped, each saying why (-v shows their output): 3 tests\n" +
			"  needs a tool: install it\n" +
			"    example.com/fixture/a: TestSkipsOnTwoLines\n" +
			"  needs something else\n" +
			"    example.com/fixture/a: TestNotHere TestSkippedSubtest/inner\n",
		"left to the long run (go run ./internal/testrun -long, or AZQ_LONG=1 go test): 2 tests in 1 packages\n" +
			"  example.com/fixture/a: TestLong TestTable\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(got, "[1/2] ") || !strings.Contains(got, "[2/2] ") {
		t.Errorf("the packages' lines are not numbered 1 and 2 of 2:\n%s", got)
	}
	if strings.Contains(got, "the long run ran") || strings.Contains(got, "a line before the reason") {
		t.Errorf("output has a skipped test's output, or a long run ran:\n%s", got)
	}
}

func TestRunCountRunsEachTestNTimes(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	o := options{verbose: true, count: 3, pkgs: []string{"./a"}, dir: sharedFixture, env: fixtureEnv}
	if status := run(context.Background(), &out, o); status != 0 {
		t.Fatalf("status %d:\n%s", status, &out)
	}
	if n := strings.Count(out.String(), "--- PASS: TestPasses "); n != 3 {
		t.Errorf("TestPasses passed %d times with count 3, want 3:\n%s", n, &out)
	}
}

func TestSkipReason(t *testing.T) {
	for _, c := range []struct {
		name   string
		output []string
		want   string
	}{
		{"t.Skip", []string{"=== RUN   TestX\n", "    x_test.go:9: needs gcc\n", "--- SKIP: TestX (0.00s)\n"}, "needs gcc"},
		{"logs before", []string{"=== RUN   TestX\n", "    x_test.go:8: started\n", "    x_test.go:9: needs gcc\n", "--- SKIP: TestX (0.00s)\n"}, "needs gcc"},
		{"two lines", []string{"    x_test.go:9: needs gcc:\n", "        apt-get install gcc\n", "--- SKIP: TestX (0.00s)\n"}, "needs gcc: apt-get install gcc"},
		{"subtest", []string{"=== RUN   TestX/y\n", "        x_test.go:9: needs gcc\n", "    --- SKIP: TestX/y (0.00s)\n"}, "needs gcc"},
		{"a colon in the reason", []string{"    x_test.go:9: busybox: exec: not found\n"}, "busybox: exec: not found"},
		{"t.SkipNow", []string{"=== RUN   TestX\n", "--- SKIP: TestX (0.00s)\n"}, "(no reason given)"},
	} {
		if got := skipReason(c.output); got != c.want {
			t.Errorf("%s: skipReason = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestRunLongRunsTheLongRuns(t *testing.T) {
	t.Parallel()
	dir := sharedFixture
	var out bytes.Buffer
	if status := run(context.Background(), &out, options{long: true, verbose: true, pkgs: []string{"./..."}, dir: dir, env: fixtureEnv}); status != 0 {
		t.Fatalf("status %d:\n%s", status, &out)
	}
	got := out.String()
	_, second, ok := strings.Cut(got, "the long runs, with AZQ_LONG=1: 2 tests in 1 packages\n")
	if !ok {
		t.Fatalf("no long runs announced:\n%s", got)
	}
	if !strings.Contains(second, "the long run ran") || !strings.Contains(second, "--- PASS: TestTable/long") {
		t.Errorf("the long runs did not run:\n%s", second)
	}
	if strings.Contains(second, "TestPasses") || strings.Contains(second, "TestNotHere") {
		t.Errorf("the long run ran tests that are not long runs:\n%s", second)
	}
}

func TestRunPrintsFailures(t *testing.T) {
	t.Parallel()
	dir := sharedFixture
	var out bytes.Buffer
	if status := run(context.Background(), &out, options{long: true, pkgs: []string{"./..."}, dir: dir, env: append(fixtureEnv, "FIXTURE_FAIL=1")}); status != 1 {
		t.Fatalf("status %d, want 1:\n%s", status, &out)
	}
	got := out.String()
	for _, want := range []string{"--- FAIL: TestFailsOnRequest", "failed on request", "FAIL\texample.com/fixture/a\t", "FAIL: 1 packages failed, 1 tests failed"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN") {
		t.Errorf("output has go test -v's lines:\n%s", got)
	}
}

func TestRunReportsABuildFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := writeFixture(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b", "b.go"), []byte("package b\n\nfunc f() { undefined() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if status := run(context.Background(), &out, options{pkgs: []string{"./..."}, dir: dir, env: fixtureEnv}); status != 1 {
		t.Fatalf("status %d, want 1:\n%s", status, &out)
	}
}

// TestReportNumbersThePackages: each package's line is numbered as it
// ends, of the total go list counted, and without a total when there is
// none or go test ran more packages than counted.
func TestReportNumbersThePackages(t *testing.T) {
	for _, c := range []struct {
		total int
		want  string
	}{
		{3, "[1/3] ok  \tp1\t0.1s\n[2/3] FAIL\tp2\t0.1s\n[3/3] ?   \tp3\t[no test files]\n"},
		{12, "[ 1/12] ok  \tp1\t0.1s\n[ 2/12] FAIL\tp2\t0.1s\n[ 3/12] ?   \tp3\t[no test files]\n"},
		{0, "[1] ok  \tp1\t0.1s\n[2] FAIL\tp2\t0.1s\n[3] ?   \tp3\t[no test files]\n"},
		{2, "[1/2] ok  \tp1\t0.1s\n[2/2] FAIL\tp2\t0.1s\n[3] ?   \tp3\t[no test files]\n"},
	} {
		var out bytes.Buffer
		r := newReport(&out, false, c.total)
		for _, e := range []event{
			{Action: "output", Package: "p1", Output: "PASS\n"},
			{Action: "output", Package: "p1", Output: "ok  \tp1\t0.1s\n"},
			{Action: "pass", Package: "p1"},
			{Action: "output", Package: "p2", Output: "FAIL\tp2\t0.1s\n"},
			{Action: "fail", Package: "p2"},
			{Action: "output", Package: "p3", Output: "?   \tp3\t[no test files]\n"},
			{Action: "skip", Package: "p3"},
		} {
			r.event(e)
		}
		if out.String() != c.want {
			t.Errorf("total %d: printed\n%q\nwant\n%q", c.total, out.String(), c.want)
		}
	}
}
