// Package pgtest gives tests a real PostgreSQL server: one the test binary
// starts itself from the PostgreSQL installed on the machine, or an
// existing one that the environment variable AZQ_POSTGRES_URL names.
//
// A test binary starts at most one server of its own, on first use, and
// stops it when its tests end (call Main from TestMain); each test takes a
// schema of its own in the server's test database (NewSchema), so tests
// run in parallel and a server costs its start-up once. The server runs
// from a temporary directory and listens on a Unix socket there, never on
// a network port, and keeps nothing afterwards. It runs with fsync off, as
// tests need no durability against a crash of the machine; Start with
// Options.Durable gives a server that syncs, for benchmarks. For tests of
// a failover or of a standby, StartReplicated starts a primary and a
// standby that streams from it, synchronously or not; Crash kills the
// primary as the loss of its machine would, Promote makes the standby the
// primary, and Freeze and Thaw hold up a server and let it go.
//
// The binaries (initdb, postgres) are looked for where Debian installs
// them, /usr/lib/postgresql/<version>/bin (the newest version), then on
// PATH. PostgreSQL refuses to run as root, so as root the server runs as
// the user nobody, with a directory it owns. Without PostgreSQL a test
// that needs it is skipped, except in CI (the environment variable CI set
// to anything but "false"), where it fails: CI installs PostgreSQL, and a
// skip there would hide a missing installation.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL is the environment variable that points the tests at an existing
// server instead: a postgres:// URL of a database in which the tests may
// create and drop schemas.
const EnvURL = "AZQ_POSTGRES_URL"

// Options configure a server that Start starts.
type Options struct {
	// Durable runs the server with fsync and synchronous commits on, as
	// in production, for benchmarks; tests leave it off.
	Durable bool
	// Settings are more configuration parameters, name to value, as
	// postgres -c name=value takes them.
	Settings map[string]string
}

// Server is a PostgreSQL server for tests.
type Server struct {
	url      string // the test database
	external bool   // named by EnvURL: not ours to stop or restart

	// Of a server of our own:
	dir    string // temporary directory: data/, the socket, the log
	bin    string // directory of the PostgreSQL binaries
	owner  *syscall.Credential
	opts   Options
	mu     sync.Mutex // guards cmd and exited
	cmd    *exec.Cmd  // the running postmaster; nil while stopped
	exited chan struct{}
}

var (
	sharedOnce sync.Once
	sharedOpts Options // set by MainOptions before any test runs
	shared     *Server
	sharedErr  error
)

// Shared returns the test binary's server, starting it on first use: the
// server EnvURL names, else one of the binary's own. Without PostgreSQL it
// skips tb, or fails it in CI.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	sharedOnce.Do(func() {
		if u := os.Getenv(EnvURL); u != "" {
			shared, sharedErr = external(u)
			return
		}
		shared, sharedErr = start(sharedOpts)
	})
	if sharedErr != nil {
		unavailable(tb, sharedErr)
	}
	return shared
}

// Main runs the tests of m and then stops the server Shared started, if
// any, and returns the exit code for os.Exit. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
func Main(m *testing.M) int { return MainOptions(m, Options{}) }

