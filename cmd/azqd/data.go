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
	"github.com/azqlib/azq/server/admin"
	"github.com/benbjohnson/clock"
)

// openData opens a durable azq.Service for each account under
// cfg.dataDir (one directory per account) and reports what it recovered
// on stdout; the Services log to log (failed checkpoints among it). With
// -clock-control (mock not nil), the mock clock resumes at the time saved
// for the accounts, before the Services open, so that expiry is judged
// at the emulator's time; saveClock, which saves a time for each
// account, is for the clock endpoints to call after every move.
// Without -data it returns nil: every account is in memory.
func openData(cfg *config, mock *clock.Mock, stdout io.Writer, log *slog.Logger) (services map[string]azq.QueueService, saveClock func(time.Time) error, err error) {
	if cfg.dataDir == "" {
		return nil, nil, nil
	}
	if err := os.MkdirAll(cfg.dataDir, 0o755); err != nil {
		return nil, nil, err
	}
	accounts := cfg.accounts
	if len(accounts) == 0 {
		accounts = []server.Account{server.DevelopmentAccount()}
	}
	if mock != nil {
		t, found, err := savedClock(cfg.dataDir, accounts)
		if err != nil {
			return nil, nil, err
		}
		if found {
			// The saved time, even if the real clock is later: the
			// emulator's time stands still between runs as within one.
			mock.Set(t)
		}
	}
	services = map[string]azq.QueueService{}
	for _, a := range accounts {
		opts := []azq.DurableOption{azq.WithLogger(log.With("account", a.Name))}
		if mock != nil {
			opts = append(opts, azq.WithClock(mock))
		}
		dir := filepath.Join(cfg.dataDir, a.Name)
		s, err := azq.Open(dir, opts...)
		if err != nil {
			closeAll(services)
			return nil, nil, err
		}
		services[a.Name] = s
		st, _ := s.DurableState()
		fmt.Fprintf(stdout, "azqd: %s: recovered %d queues and %d messages from %s in %v\n",
			a.Name, st.Recovery.Queues, st.Recovery.Messages, dir, st.Recovery.Duration.Round(time.Microsecond))
	}
	if mock != nil {
		// Saved only once the Services hold their directories' locks:
		// an azqd refused an account another one serves must not write
		// that account's clock.
		saveClock = func(t time.Time) error {
			line := []byte(t.UTC().Format(time.RFC3339Nano) + "\n")
			for _, a := range accounts {
				if err := writeFileSynced(clockFile(cfg.dataDir, a.Name), line); err != nil {
					return err
				}
			}
			return nil
		}
		if err := saveClock(mock.Now()); err != nil {
			closeAll(services)
			return nil, nil, err
		}
	}
	return services, saveClock, nil
}

// clockFile is where -data keeps the -clock-control time of an account:
// beside its directory, as its properties are, so that two azqd serving
// different accounts from one directory keep a clock each.
func clockFile(dataDir, account string) string {
	return filepath.Join(dataDir, account+".clock")
}

// sharedClockFile is where azqd kept one clock for the whole directory
// before each account had its own; an account without a clock file of
// its own resumes from it.
func sharedClockFile(dataDir string) string {
	return filepath.Join(dataDir, "clock")
}

// savedClock is the time the clock resumes at for accounts: the latest
// saved for any of them, so that no account's time goes back. An account
// without a clock file of its own counts with the directory's shared one
// (sharedClockFile), if there is one. found is false when nothing was
// saved.
func savedClock(dataDir string, accounts []server.Account) (latest time.Time, found bool, err error) {
	names := make([]string, 0, len(accounts)+1)
	shared := false
	for _, a := range accounts {
		name := clockFile(dataDir, a.Name)
		if _, err := os.Stat(name); errors.Is(err, os.ErrNotExist) {
			shared = true
			continue
		}
		names = append(names, name)
	}
	if fi, err := os.Stat(sharedClockFile(dataDir)); shared && err == nil && fi.Mode().IsRegular() {
		// (Not a directory: that is the queues of an account named
		// "clock".)
		names = append(names, sharedClockFile(dataDir))
	}
	for _, name := range names {
		t, ok, err := readClockFile(name)
		if err != nil {
			return time.Time{}, false, err
		}
		if ok && (!found || t.After(latest)) {
			latest, found = t, true
		}
	}
	return latest, found, nil
}

// readClockFile reads a saved clock time; ok is false if name does not
// exist.
func readClockFile(name string) (t time.Time, ok bool, err error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	t, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%s: %w", name, err)
	}
	// The same bounds as the clock endpoints: azq's times are Unix
	// nanoseconds.
	if t.After(admin.MaxClockTime) || t.Before(admin.MinClockTime) {
		return time.Time{}, false, fmt.Errorf("%s: %s is outside the times azq represents, %s to %s", name,
			t.UTC().Format(time.RFC3339Nano), admin.MinClockTime.Format(time.RFC3339Nano), admin.MaxClockTime.Format(time.RFC3339Nano))
	}
	return t, true, nil
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
