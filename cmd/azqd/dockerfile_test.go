package main

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dockerfile is the repository's Dockerfile, split into instructions with
// their line continuations joined.
type dockerfile []string

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var out dockerfile
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur += s + " "
			continue
		}
		out = append(out, cur+line)
		cur = ""
	}
	return out
}

// find returns the arguments of the instructions named instr whose text
// contains substr.
func (d dockerfile) find(instr, substr string) []string {
	var out []string
	for _, l := range d {
		name, args, _ := strings.Cut(l, " ")
		if strings.EqualFold(name, instr) && strings.Contains(args, substr) {
			out = append(out, strings.TrimSpace(args))
		}
	}
	return out
}

// TestDockerfileBuildSteps runs the Dockerfile's build steps without a
// container engine: the same go build command, from the repository root
// (the build stage's WORKDIR holds the whole repository), into a
// directory standing in for the image's root. It checks that the binary
// is static, as the scratch image needs, and that it serves under the
// image's CMD and under Azurite's command line, with the image's health
// check. It builds no image: cmd/azqd/image builds the image from the
// same recipe, and its tests run it.
func TestDockerfileBuildSteps(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image is Linux; its build steps run under /bin/sh")
	}
	d := readDockerfile(t)
	last := ""
	for _, l := range d {
		if name, args, _ := strings.Cut(l, " "); strings.EqualFold(name, "FROM") {
			last = args
		}
	}
	if last != "scratch" {
		t.Errorf("final stage FROM %q, want scratch", last)
	}
	if got := d.find("EXPOSE", ""); len(got) != 1 || got[0] != "10001" {
		t.Errorf("EXPOSE %q, want 10001", got)
	}
	// azqd starts as root, as Azurite's image does, so that a root-owned
	// volume at --location works, and becomes AZQD_USER, unprivileged,
	// before it serves (imageuser.go).
	if got := d.find("USER", ""); len(got) != 1 || got[0] != "0:0" {
		t.Errorf("USER %q, want 0:0, with AZQD_USER naming the user azqd becomes", got)
	}
	if got := d.find("ENV", imageUserEnv+"="); len(got) != 1 {
		t.Errorf("ENV %s: %q, want one", imageUserEnv, got)
	} else if u, err := parseImageUser(strings.TrimPrefix(got[0], imageUserEnv+"=")); err != nil || u.uid == 0 || u.gid == 0 {
		t.Errorf("ENV %s: %v, %v; want an unprivileged uid:gid", got[0], u, err)
	}

	build := d.find("RUN", "go build")
	if len(build) != 1 || !strings.Contains(build[0], "CGO_ENABLED=0") || !strings.Contains(build[0], "/out/") {
		t.Fatalf("want one RUN CGO_ENABLED=0 go build … -o /out/…, got %q", build)
	}
	links := d.find("RUN", "ln -s")
	root := t.TempDir()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range append(build, links...) {
		sh := exec.Command("/bin/sh", "-c", strings.ReplaceAll(step, "/out/", root+"/"))
		sh.Dir = repo
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("RUN %s: %v\n%s", step, err, out)
		}
	}
	bin := filepath.Join(root, "usr", "local", "bin")

	f, err := elf.Open(filepath.Join(bin, "azqd"))
	if err != nil {
		t.Fatal(err)
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary asks for a dynamic loader; a scratch image has none")
		}
	}
	f.Close()
	if len(libs) > 0 {
		t.Errorf("the binary links %v; a scratch image has no libraries", libs)
	}

	var cmd []string
	cmds := d.find("CMD", "")
	if len(cmds) != 1 || json.Unmarshal([]byte(cmds[0]), &cmd) != nil || len(cmd) < 1 {
		t.Fatalf("CMD %q, want an exec-form (JSON) command", cmds)
	}
	i := indexOf(cmd, "-addr")
	if i < 0 || i+1 >= len(cmd) || cmd[i+1] != "0.0.0.0:10001" {
		t.Fatalf("CMD %q, want -addr 0.0.0.0:10001: the container must listen on every interface", cmd)
	}
	cmd[i+1] = "0.0.0.0:0" // another port, lest a running emulator hold 10001
	t.Run("CMD", func(t *testing.T) {
		serveBinary(t, filepath.Join(bin, cmd[0]), cmd[1:])
	})
	t.Run("azurite-queue", func(t *testing.T) {
		serveBinary(t, filepath.Join(bin, "azurite-queue"),
			[]string{"--queueHost", "0.0.0.0", "--queuePort", "0", "--inMemoryPersistence", "--loose", "--skipApiVersionCheck"})
	})
	t.Run("azurite", func(t *testing.T) {
		serveBinary(t, filepath.Join(bin, "azurite"), []string{"--queueHost", "0.0.0.0", "--queuePort", "0"})
	})
	// testcontainers-go's Azurite module: all three services, waiting
	// for their start-up lines.
	t.Run("testcontainers", func(t *testing.T) {
		printed := serveBinary(t, filepath.Join(bin, "azurite"),
			append(append([]string(nil), testcontainersArgs...), "--blobPort", "0", "--queuePort", "0", "--tablePort", "0"))
		if got := services(printed); len(got) != 3 {
			t.Fatalf("announced %v, want Blob, Queue and Table: %q", got, printed)
		}
	})
}

// serveBinary starts the built program, uses the emulator it serves
// through the SDK, and stops it with SIGTERM as a container engine does.
// It returns the lines printed up to the connection string.
func serveBinary(t *testing.T, path string, args []string) (printed []string) {
	p := exec.Command(path, args...)
	stdout, err := p.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	p.Stderr = &stderr
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Process.Kill(); p.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var conn string
	for conn == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s stopped before serving: %s", path, stderr.String())
			}
			printed = append(printed, l)
			if c, ok := strings.CutPrefix(l, "devstoreaccount1: "); ok {
				conn = c
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s printed no connection string", path)
		}
	}
	if !strings.Contains(conn, "QueueEndpoint=http://127.0.0.1:") {
		t.Fatalf("connection string %q, want the loopback address for a listener on every interface", conn)
	}
	roundTrip(t, queueClient(t, conn, "image"))
	// The image's HEALTHCHECK: exit 0 while azqd serves, 1 once it is gone.
	endpoint := strings.TrimSuffix(conn[strings.Index(conn, "QueueEndpoint=")+len("QueueEndpoint="):], ";")
	health := strings.TrimSuffix(endpoint, "/devstoreaccount1") + "/_azq/health"
	if out, err := exec.Command(path, "-healthcheck", health).CombinedOutput(); err != nil {
		t.Errorf("azqd -healthcheck %s while serving: %v\n%s", health, err, out)
	}
	if err := p.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest := drain(lines)
	if err := p.Wait(); err != nil || !strings.Contains(rest, "azqd: stopped") {
		t.Fatalf("after SIGTERM: %v, printed %q, stderr %q", err, rest, stderr.String())
	}
	out, err := exec.Command(path, "-healthcheck", health).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "unhealthy") {
		t.Errorf("azqd -healthcheck %s once stopped: %v, want exit status 1 saying unhealthy\n%s", health, err, out)
	}
	return printed
}

// drain returns the rest of the lines, once the program has closed its
// output.
func drain(lines <-chan string) string {
	var b strings.Builder
	for l := range lines {
		b.WriteString(l + "\n")
	}
	return b.String()
}