// MainOptions is Main with the options of the server Shared starts, such
// as Durable for benchmarks. They do not apply to a server EnvURL names.
func MainOptions(m *testing.M, opts Options) int {
	sharedOpts = opts
	code := m.Run()
	if shared != nil && !shared.external {
		if err := shared.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
	return code
}

// Start starts a server of tb's own, stopped and removed when tb ends, for
// tests that stop or restart it. It is never the server EnvURL names, as
// an existing server is not the test's to stop; without PostgreSQL it
// skips tb, or fails it in CI.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := start(opts)
	if err != nil {
		unavailable(tb, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// unavailable skips tb for want of PostgreSQL, or fails it in CI.
func unavailable(tb testing.TB, err error) {
	tb.Helper()
	if ci := os.Getenv("CI"); ci != "" && ci != "false" {
		tb.Fatalf("PostgreSQL is needed and CI is set: %v", err)
	}
	tb.Skipf("PostgreSQL is not available (install it, or set %s): %v", EnvURL, err)
}

// URL returns the URL of the server's database for tests: the database
// EnvURL names, or the postgres database of a server of our own.
func (s *Server) URL() string { return s.url }

// External reports whether the server is one EnvURL names.
func (s *Server) External() bool { return s.external }

// NewSchema returns the name of a schema that no other test uses, in the
// database URL names, and drops the schema with everything in it when tb ends.
// The schema itself is not made: whoever uses it makes it.
func (s *Server) NewSchema(tb testing.TB) string {
	tb.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	name := "t_" + hex.EncodeToString(b[:])
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, s.url)
		if err != nil {
			tb.Errorf("dropping schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("dropping schema %s: %v", name, err)
		}
	})
	return name
}

// New starts a server of the caller's own, outside a test: a benchmark
// script's, say, that runs many test binaries against one server through
// EnvURL. The caller must Close it; a server the process leaves running
// when it dies is stopped by the kernel (it is started with a parent-death
// signal), but its directory stays.
func New(opts Options) (*Server, error) { return start(opts) }

// external is the server EnvURL names.
func external(u string) (*Server, error) {
	if _, err := url.Parse(u); err != nil || !strings.HasPrefix(u, "postgres") {
		return nil, fmt.Errorf("%s must be a postgres:// URL", EnvURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvURL, err)
	}
	conn.Close(ctx)
	return &Server{url: u, external: true}, nil
}

// start initializes a cluster in a new temporary directory and starts it.
func start(opts Options) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	owner, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tempRoot(owner), "azq-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin, owner: owner, opts: opts}
	s.url = s.socketURL("postgres")
	if err := s.init(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.Restart(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// binDir finds the directory of the PostgreSQL server binaries: Debian's
// /usr/lib/postgresql/<version>/bin of the newest version, else that of
// initdb on PATH.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	p, err := exec.LookPath("initdb")
	if err != nil {
		return "", errors.New("no initdb in /usr/lib/postgresql/*/bin or on PATH")
	}
	if p, err = filepath.EvalSymlinks(p); err != nil {
		return "", err
	}
	d := filepath.Dir(p)
	if !isExec(filepath.Join(d, "postgres")) {
		return "", fmt.Errorf("no postgres beside %s", p)
	}
	return d, nil
}

// version is the major version in a path /usr/lib/postgresql/<v>/bin.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// serverUser returns the credential the server runs with: nil (the
// current user) unless the current user is root, which PostgreSQL
// refuses; then the user nobody.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("running as root, and no user nobody to run PostgreSQL as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user nobody has ids %s, %s", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: false, Groups: []uint32{}}, nil
}

// tempRoot is where the server's directory goes: the temporary directory,
// unless the server runs as another user who cannot reach into it; then
// /tmp, which everyone can.
func tempRoot(owner *syscall.Credential) string {
	d := os.TempDir()
	if owner == nil {
		return d
	}
	for p := d; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if p == filepath.Dir(p) {
			return d
		}
	}
}

// command is a command running a PostgreSQL binary as the server's user.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	if s.owner != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.owner}
	}
	return cmd
}

// init makes the cluster: a copy of the cached one (see cluster), in a
// directory the server's user owns.
func (s *Server) init() error {
	tmpl, err := s.cluster()
	if err != nil {
		return err
	}
	data := filepath.Join(s.dir, "data")
	if err := copyTree(tmpl, data); err != nil {
		return fmt.Errorf("copying the cached cluster: %w", err)
	}
	if s.owner == nil {
		return nil
	}
	return filepath.WalkDir(s.dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(s.owner.Uid), int(s.owner.Gid))
	})
}

