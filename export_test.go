package azq

import "github.com/azqlib/azq/internal/vfs"

// WithFS is withFS for the tests of package azq_test.
func WithFS(fs vfs.FS) DurableOption { return withFS(fs) }
