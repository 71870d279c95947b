package postgres

import (
	"context"
	"time"
)

// purgeInterval is how often, at most, a Service removes expired messages
// while it finds few: expired messages are never returned, whether or not
// their rows are gone, so the removal only gives back space.
const purgeInterval = 10 * time.Second

// maybePurge removes a batch of expired messages, and of the messages of
// deleted queues, if the Service has not done so for purgeInterval, on
// its clock. It is lazy work in the operation that calls it (Put and
// Get), so that a Service nobody uses issues no statement; a batch that
// came back full leaves the next operation to remove another, so a
// backlog goes at the pace of the traffic, a batch at a time, and no
// operation takes long. Failures are left for the next time.
func (s *Service) maybePurge(ctx context.Context) {
	p := &s.purge
	now := s.timerClock.Now()
	p.mu.Lock()
	due := !now.Before(p.next)
	p.mu.Unlock()
	if !due || !p.running.CompareAndSwap(false, true) {
		return
	}
	defer p.running.Store(false)
	more := false
	var n int64
	if err := s.pool.QueryRow(ctx, s.sql.purgeExpired, s.now(), removeBatch).Scan(&n); err == nil && n == removeBatch {
		more = true
	}
	if rows, err := s.pool.Query(ctx, s.sql.droppedQueues); err == nil {
		var ids []int64
		for rows.Next() {
			var id int64
			if rows.Scan(&id) == nil {
				ids = append(ids, id)
			}
		}
		rows.Close()
		for _, id := range ids {
			if err := s.pool.QueryRow(ctx, s.sql.removeDropped, id, removeBatch).Scan(&n); err == nil && n == removeBatch {
				more = true
			}
		}
	}
	p.mu.Lock()
	if more {
		p.next = now
	} else {
		p.next = now.Add(purgeInterval)
	}
	p.mu.Unlock()
}
