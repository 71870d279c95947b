//go:build linux

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// composeFile is the part of the Compose specification the example uses.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string   `yaml:"image"`
	Build       string   `yaml:"build"`
	Command     string   `yaml:"command"`
	Ports       []string `yaml:"ports"`
	Volumes     []string `yaml:"volumes"`
	Healthcheck struct {
		Test        []string `yaml:"test"`
		Interval    string   `yaml:"interval"`
		Timeout     string   `yaml:"timeout"`
		StartPeriod string   `yaml:"start_period"`
		Retries     int      `yaml:"retries"`
	} `yaml:"healthcheck"`
}

// TestComposeFile parses the compose file the docs give for swapping
// Azurite for azqd (examples/compose/compose.yaml) and checks it against
// the image: the service keeps Azurite's name, builds and names the
// image, publishes the port the image exposes, mounts a named volume at
// the image's /data, and checks health as the image does. Then it runs
// the service's command from the unpacked image on a new volume, and its
// health check, as the engine would (see run_test.go for what that
// proves and what not): azqd takes Azurite's flags and serves.
func TestComposeFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "compose", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	s, ok := f.Services["azurite"]
	if !ok || len(f.Services) != 1 {
		t.Fatalf("services %v, want one, named azurite as in Azurite's compose files, so that connection strings naming host azurite still work", f.Services)
	}
	if s.Image != "azqd" {
		t.Errorf("image %q, want azqd, the name docker build -t azqd gives", s.Image)
	}
	if _, err := os.Stat(filepath.Join(repoRoot(t), "examples", "compose", s.Build, "Dockerfile")); err != nil {
		t.Errorf("build %q: %v; want the repository's root, where the Dockerfile is", s.Build, err)
	}
	img := image(t)
	c := img.cf.Config
	if !slices.Equal(s.Ports, []string{"10001:10001"}) {
		t.Errorf("ports %q, want 10001:10001", s.Ports)
	}
	if _, ok := c.ExposedPorts["10001/tcp"]; !ok {
		t.Errorf("the image does not expose 10001: %v", c.ExposedPorts)
	}
	if len(s.Volumes) != 1 {
		t.Fatalf("volumes %q, want one at /data", s.Volumes)
	}
	vol, target, _ := strings.Cut(s.Volumes[0], ":")
	if _, declared := f.Volumes[vol]; !declared || target != "/data" {
		t.Errorf("volume %q: want a named volume, declared under volumes:, at /data", s.Volumes[0])
	}
	argv := strings.Fields(s.Command)
	if i := indexOf(argv, "--location"); i < 0 || i+1 >= len(argv) || argv[i+1] != target {
		t.Errorf("command %q keeps its data elsewhere than the volume %s", s.Command, target)
	}
	if !slices.Equal(s.Healthcheck.Test, c.Healthcheck.Test) {
		t.Errorf("healthcheck test %q, the image's %q", s.Healthcheck.Test, c.Healthcheck.Test)
	}
	for _, d := range []struct {
		name string
		v    string
		want time.Duration
	}{{"interval", s.Healthcheck.Interval, c.Healthcheck.Interval}, {"timeout", s.Healthcheck.Timeout, c.Healthcheck.Timeout}, {"start_period", s.Healthcheck.StartPeriod, c.Healthcheck.StartPeriod}} {
		if got, err := time.ParseDuration(d.v); err != nil || got != d.want {
			t.Errorf("healthcheck %s %q, the image's %v", d.name, d.v, d.want)
		}
	}
	if s.Healthcheck.Retries != c.Healthcheck.Retries {
		t.Errorf("healthcheck retries %d, the image's %d", s.Healthcheck.Retries, c.Healthcheck.Retries)
	}

	needRoot(t)
	root := unpack(t, img.img)
	imageData, err := os.Lstat(filepath.Join(root, "data"))
	if err != nil {
		t.Fatal(err)
	}
	mountData(t, root, imageData, newVolume)
	ct := serve(t, command(t, root, c, imageUser(t, c), withPort(argv)), startLines)
	if !strings.Contains(strings.Join(ct.printed, "\n"), "azqd: durable in /data") {
		t.Errorf("not durable in the volume: %q", ct.printed)
	}
	test := append([]string(nil), s.Healthcheck.Test[1:]...)
	for i := range test {
		test[i] = strings.ReplaceAll(test[i], "127.0.0.1:10001", "127.0.0.1:"+ct.port)
	}
	if code, out := exitCode(t, command(t, root, c, imageUser(t, c), test)); code != 0 {
		t.Errorf("the service's health check exited %d:\n%s", code, out)
	}
	put(t, ct.conn, "compose", "hello")
	get(t, ct.conn, "compose", "hello")
	ct.stop()
}

// docsCommands are the docker commands of docs/emulator.md's shell
// blocks, each split into words, up to a comment; shell substitutions
// ($(…)) stay one word.
func docsCommands(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "emulator.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds [][]string
	inSh := false
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "```sh"):
			inSh = true
		case strings.HasPrefix(l, "```"):
			inSh = false
		case inSh && strings.HasPrefix(l, "docker "):
			l, _, _ = strings.Cut(l, " #")
			cmds = append(cmds, strings.Fields(l))
		}
	}
	return cmds
}

// docsRunImage is the image a docker run command of the docs runs: its
// first word after run's options.
func docsRunImage(argv []string) string {
	withValue := map[string]bool{"-p": true, "-v": true, "-e": true, "--name": true, "--user": true, "-u": true, "--build-arg": true}
	for i := 2; i < len(argv); i++ {
		switch {
		case withValue[argv[i]]:
			i++
		case !strings.HasPrefix(argv[i], "-"):
			return argv[i]
		}
	}
	return ""
}

// TestDocsNameTheImage checks that the docs, the compose file and the
// builder name the image alike: docker build -t in the docs, the image of
// each docker run there, compose's image, and the name the builder gives
// the docker-archive, which docker load and podman load give the image.
func TestDocsNameTheImage(t *testing.T) {
	var built string
	runs := 0
	for _, argv := range docsCommands(t) {
		switch argv[1] {
		case "build":
			if i := indexOf(argv, "-t"); i > 0 && i+1 < len(argv) {
				built = argv[i+1]
			}
		case "run":
			runs++
			if got := docsRunImage(argv); got != built {
				t.Errorf("%q runs image %q; the docs build %q", strings.Join(argv, " "), got, built)
			}
		}
	}
	if built == "" || runs == 0 {
		t.Fatalf("the docs build %q and run it %d times; want docker build -t and docker run", built, runs)
	}
	if defaultTag != built+":latest" {
		t.Errorf("the builder names the image %q; the docs' docker build -t %s names it %s:latest", defaultTag, built, built)
	}
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "compose", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if got := f.Services["azurite"].Image; got != built {
		t.Errorf("the compose file's image %q; the docs build %q", got, built)
	}
}
