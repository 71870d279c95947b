//go:build linux

package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// The container engine's part, played by these tests without one: the
// image's filesystem unpacked into a directory, with its owners; each
// command started by chroot into it, with the image's environment only,
// its working directory, and the user of the image's config (or of
// docker run --user); a volume at /data stood in for by what a container
// engine mounts there: a new named volume is a copy of the image's /data,
// with its owner and mode; a bind mount of a root-owned directory is
// root's, 0755. What this does not do that an engine does: namespaces
// (the process shares this machine's network, so ports are rewritten
// from 10001 to free ones, and its process table), cgroups, capabilities
// bounding and seccomp. TestPodman runs the same checks in podman.

// needRoot fails under CI, which runs as root, and skips elsewhere: the
// tests chroot and change owners.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("running the image needs root (chroot, chown): CI runs as root")
	}
	t.Skip("running the image needs root (chroot, chown); run as root, as CI does")
}

// unpack writes img's filesystem into a new directory and returns it;
// as root it keeps the owners.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil { // an image's / is 0755
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return root
		}
		if err != nil {
			t.Fatal(err)
		}
		name := path.Clean("/" + h.Name)
		p := filepath.Join(root, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
			if err == nil {
				err = os.Chmod(p, os.FileMode(h.Mode).Perm())
			}
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm()); err == nil {
				_, err = io.Copy(f, tr)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		default:
			err = fmt.Errorf("entry type %c", h.Typeflag)
		}
		if err == nil && os.Geteuid() == 0 {
			err = os.Lchown(p, h.Uid, h.Gid)
		}
		if err != nil {
			t.Fatalf("unpacking %s: %v", h.Name, err)
		}
	}
}

// volume is what a container engine mounts at /data.
type volume int

const (
	newVolume     volume = iota // a new named volume: a copy of the image's /data
	rootVolume                  // a bind mount of a root-owned directory
	azuriteVolume               // a volume Azurite's image (root) wrote
)

