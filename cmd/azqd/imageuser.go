package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/azqlib/azq/server"
)

// imageUserEnv names the environment variable that tells azqd, started as
// root, which user to run as: "uid:gid", numbers, since a scratch image
// has no user database. The container image sets it to 65532:65532 and
// starts azqd as root, as Azurite's image runs, so that Azurite's
// "--location /data" starts on any volume: azqd makes the data directory
// writable by that user (see prepareDataDir), then gives up root for good
// before it reads a request. Unset, or when azqd does not start as root,
// it changes nothing.
const imageUserEnv = "AZQD_USER"

// imageUser is a parsed AZQD_USER.
type imageUser struct{ uid, gid int }

func (u imageUser) String() string { return fmt.Sprintf("%d:%d", u.uid, u.gid) }

// parseImageUser parses AZQD_USER's value.
func parseImageUser(s string) (imageUser, error) {
	us, gs, ok := strings.Cut(s, ":")
	uid, err1 := strconv.ParseUint(us, 10, 31)
	gid, err2 := strconv.ParseUint(gs, 10, 31)
	if !ok || err1 != nil || err2 != nil {
		return imageUser{}, fmt.Errorf("%s=%q: want uid:gid, two numbers (the image has no user names)", imageUserEnv, s)
	}
	return imageUser{int(uid), int(gid)}, nil
}

// becomeImageUser is what azqd does first when AZQD_USER (spec) is set
// and it runs as root: it prepares the data directory of args, if any,
// for the user spec names, and then runs as that user, with no other
// group, for the rest of its life. It writes what it changed on the
// user's volume to stderr. A command line that does not parse is left to
// run to report, after the switch.
func becomeImageUser(args []string, spec string, stderr io.Writer) error {
	if spec == "" || os.Geteuid() != 0 {
		return nil
	}
	u, err := parseImageUser(spec)
	if err != nil {
		return err
	}
	if u.uid == 0 {
		return nil // root asked to stay root
	}
	if runtime.GOOS != "linux" {
		return switchUser(u) // which refuses, before anything is changed
	}
	if cfg, _, err := parseArgs(args); err == nil && cfg.dataDir != "" {
		changed, err := prepareDataDir(cfg, u)
		if err != nil {
			return fmt.Errorf("preparing %s for %s (%s): %w", cfg.dataDir, u, imageUserEnv, err)
		}
		for _, c := range changed {
			fmt.Fprintf(stderr, "azqd: started as root: %s now belongs to %s, the user azqd runs as (%s)\n", c, u, imageUserEnv)
		}
	}
	return switchUser(u)
}

// prepareDataDir makes cfg's data directory usable by u, as root, before
// azqd becomes u: it creates the directory if missing; gives it to u if u
// cannot create files in it (a volume mounted from a root-owned
// directory, or one Azurite's image, which runs as root, wrote), unless u
// owns it already and made it read-only, which stays so; and
// gives u the entries that are azqd's own (each account's directory, its
// properties file, the saved clock, and the --debug log) where an
// earlier run as root left them root's. Everything else in the directory,
// Azurite's workspace files among it, is left as it is: azqd never writes
// it. It returns the paths whose owner it changed.
func prepareDataDir(cfg *config, u imageUser) (changed []string, err error) {
	dir := cfg.dataDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if o, _ := ownerOf(fi); !writableBy(fi, u) && o != u {
		if err := os.Chown(dir, u.uid, u.gid); err != nil {
			return nil, err
		}
		changed = append(changed, dir)
	}
	accounts := cfg.accounts
	if len(accounts) == 0 {
		accounts = []server.Account{server.DevelopmentAccount()}
	}
	var own []string
	for _, a := range accounts {
		own = append(own, filepath.Join(dir, a.Name), propertiesFile(dir, a.Name))
	}
	own = append(own, filepath.Join(dir, "clock"))
	if cfg.debugLog != "" {
		own = append(own, cfg.debugLog)
	}
	for _, p := range own {
		n := 0
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if owner, ok := ownerOf(fi); ok && owner == u {
				return nil
			}
			n++
			return os.Lchown(path, u.uid, u.gid)
		})
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return changed, err
		}
		if n > 0 {
			changed = append(changed, p)
		}
	}
	return changed, nil
}

// writableBy reports whether u, with no group but its own, may create
// files in the directory fi describes, by its mode bits.
func writableBy(fi fs.FileInfo, u imageUser) bool {
	owner, ok := ownerOf(fi)
	if !ok {
		return false
	}
	perm := fi.Mode().Perm()
	const wx = 0o3 // write and search, the bits creating a file needs
	switch {
	case owner.uid == u.uid:
		return perm>>6&wx == wx
	case owner.gid == u.gid:
		return perm>>3&wx == wx
	}
	return perm&wx == wx
}
