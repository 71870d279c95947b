package azq

// slotStore holds a queue's messages in chunks of nodes, addressed by a
// 32-bit slot index. Chunks keep nodes contiguous (no allocation per
// message, good locality); freed slots are reused last-in first-out, while
// they are still warm in the cache.
//
// The store grows with what it holds: the first chunk starts at firstChunk
// nodes and doubles, moving its nodes, until it reaches chunkSize; later
// chunks have chunkSize nodes from the start and never move. So a queue
// that only ever holds a few messages costs a few nodes, not a 4,096-node
// chunk (320 KiB). Because the first chunk moves, no *node may be held
// across alloc; slots, which the indexes and receipts carry, stay valid.
// When the queue empties, trim gives the memory back.
type slotStore struct {
	chunks [][]node
	free   []uint32
	next   uint32 // slots below next have been handed out at least once
}

const (
	chunkShift = 12
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1

	// firstChunk is the size of the first chunk of a new store.
	firstChunk = 8
	// keepSlots is the most slots an emptied store keeps (see trim).
	keepSlots = 32
)

// alloc returns a free slot and its node, which the caller fills in.
func (s *slotStore) alloc() (uint32, *node) {
	if n := len(s.free); n > 0 {
		slot := s.free[n-1]
		s.free = s.free[:n-1]
		return slot, s.at(slot)
	}
	slot := s.next
	switch c := int(slot >> chunkShift); {
	case c == len(s.chunks):
		size := chunkSize
		if c == 0 {
			size = firstChunk
		}
		s.chunks = append(s.chunks, make([]node, size))
	case c == 0 && int(slot) == len(s.chunks[0]):
		grown := make([]node, min(2*len(s.chunks[0]), chunkSize))
		copy(grown, s.chunks[0])
		s.chunks[0] = grown
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

// trim gives back the memory of a store that holds no message. A store
// that never needed more than keepSlots slots is kept as it is, so that a
// queue through which a few messages at a time pass does not reallocate
// each time it empties; a larger one starts over empty. Slots start again
// from 0, so the caller must first drop every index entry that names a
// slot (they all name freed slots: the queue is empty).
func (s *slotStore) trim() {
	if s.next > keepSlots {
		*s = slotStore{}
	}
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
	c := int(slot >> chunkShift)
	if c == 0 && len(s.chunks) <= 1 {
		// Only the first chunk is needed: size it as alloc would have
		// grown it, so that a restored small queue stays small.
		size := firstChunk
		for size <= int(slot) {
			size *= 2
		}
		if len(s.chunks) == 0 {
			s.chunks = append(s.chunks, make([]node, size))
		} else if len(s.chunks[0]) < size {
			grown := make([]node, size)
			copy(grown, s.chunks[0])
			s.chunks[0] = grown
		}
	}
	if len(s.chunks) > 0 && c > 0 && len(s.chunks[0]) < chunkSize {
		// Later chunks address slots past a full first chunk.
		grown := make([]node, chunkSize)
		copy(grown, s.chunks[0])
		s.chunks[0] = grown
	}
	for c >= len(s.chunks) {
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
