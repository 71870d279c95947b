package azq

// slotStore holds a queue's messages in fixed-size chunks of nodes, addressed
// by a 32-bit slot index. Chunks keep nodes contiguous (no allocation per
// message, good locality) and never move, so a slot stays valid for as long
// as its message lives. Freed slots are reused last-in first-out, while they
// are still warm in the cache.
type slotStore struct {
	chunks [][]node
	free   []uint32
	next   uint32 // slots below next have been handed out at least once
}

const (
	chunkShift = 12
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1
)

// alloc returns a free slot and its node, which the caller fills in.
func (s *slotStore) alloc() (uint32, *node) {
	if n := len(s.free); n > 0 {
		slot := s.free[n-1]
		s.free = s.free[:n-1]
		return slot, s.at(slot)
	}
	slot := s.next
	if int(slot>>chunkShift) == len(s.chunks) {
		s.chunks = append(s.chunks, make([]node, chunkSize))
	}
	s.next++
	return slot, s.at(slot)
}

// at returns the node at slot, which must have been allocated.
func (s *slotStore) at(slot uint32) *node {
	return &s.chunks[slot>>chunkShift][slot&chunkMask]
}

// lookup returns the node at slot if slot has ever been allocated and is in
// use. Receipts carry slots from outside, so this one checks bounds.
func (s *slotStore) lookup(slot uint32) *node {
	if slot >= s.next {
		return nil
	}
	n := s.at(slot)
	if n.seq == 0 {
		return nil
	}
	return n
}

// release frees slot. Zeroing the node drops its content for the garbage
// collector and marks the slot free (seq 0).
func (s *slotStore) release(slot uint32) {
	*s.at(slot) = node{}
	s.free = append(s.free, slot)
}

// reset frees every slot and the memory behind them.
func (s *slotStore) reset() {
	*s = slotStore{}
}

// allocAt claims slot for a message being restored from disk, which must
// land in the slot its pop receipt names. It returns the node, or nil if
// the slot is in use. The free list is not kept up to date while restoring;
// rebuildFree makes it again afterwards.
func (s *slotStore) allocAt(slot uint32) *node {
	for int(slot>>chunkShift) >= len(s.chunks) {
		s.chunks = append(s.chunks, make([]node, chunkSize))
	}
	if slot >= s.next {
		s.next = slot + 1
	}
	if n := s.at(slot); n.seq == 0 {
		return n
	}
	return nil
}

// rebuildFree makes the free list from the slots below next that are not
// in use, after a restore placed messages with allocAt.
func (s *slotStore) rebuildFree() {
	s.free = s.free[:0]
	for slot := s.next; slot > 0; slot-- {
		if s.at(slot-1).seq == 0 {
			s.free = append(s.free, slot-1)
		}
	}
}