// cluster returns the directory of a freshly initialized cluster of the
// installed PostgreSQL, made by initdb on first use and kept in the
// user's cache directory: copying it takes a fraction of initdb's time,
// which every test binary would otherwise pay. It is keyed by the
// server's version and the directory of its binaries; a cluster being made
// is renamed into place only when complete, so that test binaries that
// start together share one without a lock.
func (s *Server) cluster() (string, error) {
	out, err := exec.Command(filepath.Join(s.bin, "postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("postgres --version: %w", err)
	}
	sum := sha256.Sum256([]byte(clusterFormat + "\x00" + s.bin + "\x00" + string(out)))
	root, err := os.UserCacheDir()
	if err != nil {
		root = os.TempDir()
	}
	root = filepath.Join(root, "azq-pgtest")
	final := filepath.Join(root, hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(final, "PG_VERSION")); err == nil {
		return final, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(tempRoot(s.owner), "azq-pgtest-initdb-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	if s.owner != nil {
		if err := os.Chown(work, int(s.owner.Uid), int(s.owner.Gid)); err != nil {
			return "", err
		}
	}
	cmd := s.command("initdb", "-D", filepath.Join(work, "data"), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("initdb: %v\n%s", err, out)
	}
	// The cluster is copied into the cache (the work directory may be on
	// another file system) and renamed into place; if another test binary
	// was quicker, its cluster serves.
	part, err := os.MkdirTemp(root, "part-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(part)
	if err := copyTree(filepath.Join(work, "data"), filepath.Join(part, "data")); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(part, "data"), final); err != nil {
		if _, statErr := os.Stat(filepath.Join(final, "PG_VERSION")); statErr != nil {
			return "", err
		}
	}
	return final, nil
}

// clusterFormat changes when the way cluster initializes one does, so
// that a cluster made the old way is not used.
const clusterFormat = "initdb -U postgres -A trust -E UTF8 --locale=C, 1"

// copyTree copies the directory tree src to dst, which must not exist,
// keeping the permission bits.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(target, info.Mode().Perm())
		case info.Mode().IsRegular():
			return copyFile(p, target, info.Mode().Perm())
		}
		return fmt.Errorf("%s is neither a file nor a directory", p)
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// socketURL is the URL of database db over the server's Unix socket.
func (s *Server) socketURL(db string) string {
	u := "postgres://postgres@/" + db + "?host=" + url.QueryEscape(s.dir) + "&sslmode=disable"
	if p := s.opts.Settings["port"]; p != "" {
		u += "&port=" + url.QueryEscape(p)
	}
	return u
}

// Host returns the directory of the server's Unix socket, which is what
// a connection string's host names. It is empty for a server EnvURL
// names.
func (s *Server) Host() string { return s.dir }

// Port returns the server's port, which names its socket in Host: 5432
// unless Options.Settings set another.
func (s *Server) Port() int {
	if p, err := strconv.Atoi(s.opts.Settings["port"]); err == nil {
		return p
	}
	return 5432
}

// settings are the server's configuration parameters.
func (s *Server) settings() []string {
	set := map[string]string{
		"listen_addresses":         "",
		"unix_socket_directories":  s.dir,
		"max_connections":          "200",
		"shared_preload_libraries": "pg_stat_statements",
		"log_min_messages":         "warning",
		"timezone":                 "UTC",
	}
	if !s.opts.Durable {
		set["fsync"] = "off"
		set["synchronous_commit"] = "off"
		set["full_page_writes"] = "off"
	}
	for k, v := range s.opts.Settings {
		set[k] = v
	}
	var args []string
	for k, v := range set {
		args = append(args, "-c", k+"="+v)
	}
	return args
}

// Restart starts the server if it is stopped, and waits until it takes
// connections. The server keeps its data and its URL across a Stop and
// Restart. It is an error on a server EnvURL names.
func (s *Server) Restart() error {
	if s.external {
		return errors.New("pgtest: an existing server is not the test's to start")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := s.command("postgres", append([]string{"-D", filepath.Join(s.dir, "data")}, s.settings()...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// The server goes when the test binary does, even if it is killed
	// before it can stop the server.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	// A process group of its own, which Crash kills whole.
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		log.Close()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	// Wait until it takes connections: it is up in well under a second
	// on an idle machine, but give a loaded one a minute.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.socketURL("postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("postgres exited at start-up: %v\n%s", err, s.logTail())
		case <-ctx.Done():
			s.stopLocked(syscall.SIGQUIT)
			return fmt.Errorf("postgres did not take connections within a minute: %v\n%s", err, s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop stops the server with a fast shutdown: open connections are
// closed, and clients see their connection end. It is an error on a
// server EnvURL names.
func (s *Server) Stop() error {
	if s.external {
		return errors.New("pgtest: an existing server is not the test's to stop")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked(syscall.SIGINT)
}

// Kill stops the server at once, as a crash would (SIGKILL of the
// postmaster's children follows from its immediate shutdown); Restart
// then recovers it from its write-ahead log.
func (s *Server) Kill() error {
	if s.external {
		return errors.New("pgtest: an existing server is not the test's to kill")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked(syscall.SIGQUIT)
}

// Crash kills the server and every process of it with SIGKILL at once,
// as the loss of its machine would: no process writes, answers or
// closes a connection after it. Its data directory is left as the kill
// left it; Restart recovers it from its write-ahead log.
func (s *Server) Crash() error {
	if s.external {
		return errors.New("pgtest: an existing server is not the test's to crash")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	// The postmaster leads its process group (Restart), and its children
	// are in it.
	if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	<-s.exited
	s.cmd = nil
	return nil
}

func (s *Server) stopLocked(sig syscall.Signal) error {
	if s.cmd == nil {
		return nil
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
	return nil
}

// Close stops the server and removes its directory. It does nothing to a
// server EnvURL names.
func (s *Server) Close() error {
	if s.external {
		return nil
	}
	s.mu.Lock()
	err := s.stopLocked(syscall.SIGINT)
	s.mu.Unlock()
	if rmErr := os.RemoveAll(s.dir); err == nil {
		err = rmErr
	}
	return err
}

// logTail returns the end of the server's log, for an error message.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
