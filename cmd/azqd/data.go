package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
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
// on stdout; the Services log to log (failed checkpoints among it). With
// -clock-control, the mock clock resumes at the time it was saved at,
// before the Services open, so that expiry is judged at the emulator's
// time, and is saved again after every move. Without -data it returns
// nil: every account is in memory.
func openData(cfg *config, ctl *clockControl, stdout io.Writer, log *slog.Logger) (map[string]azq.QueueService, error) {
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
			// The same bounds as the clock endpoints: azq's times are
			// Unix nanoseconds.
			if t.After(maxClockTime) || t.Before(minClockTime) {
				return nil, fmt.Errorf("%s: %s is outside the times azq represents, %s to %s", clockFile,
					t.UTC().Format(time.RFC3339Nano), minClockTime.Format(time.RFC3339Nano), maxClockTime.Format(time.RFC3339Nano))
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
	services := map[string]azq.QueueService{}
	for _, a := range accounts {
		opts := []azq.DurableOption{azq.WithLogger(log.With("account", a.Name))}
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

// storageLogger is the log of the durable Services: the request log if
// there is one, else warnings and errors on stderr, so that a failed
// checkpoint or a storage failure is always reported.
func storageLogger(requests *slog.Logger, stderr io.Writer) *slog.Logger {
	if requests != nil {
		return requests
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// propertiesFile is where -data keeps an account's service properties
// (CORS, logging and metrics settings): beside its directory, out of the
// durable Service's.
func propertiesFile(dataDir, account string) string {
	return filepath.Join(dataDir, account+".properties.xml")
}

// saveProperties returns the server's Options.SaveProperties for -data,
// or nil without it.
func saveProperties(cfg *config) func(account string, doc []byte) error {
	if cfg.dataDir == "" {
		return nil
	}
	return func(account string, doc []byte) error {
		return writeFileSynced(propertiesFile(cfg.dataDir, account), doc)
	}
}

// loadProperties restores the service properties -data saved, if any.
func loadProperties(cfg *config, api *server.Server, accounts []server.Account) error {
	if cfg.dataDir == "" {
		return nil
	}
	for _, a := range accounts {
		name := propertiesFile(cfg.dataDir, a.Name)
		doc, err := os.ReadFile(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			err = api.LoadProperties(a.Name, doc)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// closeAll closes services opened before a later step of start-up failed.
func closeAll(services map[string]azq.QueueService) {
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
