package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/server"
	"github.com/benbjohnson/clock"
)

// openData opens a durable azq.Service for each account under
// cfg.dataDir (one directory per account) and reports what it recovered
// on stdout. With -clock-control, the mock clock resumes at the time it
// was saved at, before the Services open, so that expiry is judged at the
// emulator's time, and is saved again after every move. Without -data it
// returns nil: every account is in memory.
func openData(cfg *config, ctl *clockControl, stdout io.Writer) (map[string]*azq.Service, error) {
	if cfg.dataDir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(cfg.dataDir, 0o755); err != nil {
		return nil, err
	}
	var clk clock.Clock
	if ctl != nil {
		clockFile := filepath.Join(cfg.dataDir, "clock")
		if b, err := os.ReadFile(clockFile); err == nil {
			t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", clockFile, err)
			}
			// The saved time, even if the real clock is later: the
			// emulator's time stands still between runs as within one.
			ctl.clk.Set(t)
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		ctl.save = func(t time.Time) error {
			return writeFileSynced(clockFile, []byte(t.UTC().Format(time.RFC3339Nano)+"\n"))
		}
		if err := ctl.save(ctl.clk.Now()); err != nil {
			return nil, err
		}
		clk = ctl.clk
	}
	accounts := cfg.accounts
	if len(accounts) == 0 {
		accounts = []server.Account{server.DevelopmentAccount()}
	}
	services := map[string]*azq.Service{}
	for _, a := range accounts {
		var opts []azq.DurableOption
		if clk != nil {
			opts = append(opts, azq.WithClock(clk))
		}
		dir := filepath.Join(cfg.dataDir, a.Name)
		s, err := azq.Open(dir, opts...)
		if err != nil {
			closeAll(services)
			return nil, err
		}
		services[a.Name] = s
		st, _ := s.DurableState()
		fmt.Fprintf(stdout, "azqd: %s: recovered %d queues and %d messages from %s in %v\n",
			a.Name, st.Recovery.Queues, st.Recovery.Messages, dir, st.Recovery.Duration.Round(time.Microsecond))
	}
	return services, nil
}

// closeAll closes services opened before a later step of start-up failed.
func closeAll(services map[string]*azq.Service) {
	for _, s := range services {
		s.Close()
	}
}

// writeFileSynced replaces name with data the safe way: a temporary file,
// synced, renamed over name, and the directory synced.
func writeFileSynced(name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(filepath.Dir(name))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
