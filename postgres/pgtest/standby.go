package pgtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// StartStandby starts a hot standby of s, a server of the test's own
// (Start), stopped and removed when tb ends: a base backup of s
// (pg_basebackup -R) that streams s's changes and answers reads, but
// refuses every write, as a replica that a URL of several hosts may reach
// does. Its URL is that of its own socket.
func (s *Server) StartStandby(tb testing.TB) *Server {
	tb.Helper()
	if s.external {
		tb.Fatal("pgtest: a standby is made of a server of the test's own")
	}
	st, err := s.standby()
	if err != nil {
		unavailable(tb, err)
	}
	tb.Cleanup(func() {
		if err := st.Close(); err != nil {
			tb.Error(err)
		}
	})
	return st
}

func (s *Server) standby() (*Server, error) {
	dir, err := os.MkdirTemp(tempRoot(s.owner), "azq-pgtest-standby-")
	if err != nil {
		return nil, err
	}
	st := &Server{dir: dir, bin: s.bin, owner: s.owner, opts: s.opts}
	st.url = st.socketURL("postgres")
	if s.owner != nil {
		if err := os.Chown(dir, int(s.owner.Uid), int(s.owner.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	cmd := s.command("pg_basebackup", "-h", s.dir, "-U", "postgres", "-D", filepath.Join(dir, "data"), "-R", "-X", "stream", "-c", "fast")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_basebackup: %v\n%s", err, out)
	}
	if err := st.Restart(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return st, nil
}

// Freeze stops the server's processes (SIGSTOP), as a server that hangs
// does: connections stay open, and nothing answers on them or on new
// ones. Thaw resumes them. It is an error on a server EnvURL names.
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
