// Package proctest runs producers and consumers of a queue in processes
// of their own, which a test kills, and checks what they acknowledged
// against what the queue holds: the promises of a back end shared by
// processes (package postgres, azqd on it) through restarts, crashes and
// failovers of its database.
//
// A process is the test binary run again, which the test's TestMain
// turns into a role (Produce or Consume) when the environment says so.
// Each process writes a line once a call returned, one write per line:
// "try C" before a Put of content C and "ack C" once it returned; "got C
// D V" for each message received (D its dequeue count, V its next-visible
// time in Unix nanoseconds) and "del C D" once its Delete returned; "fail
// OP CODE STATUS message" for a failed call (a Delete: "fail delete CODE
// STATUS C D message"). Check reads the lines of every process.
//
// These tests are about the real clock, since processes cannot share a
// mock one: the checks of time compare times the queue answered with,
// from one clock (the database's), so that a busy machine slows them
// without failing them.
package proctest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/azqlib/azq"
)

// Output is where a role writes its lines: a process's standard output,
// which the test reads through a pipe. Each line is one write, so that a
// process killed mid-line leaves it whole or not at all.
type Output struct {
	W io.Writer
}

func (o Output) line(format string, args ...any) {
	fmt.Fprintf(o.W, format+"\n", args...)
}

// Fail writes the line of a failed call of op, with the error's Azure
// code and status ("none 0" for an error that has none).
func (o Output) Fail(op string, err error) {
	var ae *azq.Error
	code, status := "none", 0
	if errors.As(err, &ae) {
		code, status = string(ae.Code), ae.StatusCode
	}
	o.line("fail %s %s %d %s", op, code, status, strings.ReplaceAll(err.Error(), "\n", " "))
}

// StopOnStdin returns a context that ends when the process's standard
// input closes: the test stops a role by closing it.
func StopOnStdin() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return ctx
}

// retryPause is a role's pause after a failed call, before the next.
const retryPause = 20 * time.Millisecond

// Produce puts "<name>-<n>" for n = 0, 1, … on q until stop ends,
// writing "try" before each Put and "ack" once it returned; a failed Put
// writes "fail put …" and the next content is tried.
func Produce(stop context.Context, q azq.MessageQueue, name string, out Output) {
	for n := 0; stop.Err() == nil; n++ {
		c := fmt.Sprintf("%s-%d", name, n)
		out.line("try %s", c)
		if _, err := q.Put(context.Background(), c, nil); err != nil {
			out.Fail("put", err)
			time.Sleep(retryPause)
			continue
		}
		out.line("ack %s", c)
		time.Sleep(2 * time.Millisecond) // a producer, not a flood
	}
}

// Consumer says how Consume takes messages.
type Consumer struct {
	// Receive takes up to n messages, hiding them for visibility: a
	// blocking Receive, or a Get that returns none while none is visible
	// (Consume then pauses before the next).
	Receive func(ctx context.Context, n int, visibility time.Duration) ([]azq.Message, error)
	// Take is the most messages a Receive takes.
	Take int
	// Visibility is each Receive's visibility timeout.
	Visibility time.Duration
	// Hold is the time between a Receive and the Deletes of what it
	// took.
	Hold time.Duration
}

// Consume takes messages of q as c says until stop ends, writing "got"
// for each, then, after c.Hold, deletes each and writes "del"; a failed
// call writes "fail …" and Consume goes on.
func Consume(stop context.Context, q azq.MessageQueue, c Consumer, out Output) {
	for stop.Err() == nil {
		ms, err := c.Receive(stop, c.Take, c.Visibility)
		if stop.Err() != nil {
			break
		}
		if err != nil {
			out.Fail("receive", err)
			time.Sleep(retryPause)
			continue
		}
		if len(ms) == 0 {
			time.Sleep(retryPause)
			continue
		}
		for _, m := range ms {
			out.line("got %s %d %d", m.Content, m.DequeueCount, m.NextVisibleTime.UnixNano())
		}
		time.Sleep(c.Hold)
		for _, m := range ms {
			// Not cut short by stop: a Delete that may or may not have
			// been made is what only a kill should leave.
			if err := q.Delete(context.Background(), m.ID, m.PopReceipt); err != nil {
				out.Fail("delete", fmt.Errorf("%s %d %w", m.Content, m.DequeueCount, err))
				continue
			}
			out.line("del %s %d", m.Content, m.DequeueCount)
		}
	}
}

// Line is a line a process wrote, with when the test read it.
type Line struct {
	Proc   string   // the process's name
	Fields []string // the line's words
	At     time.Time
}

// Log is what every process of a test wrote, in the order the test read
// it.
type Log struct {
	mu      sync.Mutex    // guards lines and changed
	lines   []Line        // every line so far
	changed chan struct{} // closed and replaced at each line
}

// NewLog returns an empty log.
func NewLog() *Log { return &Log{changed: make(chan struct{})} }

// Add adds a line of text that proc wrote.
func (l *Log) Add(proc, text string) {
	l.mu.Lock()
	l.lines = append(l.lines, Line{Proc: proc, Fields: strings.Fields(text), At: time.Now()})
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// Count counts the lines of kind (the first word) that match (all of
// them if match is nil).
func (l *Log) Count(kind string, match func(Line) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ln := range l.lines {
		if len(ln.Fields) > 0 && ln.Fields[0] == kind && (match == nil || match(ln)) {
			n++
		}
	}
	return n
}

// Len returns the number of lines so far.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// Snapshot returns the lines so far.
func (l *Log) Snapshot() []Line {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Line(nil), l.lines...)
}

// WaitFor waits until cond holds of the log, checking it again at each
// line; it fails t after a minute, which only a hang reaches.
func (l *Log) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		l.mu.Lock()
		changed := l.changed
		l.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// FailedSince reports whether each of procs wrote a "fail" line after
// the first from lines of the log.
func (l *Log) FailedSince(from int, procs ...string) bool {
	failed := map[string]bool{}
	for _, ln := range l.Snapshot()[from:] {
		if ln.Fields[0] == "fail" {
			failed[ln.Proc] = true
		}
	}
	for _, p := range procs {
		if !failed[p] {
			return false
		}
	}
	return true
}

// Proc is a process running a role.
type Proc struct {
	Name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when its output is read to the end and it has exited
}

// Start starts the test binary again as a process named name, with env
// added to its environment (which names its role), and adds every line
// it writes to log. The process is killed when t ends, and when the test
// binary dies.
func Start(t testing.TB, log *Log, name string, env ...string) *Proc {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Proc{Name: name, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			log.Add(name, sc.Text())
		}
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.Kill)
	return p
}

// Kill kills the process with SIGKILL and waits until it is gone and its
// output read.
func (p *Proc) Kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop asks the process to stop (its standard input closes) and waits
// until it has; it fails t if the process does not exit cleanly within a
// minute.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not stop", p.Name)
	}
	if st := p.cmd.ProcessState; st == nil || !st.Success() {
		t.Errorf("%s exited with %v", p.Name, st)
	}
}
