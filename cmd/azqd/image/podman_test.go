//go:build linux

package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// podman runs the podman command line with the options this machine
// needs, and returns its output; it fails the test on an error.
type podman struct {
	t *testing.T
	// global are the options before the subcommand: --runtime runc where
	// runc is installed. crun, podman's default, refuses this CI machine's
	// hybrid cgroups ("crun: cgroups in hybrid mode not supported, drop
	// all controllers from cgroupv2"); runc runs there.
	global []string
	// limits are the run options the machine needs: podman raises a
	// root container's RLIMIT_NOFILE and RLIMIT_NPROC above this
	// machine's hard limits, which needs CAP_SYS_RESOURCE, which CI's
	// root lacks ("crun: setrlimit `RLIMIT_NOFILE`: Operation not
	// permitted"); these stay within them.
	limits []string
}

func newPodman(t *testing.T) *podman {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("podman is missing under CI: .ci/run installs it (apt-get install podman runc)")
		}
		t.Skip("podman is not installed: apt-get install podman runc")
	}
	p := &podman{t: t}
	if _, err := exec.LookPath("runc"); err == nil {
		p.global = []string{"--runtime", "runc"}
	}
	var nofile syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	p.limits = []string{"--ulimit", fmt.Sprintf("nofile=%d:%d", nofile.Max, nofile.Max), "--ulimit", "nproc=4096:4096"}
	return p
}

// cmd is a podman command with the global options.
func (p *podman) cmd(args ...string) *exec.Cmd {
	return exec.Command("podman", append(append([]string(nil), p.global...), args...)...)
}

