package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/azqlib/azq/postgres/pgtest"
)

// runAsAzqd is set in the environment of a process the tests start to be
// azqd: the test binary itself, run as azqd's main, so that tests get
// real processes without building azqd.
const runAsAzqd = "AZQD_TEST_RUN_AS_AZQD"

func TestMain(m *testing.M) {
	if os.Getenv(runAsAzqd) == "1" {
		main()
		os.Exit(0)
	}
	if role := os.Getenv(failoverRoleEnv); role != "" {
		// A producer or consumer process of failover_test.go.
		os.Exit(runFailoverRole(role))
	}
	// The PostgreSQL server of the tests that need one, started by the
	// first of them (pgtest.Shared) and stopped when all have run.
	os.Exit(pgtest.Main(m))
}

// process is azqd running as a process of its own.
type process struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string // the endpoint it printed
	stderr lockedBuffer
	lines  chan string
}

// startProcess starts azqd in a process of its own with args (and
// -addr 127.0.0.1:0) and waits until it has printed its connection
// strings; it is stopped at the end of the test if it still runs.
func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	p := launch(t, args...)
	p.ready(args)
	return p
}

// startProcesses starts several at once, which is quicker on a busy
// machine than one after the other.
func startProcesses(t *testing.T, args ...[]string) []*process {
	t.Helper()
	ps := make([]*process, len(args))
	for i, a := range args {
		ps[i] = launch(t, a...)
	}
	for i, p := range ps {
		p.ready(args[i])
	}
	return ps
}

// launch starts the process without waiting for it to serve.
func launch(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{t: t, lines: make(chan string, 64)}
	p.cmd = exec.Command(os.Args[0], append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	p.cmd.Env = append(os.Environ(), runAsAzqd+"=1")
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	return p
}

// ready waits until the process has printed its connection strings.
func (p *process) ready(args []string) {
	t := p.t
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.cmd.Wait()
				t.Fatalf("azqd %q stopped before serving: %s", args, p.stderr.String())
			}
			if _, rest, ok := strings.Cut(l, ", serving the Azure Queue REST API on "); ok {
				p.base = rest
			}
			if _, conn, ok := strings.Cut(l, ": "); ok && strings.HasPrefix(conn, "DefaultEndpointsProtocol=") {
				return
			}
		case <-deadline:
			t.Fatalf("azqd %q printed no connection string: %s", args, p.stderr.String())
		}
	}
}

// stopProcesses stops the processes with SIGTERM, as a terminal or a
// container engine does, all at once, and waits for each to exit
// cleanly.
func stopProcesses(t *testing.T, ps ...*process) {
	t.Helper()
	for _, p := range ps {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range ps {
		for range p.lines {
		}
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("azqd exited with %v: %s", err, p.stderr.String())
		}
	}
}

// TestTwoProcessesOneDataDirectory: two azqd serving different accounts
// from one -data directory each keep their own clock. Before, they
// shared one clock file: the second to move its clock overwrote the
// first's, and the first came back after a restart 23 hours early. One
// account cannot be served by two processes at once: the second is
// refused, saying why.
func TestTwoProcessesOneDataDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const key = "a2V5MQ=="
	alphaArgs := []string{"-data", dir, "-clock-control", "-account", "alpha:" + key}
	betaArgs := []string{"-data", dir, "-clock-control", "-account", "beta:" + key}
	ps := startProcesses(t, alphaArgs, betaArgs)
	alpha, beta := ps[0], ps[1]

	alpha0 := clockCall(t, "GET", alpha.base+"/_azq/clock", 200).Now
	beta0 := clockCall(t, "GET", beta.base+"/_azq/clock", 200).Now
	clockCall(t, "POST", alpha.base+"/_azq/clock/advance?by=24h", 200)
	clockCall(t, "POST", beta.base+"/_azq/clock/advance?by=1h", 200)

	// alpha is taken: a second process for it stops at once.
	again := exec.Command(os.Args[0], append([]string{"-addr", "127.0.0.1:0"}, alphaArgs...)...)
	again.Env = append(os.Environ(), runAsAzqd+"=1")
	out, err := again.CombinedOutput()
	if err == nil || !strings.Contains(string(out), filepath.Join(dir, "alpha")+" is locked: another process") {
		t.Fatalf("a second azqd for alpha: %v\n%s", err, out)
	}

	stopProcesses(t, alpha, beta)
	ps = startProcesses(t, alphaArgs, betaArgs)
	alpha, beta = ps[0], ps[1]
	if now := clockCall(t, "GET", alpha.base+"/_azq/clock", 200).Now; !now.Equal(alpha0.Add(24 * time.Hour)) {
		t.Errorf("alpha resumed at %v, want %v, 24 hours after it started", now, alpha0.Add(24*time.Hour))
	}
	if now := clockCall(t, "GET", beta.base+"/_azq/clock", 200).Now; !now.Equal(beta0.Add(time.Hour)) {
		t.Errorf("beta resumed at %v, want %v, an hour after it started", now, beta0.Add(time.Hour))
	}
	stopProcesses(t, alpha, beta)
}
