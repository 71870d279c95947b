package postgres

import "context"

// Waiting reports how many Receive calls wait on the queue name, and
// whether the queue's timer is armed.
func (s *Service) Waiting(name string) (waiters int, timerArmed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.waits[name]
	if ws == nil {
		return 0, false
	}
	return ws.waiters, ws.timer != nil
}

// Registered reports whether the queue name is registered in the waiters
// table for the Service's listening connection.
func (s *Service) Registered(name string) bool {
	s.mu.Lock()
	ws := s.waits[name]
	s.mu.Unlock()
	if ws == nil || ws.regMu.lock(context.Background()) != nil {
		return false
	}
	defer ws.regMu.unlock()
	return ws.regGen != 0
}

// ListenerPID returns the backend process id of the listening
// connection, 0 while there is none.
func (s *Service) ListenerPID() uint32 {
	s.mu.Lock()
	l := s.lis
	s.mu.Unlock()
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pid
}

// RemoveBatch is the most rows one statement removes.
const RemoveBatch = removeBatch

// Channel returns the channel on which the Service's Puts notify.
func (s *Service) Channel() string { return s.channel }