// run runs podman and returns its standard output.
func (p *podman) run(args ...string) string {
	p.t.Helper()
	cmd := p.cmd(args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		p.t.Fatalf("podman %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// unique is a name no other run uses.
func unique(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// TestPodman loads the docker-archive into podman, checks the
// configuration podman reads from it, and runs the image in podman: the
// CMD, with the image's health check run by podman; Azurite's command
// line on a new named volume, across a restart; on a root-owned bind
// mount holding Azurite's workspace; and with --user 65532 on a
// root-owned bind mount, which must stop with the reason.
func TestPodman(t *testing.T) {
	needRoot(t) // rootful podman, and chown of the bind mounts
	p := newPodman(t)
	b := image(t)

	// The archive: CI's artifact as it is, or the test's image under a
	// name of its own, so that a developer's localhost/azqd stays.
	archive := b.archive
	if os.Getenv("AZQD_IMAGE_ARCHIVE") == "" {
		archive = filepath.Join(t.TempDir(), "azqd.tar")
		tag, err := name.NewTag(unique("localhost/azqd-test:"))
		if err != nil {
			t.Fatal(err)
		}
		if err := tarball.WriteToFile(archive, tag, b.img); err != nil {
			t.Fatal(err)
		}
	}
	loaded := p.run("load", "-i", archive)
	_, after, ok := strings.Cut(loaded, "Loaded image: ")
	if !ok {
		t.Fatalf("podman load printed %q", loaded)
	}
	ref := strings.TrimSpace(strings.Split(after, "\n")[0])
	t.Cleanup(func() { p.cmd("rmi", "-f", ref).Run() })

	var inspect []struct {
		Os, Architecture string
		Config           struct {
			User         string
			Env, Cmd     []string
			ExposedPorts map[string]struct{}
			Labels       map[string]string
		}
		HealthCheck struct{ Test []string }
	}
	if err := json.Unmarshal([]byte(p.run("image", "inspect", ref)), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("podman image inspect: %v", err)
	}
	in := inspect[0]
	c := b.cf.Config
	if in.Os != "linux" || in.Architecture != b.cf.Architecture || in.Config.User != c.User || !slices.Equal(in.Config.Env, c.Env) ||
		!slices.Equal(in.Config.Cmd, c.Cmd) || !reflect.DeepEqual(in.Config.ExposedPorts, c.ExposedPorts) ||
		!reflect.DeepEqual(in.Config.Labels, c.Labels) || !slices.Equal(in.HealthCheck.Test, c.Healthcheck.Test) {
		t.Errorf("podman reads %+v;\nthe image says %+v", in, c)
	}

	// start runs the image attached, its output piped to the test, and
	// returns the container once azqd serves, with the host port podman
	// published for 10001.
	start := func(t *testing.T, name string, opts []string, argv ...string) *container {
		t.Helper()
		args := append([]string{"run", "--rm", "--name", name, "-p", "127.0.0.1::10001"}, p.limits...)
		args = append(append(append(args, opts...), ref), argv...)
		ct := serve(t, p.cmd(args...), startLines)
		t.Cleanup(func() { p.cmd("rm", "-f", name).Run() })
		hostPort := strings.TrimSpace(p.run("port", name, "10001/tcp"))
		_, port, ok := strings.Cut(hostPort, "127.0.0.1:")
		if !ok {
			t.Fatalf("podman port: %q", hostPort)
		}
		ct.conn = strings.Replace(ct.conn, "127.0.0.1:10001", "127.0.0.1:"+port, 1)
		ct.port = port
		return ct
	}
	hostUser := func(t *testing.T, name string) string {
		t.Helper()
		return strings.TrimSpace(p.run("top", name, "huser"))
	}

	t.Run("-version", func(t *testing.T) {
		args := append(append([]string{"run", "--rm"}, p.limits...), ref, "azqd", "-version")
		if got, want := p.run(args...), wantVersion(t); !strings.HasPrefix(got, want) {
			t.Errorf("azqd -version in podman: %q, want %q…", got, want)
		}
	})

	// The docs' docker run … azqd azqd -version, by the docs' name for
	// the image, which the archive the builder names gives it. Only with
	// CI's archive, which is loaded under that name; a test's own image
	// has a name of its own, so that a developer's azqd stays.
	t.Run("the docs' docker run -version", func(t *testing.T) {
		if os.Getenv("AZQD_IMAGE_ARCHIVE") == "" {
			t.Skip("the test's image is not loaded under the docs' name; CI's (AZQD_IMAGE_ARCHIVE) is")
		}
		var docs []string
		for _, argv := range docsCommands(t) {
			if argv[1] == "run" && slices.Contains(argv, "-version") {
				docs = argv
			}
		}
		if docs == nil {
			t.Fatal("the docs run no azqd -version")
		}
		args := append(append([]string{"run"}, p.limits...), docs[2:]...)
		if got, want := p.run(args...), wantVersion(t); !strings.HasPrefix(got, want) {
			t.Errorf("podman %s: %q, want %q…", strings.Join(args, " "), got, want)
		}
	})

	t.Run("CMD", func(t *testing.T) {
		name := unique("azqd-test-")
		ct := start(t, name, nil)
		if got := hostUser(t, name); !strings.HasSuffix(got, "65532") {
			t.Errorf("podman top: azqd runs as %q, want 65532", got)
		}
		if err := p.cmd("healthcheck", "run", name).Run(); err != nil {
			t.Errorf("podman healthcheck run: %v", err)
		}
		put(t, ct.conn, "podman", "hello")
		get(t, ct.conn, "podman", "hello")
		ct.stop() // SIGTERM to podman run, which passes it on to the container
	})

	azuriteQueue := []string{"azurite-queue", "--queueHost", "0.0.0.0", "--location", "/data"}
	t.Run("new named volume", func(t *testing.T) {
		vol := unique("azqd-test-")
		t.Cleanup(func() { p.cmd("volume", "rm", "-f", vol).Run() })
		name := unique("azqd-test-")
		ct := start(t, name, []string{"-v", vol + ":/data"}, azuriteQueue...)
		if strings.Contains(ct.stderr.String(), "now belongs to") {
			t.Errorf("changed the owner of a new volume: %s", ct.stderr)
		}
		put(t, ct.conn, "kept", "across containers")
		ct.stop() // SIGTERM to podman run, which passes it on to the container
		name = unique("azqd-test-")
		ct = start(t, name, []string{"-v", vol + ":/data"}, azuriteQueue...)
		if !strings.Contains(strings.Join(ct.printed, "\n"), "recovered 1 queues and 1 messages") {
			t.Errorf("a new container on the volume did not recover the queue: %q", ct.printed)
		}
		get(t, ct.conn, "kept", "across containers")
		ct.stop() // SIGTERM to podman run, which passes it on to the container
	})

	rootOwned := func(t *testing.T, withAzurite bool) string {
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if withAzurite {
			for n, body := range azuriteWorkspace {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, n)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		return dir
	}
	t.Run("root-owned bind mount with Azurite's workspace", func(t *testing.T) {
		dir := rootOwned(t, true)
		name := unique("azqd-test-")
		ct := start(t, name, []string{"-v", dir + ":/data"}, azuriteQueue...)
		for _, want := range []string{"/data now belongs to 65532:65532", "azqd: warning: /data is an Azurite workspace"} {
			if !strings.Contains(ct.stderr.String(), want) {
				t.Errorf("stderr lacks %q: %s", want, ct.stderr)
			}
		}
		put(t, ct.conn, "bind", "hello")
		get(t, ct.conn, "bind", "hello")
		ct.stop() // SIGTERM to podman run, which passes it on to the container
		for n := range azuriteWorkspace {
			if got := ownerOf(t, filepath.Join(dir, n)); got != (user{0, 0}) {
				t.Errorf("Azurite's %s now belongs to %v", n, got)
			}
		}
	})

	t.Run("--user 65532 on a root-owned bind mount", func(t *testing.T) {
		dir := rootOwned(t, false)
		args := append([]string{"run", "--rm", "--user", "65532:65532", "-v", dir + ":/data"}, p.limits...)
		out, err := p.cmd(append(append(args, ref), azuriteQueue...)...).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "may not write /data") {
			t.Errorf("%v, want exit status 1 with the reason:\n%s", err, out)
		}
	})
}
