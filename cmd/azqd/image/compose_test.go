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
