package pgtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// StandbyName is the name the standby of StartReplicated streams under
// (its application_name), which the primary's synchronous_standby_names
// names when the pair is synchronous.
const StandbyName = "azq_standby"

// ReplicationUser is the role the standby of StartReplicated streams
// as: a role with the REPLICATION attribute and nothing else.
const ReplicationUser = "azq_replication"

// ReplicatedOptions configure the servers StartReplicated starts.
type ReplicatedOptions struct {
	// Synchronous makes the standby a synchronous one: the primary's
	// synchronous_standby_names names it and its synchronous_commit is
	// on, so that a commit returns only once the standby has its
	// write-ahead log. Otherwise the standby streams asynchronously, and
	// a commit returns before the standby has it.
	Synchronous bool
	// Settings are more configuration parameters of both servers, as
	// Options.Settings.
	Settings map[string]string
}

// StandbyPort is the port of the standby of StartReplicated, which names
// its Unix socket (Host); the primary's is 5432. Different ports let a
// connection string's port list differ, as between machines.
const StandbyPort = 5433

// StartReplicated starts a primary and a hot standby that streams the
// primary's write-ahead log, both of tb's own and stopped and removed
// when tb ends: the primary with wal_level=replica; a role for
// replication (ReplicationUser), which the cluster's pg_hba.conf lets
// connect for replication over the Unix socket; the standby made by
// pg_basebackup -R from the running primary, with standby.signal and its
// primary_conninfo naming the primary's socket and StandbyName. It
// returns once the standby streams (and, with opts.Synchronous, once the
// primary counts it as its synchronous standby). Each listens on a Unix
// socket in a directory of its own (Host, Port), never on a network
// port. Without PostgreSQL (or its pg_basebackup) it skips tb, or fails
// it in CI.
//
// It is the one way this package makes a standby: an asynchronous one
// for a test of what a standby answers (reads, and a refusal of every
// write) or of a failover that may lose the last commits, a synchronous
// one for a failover that must not. Crash the primary and Promote the
// standby to fail over; Stop or Freeze the synchronous standby to make
// the primary's commits wait for it. Both run with
// fsync off, as every server of this package does: what a commit waited
// for has reached the standby's kernel, which survives the primary's
// crash, not its disk.
func StartReplicated(tb testing.TB, opts ReplicatedOptions) (primary, standby *Server) {
	tb.Helper()
	// Only a missing installation skips; a pair that the installed
	// PostgreSQL fails to make fails tb.
	bin, err := binDir()
	if err == nil && !isExec(filepath.Join(bin, "pg_basebackup")) {
		err = fmt.Errorf("no pg_basebackup beside %s", filepath.Join(bin, "initdb"))
	}
	if err == nil {
		_, err = serverUser()
	}
	if err != nil {
		unavailable(tb, err)
	}
	p, s, err := startReplicated(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for _, srv := range []*Server{s, p} {
			if err := srv.Close(); err != nil {
				tb.Error(err)
			}
		}
	})
	return p, s
}

