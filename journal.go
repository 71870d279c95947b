package azq

// journal is where a durable queue (Open) records its changes; a queue in
// memory has none (nil), and pays a nil check per change for it.
//
// The queue calls it with its lock held, after each change and in their
// order, once per change: what it records, in the queue's own terms. Each
// method but take returns the number of the record appended, which the
// queue passes to wait once it has released its lock (unlockSynced), so
// that an operation is acknowledged only once its record would survive a
// crash, and concurrent operations share a sync (group commit). The
// durable mode's face (durable*.go) implements it; nothing else in the
// package knows the log.
type journal interface {
	// put records the message n put into slot.
	put(slot uint32, n *node) uint64
	// take gathers a message that a Get took, and get records the Get,
	// which hid the messages taken until visible. The Get gathers them
	// one by one so that no slice of the caller's reaches the journal.
	take(slot uint32, n *node)
	get(visible int64) uint64
	// batchPut gathers a message that PutBatch put into slot, and
	// putBatch records the batch's Puts as one record, so that a crash
	// keeps all of them or none; batchDelete and deleteBatch do the same
	// for DeleteBatch's deletions.
	batchPut(slot uint32, n *node)
	putBatch() uint64
	batchDelete(slot uint32)
	deleteBatch() uint64
	// update records an Update that left the message n in slot as it is
	// now, with new content if content is set.
	update(slot uint32, n *node, content bool) uint64
	// delete records the deletion of the message in slot.
	delete(slot uint32) uint64
	// clear records a Clear, and deleteQueue the deletion of the queue
	// (Close, Service.DeleteQueue).
	clear() uint64
	deleteQueue() uint64
	// metadata and policies record the queue's new metadata and access
	// policies.
	metadata(md map[string]string) uint64
	policies(ps []AccessPolicy) uint64
	// wait returns once record lsn is durable, with the queue's lock
	// released; ErrStorageFailure if it cannot be.
	wait(lsn uint64) error
}

// serviceJournal is where a durable Service records the creation of its
// queues; an in-memory Service has none (nil).
type serviceJournal interface {
	// create records the creation of q, a new queue whose name, number
	// and metadata are set, and returns its journal and the record's
	// number. The Service's lock must be held.
	create(q *Queue) (journal, uint64)
	// last returns the number of the last record appended: CreateQueue
	// of a queue that exists waits for it, since the queue's creation
	// may not be durable yet.
	last() uint64
	// wait is journal.wait.
	wait(lsn uint64) error
	// close ends a durable Service (see Service.Close).
	close() error
}