// mountData replaces root's /data with v, keeping the image's /data
// (its mode and owner, given as image) for a new volume.
func mountData(t *testing.T, root string, image os.FileInfo, v volume) {
	t.Helper()
	data := filepath.Join(root, "data")
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	switch v {
	case newVolume:
		st := image.Sys().(*syscall.Stat_t)
		if err := os.Chown(data, int(st.Uid), int(st.Gid)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(data, image.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	case azuriteVolume:
		for name, body := range azuriteWorkspace {
			p := filepath.Join(data, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// azuriteWorkspace is a small workspace of Azurite's queue service.
var azuriteWorkspace = map[string]string{
	"__azurite_db_queue__.json":        `{"filename":"/data/__azurite_db_queue__.json","collections":[]}`,
	"__azurite_db_queue_extent__.json": `{"filename":"/data/__azurite_db_queue_extent__.json","collections":[]}`,
	"__queuestorage__/1b6c0f":          "extent",
}

// user is a container's user, uid:gid.
type user struct{ uid, gid uint32 }

// imageUser is the image's USER.
func imageUser(t *testing.T, c v1.Config) user {
	t.Helper()
	uid, gid, err := owner(c.User)
	if err != nil {
		t.Fatal(err)
	}
	return user{uint32(uid), uint32(gid)}
}

// command is argv run in root as the image runs it: argv[0] found on the
// image's PATH inside root, the image's environment alone, its working
// directory, as u.
func command(t *testing.T, root string, c v1.Config, u user, argv []string) *exec.Cmd {
	t.Helper()
	bin := ""
	for _, e := range c.Env {
		if dirs, ok := strings.CutPrefix(e, "PATH="); ok {
			for _, d := range strings.Split(dirs, ":") {
				if _, err := os.Lstat(filepath.Join(root, d, argv[0])); err == nil {
					bin = path.Join(d, argv[0])
					break
				}
			}
		}
	}
	if bin == "" {
		t.Fatalf("%s is not on the image's PATH (%q)", argv[0], c.Env)
	}
	dir := c.WorkingDir
	if dir == "" {
		dir = "/"
	}
	return &exec.Cmd{
		Path: bin, Args: argv, Env: append([]string(nil), c.Env...), Dir: dir,
		SysProcAttr: &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid}},
		WaitDelay:   5 * time.Second,
	}
}

// lockedBuffer is a bytes.Buffer for a process's stderr and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// container is azqd running from the image.
type container struct {
	t       *testing.T
	cmd     *exec.Cmd
	lines   chan string
	stderr  *lockedBuffer
	printed []string // stdout up to the connection string
	conn    string   // devstoreaccount1's connection string
	port    string   // the queue port bound
}

// serve starts cmd and waits until azqd prints its connection string.
func serve(t *testing.T, cmd *exec.Cmd, lines func(cmd *exec.Cmd) (<-chan string, error)) *container {
	t.Helper()
	c := &container{t: t, cmd: cmd, stderr: &lockedBuffer{}}
	cmd.Stderr = c.stderr
	ch, err := lines(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	deadline := time.After(60 * time.Second)
	for c.conn == "" {
		select {
		case l, ok := <-ch:
			if !ok {
				err := cmd.Wait()
				t.Fatalf("%q stopped before serving: %v\n%s\n%s", cmd.Args, err, strings.Join(c.printed, "\n"), c.stderr)
			}
			c.printed = append(c.printed, l)
			if conn, ok := strings.CutPrefix(l, "devstoreaccount1: "); ok {
				c.conn = conn
			}
		case <-deadline:
			t.Fatalf("%q printed no connection string: %q %s", cmd.Args, c.printed, c.stderr)
		}
	}
	c.lines = make(chan string, 64)
	go func() {
		for l := range ch {
			c.lines <- l
		}
		close(c.lines)
	}()
	_, rest, _ := strings.Cut(c.conn, "QueueEndpoint=http://127.0.0.1:")
	c.port, _, _ = strings.Cut(rest, "/")
	return c
}

// startLines starts cmd and returns its stdout's lines.
func startLines(cmd *exec.Cmd) (<-chan string, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}()
	return ch, nil
}

// stop sends SIGTERM, as an engine's stop does, and checks that azqd
// stopped gracefully; it returns what azqd printed after its start.
func (c *container) stop() string {
	c.t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		c.t.Fatal(err)
	}
	var rest strings.Builder
	for l := range c.lines {
		rest.WriteString(l + "\n")
	}
	if err := c.cmd.Wait(); err != nil || !strings.Contains(rest.String(), "azqd: stopped") {
		c.t.Fatalf("after SIGTERM: %v\n%s\n%s", err, rest.String(), c.stderr)
	}
	return rest.String()
}

// uid is the running process's real, effective, saved and filesystem
// user IDs, from /proc.
func (c *container) uid() string {
	c.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		c.t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Uid:"); ok {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	c.t.Fatal("no Uid line in /proc status")
	return ""
}

// healthURLArgs is the image's health check, with its port replaced by
// port, the one azqd bound.
func healthArgs(t *testing.T, c v1.Config, port string) []string {
	t.Helper()
	if c.Healthcheck == nil || len(c.Healthcheck.Test) < 2 || c.Healthcheck.Test[0] != "CMD" {
		t.Fatalf("health check %+v, want CMD and an exec form", c.Healthcheck)
	}
	args := append([]string(nil), c.Healthcheck.Test[1:]...)
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], "127.0.0.1:10001", "127.0.0.1:"+port)
	}
	return args
}

// exitCode runs cmd to its end and returns its exit status and output.
func exitCode(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("%q: %v", cmd.Args, err)
	return -1, ""
}