func startReplicated(opts ReplicatedOptions) (primary, standby *Server, err error) {
	set := map[string]string{
		"wal_level":       "replica",
		"max_wal_senders": "4",
		"hot_standby":     "on",
	}
	// A commit waits for its write-ahead log to reach the kernel, and,
	// once synchronous_standby_names names the standby, for the standby
	// to have it: commits of the tests' default, off, would wait for
	// neither.
	set["synchronous_commit"] = "on"
	maps.Copy(set, opts.Settings)
	primary, err = start(Options{Settings: set})
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			primary.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := primary.exec(ctx, "CREATE ROLE "+ReplicationUser+" WITH REPLICATION LOGIN"); err != nil {
		return nil, nil, err
	}

	standbySet := maps.Clone(set)
	standbySet["port"] = strconv.Itoa(StandbyPort)
	// After the primary's loss, the standby tries to reach it again at
	// this interval, and a promotion waited for the next try: 5 s by
	// default, the most of a test's failover.
	standbySet["wal_retrieve_retry_interval"] = "100ms"
	standbySet["primary_conninfo"] = fmt.Sprintf("host=%s port=%d user=%s application_name=%s",
		primary.dir, primary.Port(), ReplicationUser, StandbyName)
	standby = &Server{bin: primary.bin, owner: primary.owner, opts: Options{Settings: standbySet}}
	if standby.dir, err = os.MkdirTemp(tempRoot(primary.owner), "azq-pgtest-standby-"); err != nil {
		return nil, nil, err
	}
	standby.url = standby.socketURL("postgres")
	if primary.owner != nil {
		if err := os.Chown(standby.dir, int(primary.owner.Uid), int(primary.owner.Gid)); err != nil {
			os.RemoveAll(standby.dir)
			return nil, nil, err
		}
	}
	// A fast checkpoint, not a spread one: the primary has next to
	// nothing to write.
	cmd := standby.command("pg_basebackup", "-D", filepath.Join(standby.dir, "data"), "-h", primary.dir,
		"-p", strconv.Itoa(primary.Port()), "-U", ReplicationUser, "-R", "-X", "stream", "-c", "fast", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(standby.dir)
		return nil, nil, fmt.Errorf("pg_basebackup: %v\n%s", err, out)
	}
	if err := standby.Restart(); err != nil {
		os.RemoveAll(standby.dir)
		return nil, nil, fmt.Errorf("the standby: %w", err)
	}
	defer func() {
		if err != nil {
			standby.Close()
		}
	}()
	if opts.Synchronous {
		// Set once the standby is made: a commit on the primary waits for
		// the standby from now on.
		if err := primary.exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '"+StandbyName+"'"); err != nil {
			return nil, nil, err
		}
		if err := primary.exec(ctx, "SELECT pg_reload_conf()"); err != nil {
			return nil, nil, err
		}
	}
	want := "async"
	if opts.Synchronous {
		want = "sync"
	}
	if err := primary.waitStandby(ctx, want); err != nil {
		return nil, nil, err
	}
	return primary, standby, nil
}

// waitStandby waits until the primary's replication state shows the
// standby streaming with sync_state want.
func (s *Server) waitStandby(ctx context.Context, want string) error {
	for {
		conn, err := pgx.Connect(ctx, s.url)
		if err != nil {
			return err
		}
		var state, sync string
		err = conn.QueryRow(ctx, "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1", StandbyName).Scan(&state, &sync)
		conn.Close(ctx)
		if err == nil && state == "streaming" && sync == want {
			return nil
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the standby does not stream as %s (state %q, sync_state %q): %w\n%s", want, state, sync, ctx.Err(), s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Promote makes a standby a primary (pg_promote), and returns once it
// takes writes. It is an error on a server that is not a standby.
func (s *Server) Promote() error {
	if s.external {
		return errors.New("pgtest: an existing server is not the test's to promote")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var promoted bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&promoted); err != nil {
		return fmt.Errorf("pg_promote: %w", err)
	}
	if !promoted {
		return fmt.Errorf("pg_promote: not promoted within a minute\n%s", s.logTail())
	}
	return nil
}

// exec runs sql on the server's database for tests.
func (s *Server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// Freeze stops the server's processes (SIGSTOP), as a server that hangs
// does: connections stay open, and nothing answers on them or on new
// ones; a frozen synchronous standby holds up every commit of its
// primary. Thaw resumes them; Thaw a frozen server before tb ends, whose
// Close would wait for it. It is an error on a server EnvURL names.
func (s *Server) Freeze() error { return s.signalAll(syscall.SIGSTOP) }

// Thaw resumes the processes Freeze stopped.
func (s *Server) Thaw() error { return s.signalAll(syscall.SIGCONT) }

// signalAll sends sig to the postmaster, then to each of its children.
func (s *Server) signalAll(sig syscall.Signal) error {
	if s.external {
		return errors.New("pgtest: an existing server is not the test's to signal")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("pgtest: the server is stopped")
	}
	pid := s.cmd.Process.Pid
	if err := syscall.Kill(pid, sig); err != nil {
		return err
	}
	kids, err := children(pid)
	if err != nil {
		return err
	}
	for _, k := range kids {
		syscall.Kill(k, sig) // one that exited meanwhile is no matter
	}
	return nil
}

// children returns the processes whose parent is pid, from /proc.
func children(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var kids []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after
		// its closing parenthesis.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 2 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, n)
		}
	}
	return kids, nil
}
