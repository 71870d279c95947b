package azq

import "github.com/azqlib/azq/internal/vfs"

// WithFS is withFS for the tests of package azq_test.
func WithFS(fs vfs.FS) DurableOption { return withFS(fs) }

// checkpoint writes a checkpoint of the durable Service s on the caller's
// goroutine, as its checkpointer does.
func (s *Service) checkpoint() error { return s.durable().log.CheckpointNow() }