// queueClient is a client of queue on the account of conn, without
// retries, so that a failure shows at once.
func queueClient(t *testing.T, conn, queue string) *azqueue.QueueClient {
	t.Helper()
	qc, err := azqueue.NewQueueClientFromConnectionString(conn, queue, &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry: policy.RetryOptions{MaxRetries: -1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return qc
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// put creates queue and puts text in it.
func put(t *testing.T, conn, queue, text string) {
	t.Helper()
	qc := queueClient(t, conn, queue)
	if _, err := qc.Create(testContext(t), nil); err != nil {
		t.Fatalf("create queue: %v", err)
	}
	if _, err := qc.EnqueueMessage(testContext(t), text, nil); err != nil {
		t.Fatalf("put: %v", err)
	}
}

// get gets one message from queue, checks that it is text, and deletes it.
func get(t *testing.T, conn, queue, text string) {
	t.Helper()
	qc := queueClient(t, conn, queue)
	resp, err := qc.DequeueMessage(testContext(t), nil)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if len(resp.Messages) != 1 || *resp.Messages[0].MessageText != text {
		t.Fatalf("get returned %d messages, want %q", len(resp.Messages), text)
	}
	m := resp.Messages[0]
	if _, err := qc.DeleteMessage(testContext(t), *m.MessageID, *m.PopReceipt, nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

// ownerOf is the owner of p.
func ownerOf(t *testing.T, p string) user {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return user{st.Uid, st.Gid}
}

// withPort is args with Azurite's --queuePort 0 (and the blob and table
// ports, where their hosts are given) appended, or the image's
// 0.0.0.0:10001 made 0.0.0.0:0: the process shares this machine's ports.
func withPort(args []string) []string {
	out := append([]string(nil), args...)
	if i := indexOf(out, "-addr"); i >= 0 {
		out[i+1] = strings.Replace(out[i+1], ":10001", ":0", 1)
		return out
	}
	out = append(out, "--queuePort", "0")
	for _, s := range []string{"blob", "table"} {
		if indexOf(out, "--"+s+"Host") >= 0 {
			out = append(out, "--"+s+"Port", "0")
		}
	}
	return out
}

func indexOf(args []string, s string) int {
	for i, a := range args {
		if a == s {
			return i
		}
	}
	return -1
}

// TestImageRuns runs the image's CMD and Azurite's container command
// lines from the unpacked image, as its user, with its environment, on
// each kind of volume at /data; checks the user azqd serves as, a Put and
// a Get through the REST API, the image's health check, and a graceful
// stop.
func TestImageRuns(t *testing.T) {
	needRoot(t)
	b := image(t)
	c := b.cf.Config
	root := unpack(t, b.img)
	imageData, err := os.Lstat(filepath.Join(root, "data"))
	if err != nil {
		t.Fatal(err)
	}
	servesAs := "65532 65532 65532 65532"
	healthy := func(t *testing.T, ct *container) {
		t.Helper()
		if code, out := exitCode(t, command(t, root, c, imageUser(t, c), healthArgs(t, c, ct.port))); code != 0 {
			t.Errorf("the image's health check exited %d:\n%s", code, out)
		}
	}

	// The release and the commit the image holds, which the build
	// context's missing .git would hide.
	t.Run("-version", func(t *testing.T) {
		code, out := exitCode(t, command(t, root, c, imageUser(t, c), []string{"azqd", "-version"}))
		if want := wantVersion(t); code != 0 || !strings.HasPrefix(out, want) {
			t.Errorf("azqd -version exited %d: %q, want %q…", code, out, want)
		}
	})

	t.Run("CMD", func(t *testing.T) {
		mountData(t, root, imageData, newVolume)
		ct := serve(t, command(t, root, c, imageUser(t, c), withPort(c.Cmd)), startLines)
		if got := ct.uid(); got != servesAs {
			t.Errorf("azqd serves as uid %s, want %s", got, servesAs)
		}
		healthy(t, ct)
		put(t, ct.conn, "cmd", "hello")
		get(t, ct.conn, "cmd", "hello")
		ct.stop()
		if code, out := exitCode(t, command(t, root, c, imageUser(t, c), healthArgs(t, c, ct.port))); code != 1 || !strings.Contains(out, "unhealthy") {
			t.Errorf("the health check after the stop exited %d, want 1:\n%s", code, out)
		}
	})

	azuriteQueue := []string{"azurite-queue", "--queueHost", "0.0.0.0", "--location", "/data"}
	t.Run("azurite-queue --location /data, new volume", func(t *testing.T) {
		mountData(t, root, imageData, newVolume)
		ct := serve(t, command(t, root, c, imageUser(t, c), withPort(azuriteQueue)), startLines)
		if got := ct.uid(); got != servesAs {
			t.Errorf("azqd serves as uid %s, want %s", got, servesAs)
		}
		if strings.Contains(ct.stderr.String(), "now belongs to") {
			t.Errorf("changed the owner of the image's own /data: %s", ct.stderr)
		}
		healthy(t, ct)
		put(t, ct.conn, "kept", "across restarts")
		ct.stop()
		ct = serve(t, command(t, root, c, imageUser(t, c), withPort(azuriteQueue)), startLines)
		if !strings.Contains(strings.Join(ct.printed, "\n"), "recovered 1 queues and 1 messages from /data/devstoreaccount1") {
			t.Errorf("the restart did not recover the queue: %q", ct.printed)
		}
		get(t, ct.conn, "kept", "across restarts")
		ct.stop()
	})

	t.Run("azurite-queue --location /data, root-owned volume", func(t *testing.T) {
		mountData(t, root, imageData, rootVolume)
		ct := serve(t, command(t, root, c, imageUser(t, c), withPort(azuriteQueue)), startLines)
		if got := ct.uid(); got != servesAs {
			t.Errorf("azqd serves as uid %s, want %s", got, servesAs)
		}
		if !strings.Contains(ct.stderr.String(), "azqd: started as root: /data now belongs to 65532:65532") {
			t.Errorf("stderr does not say that /data changed owner: %s", ct.stderr)
		}
		healthy(t, ct)
		put(t, ct.conn, "rootvolume", "hello")
		get(t, ct.conn, "rootvolume", "hello")
		ct.stop()
		if got := ownerOf(t, filepath.Join(root, "data", "devstoreaccount1")); got != (user{65532, 65532}) {
			t.Errorf("azqd's data belongs to %v", got)
		}
	})

	t.Run("azurite-queue --location /data, Azurite's volume", func(t *testing.T) {
		mountData(t, root, imageData, azuriteVolume)
		ct := serve(t, command(t, root, c, imageUser(t, c), withPort(append(azuriteQueue, "--loose", "--skipApiVersionCheck"))), startLines)
		if !strings.Contains(ct.stderr.String(), "azqd: warning: /data is an Azurite workspace") {
			t.Errorf("no warning about Azurite's workspace: %s", ct.stderr)
		}
		put(t, ct.conn, "besideazurite", "hello")
		get(t, ct.conn, "besideazurite", "hello")
		ct.stop()
		for name, body := range azuriteWorkspace {
			p := filepath.Join(root, "data", name)
			if b, err := os.ReadFile(p); err != nil || string(b) != body {
				t.Errorf("Azurite's %s: %q, %v", name, b, err)
			}
			if got := ownerOf(t, p); got != (user{0, 0}) {
				t.Errorf("Azurite's %s now belongs to %v", name, got)
			}
		}
	})

	t.Run("testcontainers-go's azurite", func(t *testing.T) {
		mountData(t, root, imageData, newVolume)
		ct := serve(t, command(t, root, c, imageUser(t, c), withPort([]string{"azurite", "--blobHost", "0.0.0.0", "--queueHost", "0.0.0.0", "--tableHost", "0.0.0.0"})), startLines)
		out := strings.Join(ct.printed, "\n")
		for _, s := range []string{"Blob", "Queue", "Table"} {
			if !strings.Contains(out, s+" service is successfully listening at http://0.0.0.0:") {
				t.Errorf("no start-up line of the %s service: %s", s, out)
			}
		}
		put(t, ct.conn, "testcontainers", "hello")
		get(t, ct.conn, "testcontainers", "hello")
		ct.stop()
	})

	// docker run --user 65532:65532 on a root-owned volume: azqd cannot
	// make it its own, and says so and what to do, rather than keep the
	// queues in memory.
	t.Run("--user 65532, root-owned volume", func(t *testing.T) {
		mountData(t, root, imageData, rootVolume)
		code, out := exitCode(t, command(t, root, c, user{65532, 65532}, withPort(azuriteQueue)))
		if code != 1 || !strings.Contains(out, "azqd runs as 65532:65532 and may not write /data, which belongs to 0:0") ||
			strings.Contains(out, "serving") {
			t.Errorf("exited %d, want 1 with the reason and no serving:\n%s", code, out)
		}
	})
}

// TestImageCommandsServe runs the image's CMD and Azurite's command lines
// from the unpacked image as whoever runs the tests, without chroot, with
// the image's environment, in memory: each serves a Put and a Get
// through the SDK, passes the image's health check, stops on SIGTERM,
// and then fails the health check. It needs no root, so that every
// developer runs the image's programs; TestImageRuns runs them as a
// container engine would.
func TestImageCommandsServe(t *testing.T) {
	b := image(t)
	c := b.cf.Config
	root := unpack(t, b.img)
	run := func(argv []string) *exec.Cmd {
		cmd := command(t, root, c, user{}, argv)
		cmd.Path, cmd.Dir, cmd.SysProcAttr = filepath.Join(root, cmd.Path), root, nil
		return cmd
	}
	// An azqd that accepts and never answers: the image's health check
	// fails, saying so, within the HEALTHCHECK's timeout, so that the
	// engine records the reason instead of killing the check.
	t.Run("health check of a server that never answers", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close() // never accepted: the kernel completes the connection, no one answers
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		start := time.Now()
		code, out := exitCode(t, run(healthArgs(t, c, port)))
		took := time.Since(start)
		if code != 1 || !strings.Contains(out, "did not answer within") {
			t.Errorf("exited %d, want 1 with the reason:\n%s", code, out)
		}
		if took >= c.Healthcheck.Timeout {
			t.Errorf("the check took %v, not within the HEALTHCHECK's timeout, %v", took, c.Healthcheck.Timeout)
		}
	})

	for _, argv := range [][]string{
		c.Cmd,
		{"azurite-queue", "--queueHost", "0.0.0.0", "--inMemoryPersistence", "--loose", "--skipApiVersionCheck"},
		{"azurite", "--blobHost", "0.0.0.0", "--queueHost", "0.0.0.0", "--tableHost", "0.0.0.0"},
	} {
		t.Run(argv[0], func(t *testing.T) {
			ct := serve(t, run(withPort(argv)), startLines)
			if code, out := exitCode(t, run(healthArgs(t, c, ct.port))); code != 0 {
				t.Errorf("the image's health check exited %d:\n%s", code, out)
			}
			put(t, ct.conn, "commands", "hello")
			get(t, ct.conn, "commands", "hello")
			ct.stop()
			if code, out := exitCode(t, run(healthArgs(t, c, ct.port))); code != 1 || !strings.Contains(out, "unhealthy") {
				t.Errorf("the health check after the stop exited %d, want 1:\n%s", code, out)
			}
		})
	}
}

// TestBinaryIsStatic: a scratch image has no dynamic loader and no
// libraries.
func TestBinaryIsStatic(t *testing.T) {
	root := unpack(t, image(t).img)
	f, err := elf.Open(filepath.Join(root, "usr", "local", "bin", "azqd"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary links %v (%v)", libs, err)
	}
}
