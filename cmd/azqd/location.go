package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/azqlib/azq/server"
)

// azuriteWorkspaceFiles are the names Azurite 3 gives its data in a
// workspace (its --location): each service's LokiJS database and extent
// database, and the directory of its extents (message and blob bodies).
var azuriteWorkspaceFiles = []string{
	"__azurite_db_queue__.json", "__azurite_db_queue_extent__.json", "__queuestorage__",
	"__azurite_db_blob__.json", "__azurite_db_blob_extent__.json", "__blobstorage__",
	"__azurite_db_table__.json", "__azurite_db_table_extent__.json", "__tablestorage__",
}

// azuriteWorkspace returns the names of Azurite's files that dir holds.
func azuriteWorkspace(dir string) []string {
	var found []string
	for _, name := range azuriteWorkspaceFiles {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			found = append(found, name)
		}
	}
	return found
}

// warnAzuriteWorkspace says on stderr, before azqd reports what it
// recovered, that the data directory is Azurite's workspace: a compose
// file moved from Azurite to azqd with its volume kept is the common way
// to get here, and "recovered 0 queues" alone would read as lost data.
// azqd starts all the same, beside Azurite's files, which it neither
// reads nor writes, so that going back to Azurite finds them as they were.
func warnAzuriteWorkspace(dir string, accounts []server.Account, stderr io.Writer) {
	if dir == "" {
		return
	}
	found := azuriteWorkspace(dir)
	if len(found) == 0 {
		return
	}
	own := make([]string, 0, len(accounts))
	for _, a := range accounts {
		own = append(own, filepath.Join(dir, a.Name))
	}
	fmt.Fprintf(stderr, "azqd: warning: %s is an Azurite workspace (it holds %s): azqd cannot read Azurite's data, "+
		"so the queues and messages Azurite kept there are not served here. azqd keeps its own beside them, in %s, "+
		"and never changes Azurite's files. To start clean, give --location (or -data) an empty directory or a new volume; "+
		"to get Azurite's queues back, run Azurite on %s again.\n",
		dir, strings.Join(found, ", "), strings.Join(own, ", "), dir)
}

// dataDirError adds, to a data directory that azqd may not write, who
// azqd runs as, who owns the directory, and what to do; azqd then exits:
// it never falls back to keeping the queues in memory.
func dataDirError(dir string, err error) error {
	if !errors.Is(err, fs.ErrPermission) {
		return err
	}
	owner := ""
	if fi, serr := os.Stat(dir); serr == nil {
		if o, ok := ownerOf(fi); ok {
			owner = fmt.Sprintf(", which belongs to %s with mode %v", o, fi.Mode().Perm())
		}
	}
	return &hintError{
		fmt.Errorf("the data directory %s: %w", dir, err),
		fmt.Sprintf("azqd runs as %d:%d and may not write %s%s. Give it a directory it may write (chown %d:%d %s), "+
			"or, in azqd's container image, run the container as its default user, root: azqd then makes the directory its own and runs as %s=65532:65532",
			os.Geteuid(), os.Getegid(), dir, owner, os.Geteuid(), os.Getegid(), dir, imageUserEnv),
	}
}
