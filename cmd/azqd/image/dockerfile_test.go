package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// instruction is one Dockerfile instruction, its continuation lines
// joined.
type instruction struct {
	name, args string
	stage      int // 0 for the first FROM's stage
}

// readDockerfile splits the repository's Dockerfile into instructions.
func readDockerfile(t *testing.T) []instruction {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	stage, cur := -1, ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur += s + " "
			continue
		}
		name, args, _ := strings.Cut(cur+line, " ")
		cur = ""
		name = strings.ToUpper(name)
		if name == "FROM" {
			stage++
		}
		out = append(out, instruction{name, strings.TrimSpace(args), stage})
	}
	return out
}

// TestDockerfileAgrees checks that the Dockerfile and the recipe the Go
// builder follows (recipe.go) say the same, instruction by instruction:
// the build stage's environment and RUN steps, verbatim, and the final
// stage's layers and configuration. The Dockerfile is then the recipe
// this package builds and the other tests run; what it cannot show is a
// container engine's reading of it, which no engine here performs.
func TestDockerfileAgrees(t *testing.T) {
	r := azqdImage
	var build, final []instruction
	for _, in := range readDockerfile(t) {
		switch in.stage {
		case 0:
			build = append(build, in)
		case 1:
			final = append(final, in)
		default:
			t.Fatalf("a third stage: %v", in)
		}
	}
	args := func(ins []instruction, name string) []string {
		var out []string
		for _, in := range ins {
			if in.name == name {
				out = append(out, in.args)
			}
		}
		return out
	}
	if got := args(build, "ENV"); !slices.Equal(got, r.buildEnv) {
		t.Errorf("build stage ENV %q, recipe %q", got, r.buildEnv)
	}
	wantRuns := []string{"cd cmd/azqd && go mod download", r.build, r.links, "mkdir " + r.out + r.dataDir}
	if got := args(build, "RUN"); !slices.Equal(got, wantRuns) {
		t.Errorf("build stage RUN %q,\nrecipe %q", got, wantRuns)
	}
	if got := args(final, "FROM"); !slices.Equal(got, []string{"scratch"}) {
		t.Errorf("final stage FROM %q, want scratch", got)
	}
	if got := args(final, "COPY"); !slices.Equal(got, []string{strings.TrimPrefix(copyBinaries, "COPY "), strings.TrimPrefix(copyData, "COPY ")}) {
		t.Errorf("final stage COPY %q, the builder's layers %q, %q", got, copyBinaries, copyData)
	}
	if !strings.Contains(copyData, "--chown="+r.dataOwner+" ") || !strings.HasSuffix(copyData, " /"+r.dataDir) {
		t.Errorf("%q does not give /%s to %s", copyData, r.dataDir, r.dataOwner)
	}
	if got := args(final, "ENV"); !slices.Equal(got, r.env) {
		t.Errorf("ENV %q, recipe %q", got, r.env)
	}
	if got := args(final, "USER"); !slices.Equal(got, []string{r.user}) {
		t.Errorf("USER %q, recipe %q", got, r.user)
	}
	if got := args(final, "EXPOSE"); !slices.Equal(got, r.exposedPorts) {
		t.Errorf("EXPOSE %q, recipe %q", got, r.exposedPorts)
	}
	labels := map[string]string{}
	for _, l := range args(final, "LABEL") {
		k, v, _ := strings.Cut(l, "=")
		uq, err := strconv.Unquote(v)
		if err != nil {
			t.Errorf("LABEL %s: want key=\"value\"", l)
		}
		labels[k] = uq
	}
	if !reflect.DeepEqual(labels, r.labels) {
		t.Errorf("LABEL %v, recipe %v", labels, r.labels)
	}
	var cmd []string
	if got := args(final, "CMD"); len(got) != 1 || json.Unmarshal([]byte(got[0]), &cmd) != nil || !slices.Equal(cmd, r.cmd) {
		t.Errorf("CMD %q, recipe %q", got, r.cmd)
	}
	hc := args(final, "HEALTHCHECK")
	if len(hc) != 1 {
		t.Fatalf("HEALTHCHECK %q, want one", hc)
	}
	got := v1.HealthConfig{}
	rest := hc[0]
	for strings.HasPrefix(rest, "--") {
		var opt string
		opt, rest, _ = strings.Cut(rest, " ")
		k, v, _ := strings.Cut(strings.TrimPrefix(opt, "--"), "=")
		var err error
		switch k {
		case "interval":
			got.Interval, err = time.ParseDuration(v)
		case "timeout":
			got.Timeout, err = time.ParseDuration(v)
		case "start-period":
			got.StartPeriod, err = time.ParseDuration(v)
		case "retries":
			got.Retries, err = strconv.Atoi(v)
		default:
			t.Errorf("HEALTHCHECK option %s: the recipe has none", opt)
		}
		if err != nil {
			t.Errorf("HEALTHCHECK %s: %v", opt, err)
		}
	}
	form, test, _ := strings.Cut(rest, " ")
	if err := json.Unmarshal([]byte(test), &got.Test); form != "CMD" || err != nil {
		t.Errorf("HEALTHCHECK %q: want CMD [exec form] (a scratch image has no shell)", rest)
	}
	got.Test = append([]string{"CMD"}, got.Test...)
	if !reflect.DeepEqual(got, r.healthcheck) {
		t.Errorf("HEALTHCHECK %+v, recipe %+v", got, r.healthcheck)
	}
	// The health check asks the port the image listens on.
	if !strings.Contains(got.Test[len(got.Test)-1], "127.0.0.1:"+r.exposedPorts[0]+"/_azq/health") || !strings.HasSuffix(r.cmd[len(r.cmd)-1], ":"+r.exposedPorts[0]) {
		t.Errorf("HEALTHCHECK %q and CMD %q, want both on port %s", got.Test, r.cmd, r.exposedPorts[0])
	}
}
