package azqtest

import (
	"sync/atomic"

	"github.com/azqlib/azq/observe"
)

// observers holds the hook a Server reports its requests to, which a test
// may set while requests are served.
type observers struct {
	hook atomic.Pointer[func(observe.Observation)] // nil: nothing observes
}

// observe is the server's Options.Observe: it hands o to the hook set.
func (s *observers) observe(o observe.Observation) {
	if f := s.hook.Load(); f != nil {
		(*f)(o)
	}
}

// SetObserve makes f hear of every request the server answers from now on,
// as server.Options.Observe does: its account, queue, operation, status,
// error code, outcome, duration and fault. Nil stops it. f must be safe
// for concurrent use; it runs on the request's goroutine.
//
// A metrics.Recorder's Observe counts the requests, and the Recorder
// reads the server's queues and fault hits once it watches them; the
// Server itself links no metrics stack:
//
//	rec := metrics.NewRecorder()
//	srv.SetObserve(rec.Observe)
//	rec.WatchService(srv.Account.Name, srv.Service)
//	rec.WatchFaults(srv.Faults)
func (s *Server) SetObserve(f func(observe.Observation)) {
	if f == nil {
		s.observers.hook.Store(nil)
		return
	}
	s.observers.hook.Store(&f)
}
