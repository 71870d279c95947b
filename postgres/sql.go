package postgres

import "strings"

// The statements of the back end. Each operation on a queue is one
// statement (Put and Update: one round trip of two, see lockQueue), which
// finds the queue by name in the same statement, so that a queue deleted
// and created again is followed and no cache can go stale across
// processes; a count finds the queue's id in a statement before (see
// count), which its statement checks again. {{schema}} stands for the quoted schema name; statements
// built by newStatements have it filled in.
//
// Parameters named now are the Service clock's reading in Unix
// nanoseconds, or NULL for the database's clock: coalesce picks the
// database's only then, {{dbnow}}, the start of the statement's
// transaction, which is one time for the whole statement. Durations are
// nanoseconds.
const (
	// lockQueue takes the queue name's advisory lock in shared mode for
	// the transaction, before Put and Update write. DeleteQueue and a
	// Receive that starts to wait take it in exclusive mode, which waits
	// for every Put and Update in flight, so that (a) a Put that saw the
	// queue before its deletion has committed before the deletion removes
	// the queue's messages, and (b) a Put or Update that did not see a
	// waiter's registration, and so will not notify, has committed before
	// that waiter looks at the queue. The lock comes first, in a statement of its own in the same
	// transaction, because a statement's snapshot is taken when it starts:
	// only a later statement is sure to see what was committed before the
	// lock was granted. $1, $2: the lock's key.
	sqlLockQueue = `SELECT pg_advisory_xact_lock_shared($1::int4, $2::int4)`

	// put inserts a message and tells whether any Service waits on the
	// queue, to be notified (see notify). $1 queue name, $2 the random
	// half of the message's ID, $3 visibility timeout, $4 time-to-live
	// (-1: never), $5 receipt tag, $6 content, $7 now. No row: no such
	// queue; else the message's key (seq) and times.
	sqlPut = `
INSERT INTO {{schema}}.messages (id_rand, queue_id, inserted_at, visible_at, expires_at, tag, content)
SELECT $2, q.id, t.now, {{schema}}.add_ns(t.now, $3::bigint),
	CASE WHEN $4::bigint < 0 THEN 9223372036854775807 ELSE {{schema}}.add_ns(t.now, $4::bigint) END,
	$5, $6
FROM {{schema}}.queues q, (SELECT coalesce($7::bigint, {{dbnow}}) AS now) t
WHERE q.name = $1
RETURNING seq, inserted_at, visible_at, expires_at,
	EXISTS (SELECT FROM {{schema}}.waiters w WHERE w.queue_name = $1)`

	// putBatch is put for many messages in one statement, in the order
	// of the arrays, which its ORDER BY gives their keys (seq): $2 to $6
	// hold, element by element, what put's $2 to $6 hold for one. Every
	// row has the one time $7. No row: no such queue; else a row a
	// message, with its random half to tell which, and whether any
	// Service waits on the queue, looked up once for the batch.
	sqlPutBatch = `
WITH ins AS (
INSERT INTO {{schema}}.messages (id_rand, queue_id, inserted_at, visible_at, expires_at, tag, content)
SELECT u.id_rand, q.id, t.now, {{schema}}.add_ns(t.now, u.visibility),
	CASE WHEN u.ttl < 0 THEN 9223372036854775807 ELSE {{schema}}.add_ns(t.now, u.ttl) END,
	u.tag, u.content
FROM {{schema}}.queues q, (SELECT coalesce($7::bigint, {{dbnow}}) AS now) t,
	unnest($2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bytea[])
		WITH ORDINALITY AS u (id_rand, visibility, ttl, tag, content, ord)
WHERE q.name = $1
ORDER BY u.ord
RETURNING id_rand, seq, inserted_at, visible_at, expires_at
)
SELECT ins.*, (SELECT EXISTS (SELECT FROM {{schema}}.waiters w WHERE w.queue_name = $1)) FROM ins`

	// notify wakes the Services waiting on the queue $2: a notification
	// on the channel $1, in a transaction of its own, after the Put or
	// Update that calls for it has committed. NOTIFY holds a lock of the
	// whole database from its transaction's commit until the commit is
	// on disk, so a Put that notified in its own transaction would wait
	// for every other notifying Put's disk write; alone, a notification
	// writes nothing that needs syncing, and takes the lock for moments.
	sqlNotify = `SELECT pg_notify($1, $2)`

	// get takes up to $3 visible messages of the queue $1 in order of
	// next-visible time, then insertion, skipping those another Get has
	// locked, and hides them until $2 (now) + $4. A message's new receipt
	// tag is $5 XOR its sequence number (never 0): a random seed drawn for
	// this Get, so that the tags of a Get's messages, handed to one caller
	// together, are unguessable to anyone else. The rows come in that
	// order; when none is taken, one row with a NULL seq instead tells the
	// queue's id in place of id_rand (NULL: no such queue).
	sqlGet = `
WITH picked AS (
	SELECT m.seq, m.visible_at FROM {{schema}}.messages m
	WHERE m.queue_id = (SELECT id FROM {{schema}}.queues WHERE name = $1)
		AND m.visible_at <= coalesce($2::bigint, {{dbnow}}) AND m.expires_at > coalesce($2::bigint, {{dbnow}})
	ORDER BY m.visible_at, m.seq
	LIMIT $3
	FOR UPDATE SKIP LOCKED
),
taken AS (
	UPDATE {{schema}}.messages m
	SET visible_at = {{schema}}.add_ns(coalesce($2::bigint, {{dbnow}}), $4::bigint),
		dequeue_count = m.dequeue_count + 1, version = (m.version + 1) % 4294967296,
		tag = CASE WHEN $5::bigint # m.seq = 0 THEN 1 ELSE $5::bigint # m.seq END
	FROM picked p
	WHERE m.seq = p.seq
	RETURNING p.visible_at AS was, m.seq, m.id_rand, m.content, m.inserted_at, m.visible_at, m.expires_at, m.dequeue_count, m.version, m.tag
)
SELECT was, seq, id_rand, content, inserted_at, visible_at, expires_at, dequeue_count, version, tag FROM taken
UNION ALL
SELECT NULL, NULL, (SELECT id FROM {{schema}}.queues WHERE name = $1), NULL, NULL, NULL, NULL, NULL, NULL, NULL
WHERE NOT EXISTS (SELECT FROM taken)
ORDER BY 1, 2`

	// nextVisible tells Receive, after a Get that took nothing, when the
	// first unexpired message of the queue $1 is visible. $2 now. One row:
	// the queue's id (NULL: no such queue), the time now, and that time
	// (NULL: the queue has no message; maybe <= now, for messages that
	// another Get held locked).
	sqlNextVisible = `
SELECT q.id, t.now, (SELECT m.visible_at FROM {{schema}}.messages m
	WHERE m.queue_id = q.id AND m.expires_at > t.now ORDER BY m.visible_at, m.seq LIMIT 1)
FROM (SELECT (SELECT id FROM {{schema}}.queues WHERE name = $1) AS id) q,
	(SELECT coalesce($2::bigint, {{dbnow}}) AS now) t`

	// queueID returns the id of the queue $1, for an operation that found
	// no message to tell why. No row: no such queue.
	sqlQueueID = `SELECT id FROM {{schema}}.queues WHERE name = $1`

	// peek returns up to $3 visible messages in Get's order. $1 queue
	// name, $2 now. One row with a NULL seq and queue id: no such queue;
	// with a NULL seq only: no visible message.
	sqlPeek = `
SELECT q.id, m.seq, m.id_rand, m.content, m.inserted_at, m.visible_at, m.expires_at, m.dequeue_count
FROM (SELECT (SELECT id FROM {{schema}}.queues WHERE name = $1) AS id) q
CROSS JOIN (SELECT coalesce($2::bigint, {{dbnow}}) AS now) t
LEFT JOIN LATERAL (
	SELECT m.seq, m.id_rand, m.content, m.inserted_at, m.visible_at, m.expires_at, m.dequeue_count
	FROM {{schema}}.messages m
	WHERE m.queue_id = q.id AND m.visible_at <= t.now AND m.expires_at > t.now
	ORDER BY m.visible_at, m.seq
	LIMIT $3
) m ON true
ORDER BY m.visible_at, m.seq`

	// update makes the message visible after $5 and, unless $7 is NULL,
	// replaces its content, if the receipt ($3 version, $4 tag) is its
	// current one; it gives the message the tag $6, and tells whether any
	// Service waits on the queue, as put does. $1 queue name, $2 and $9
	// the message's key and the random half of its ID, $8 now. No row: no
	// such message with that receipt, or no such queue (see queueID).
	sqlUpdate = `
UPDATE {{schema}}.messages m
SET visible_at = {{schema}}.add_ns(coalesce($8::bigint, {{dbnow}}), $5::bigint),
	version = (m.version + 1) % 4294967296, tag = $6, content = coalesce($7, m.content)
WHERE m.seq = $2 AND m.id_rand = $9 AND m.queue_id = (SELECT id FROM {{schema}}.queues WHERE name = $1)
	AND m.version = $3 AND m.tag = $4 AND m.expires_at > coalesce($8::bigint, {{dbnow}})
RETURNING m.visible_at, m.version, EXISTS (SELECT FROM {{schema}}.waiters w WHERE w.queue_name = $1)`

	// delete removes the message if the receipt ($3 version, $4 tag) is
	// its current one. $1 queue name, $2 and $6 the message's key and the
	// random half of its ID, $5 now. No row: no such message with that
	// receipt, or no such queue (see queueID).
	sqlDelete = `
DELETE FROM {{schema}}.messages m
WHERE m.seq = $2 AND m.id_rand = $6 AND m.queue_id = (SELECT id FROM {{schema}}.queues WHERE name = $1)
	AND m.version = $3 AND m.tag = $4 AND m.expires_at > coalesce($5::bigint, {{dbnow}})
RETURNING m.seq`

	// deleteBatch is delete for many messages in one statement: $2 to $5
	// hold, element by element, the key, the random half of the ID, and
	// the receipt's version and tag of each; $6 now. One row: the
	// queue's id (NULL: no such queue), and the keys, random halves,
	// versions and tags of the messages deleted, to tell which items
	// matched. The queue's
	// row and its messages are read in the statement's one snapshot, as
	// delete's are. The messages are found by their keys, in the primary
	// key's index, and each is checked against the items apart (OFFSET 0
	// keeps that check from becoming a join): as a join, the planner may
	// read every message of the queue, by messages_visible, to match 32.
	sqlDeleteBatch = `
WITH q AS (SELECT id FROM {{schema}}.queues WHERE name = $1),
del AS (
	DELETE FROM {{schema}}.messages m
	WHERE m.seq = ANY($2::bigint[]) AND m.queue_id = (SELECT id FROM q)
		AND m.expires_at > coalesce($6::bigint, {{dbnow}})
		AND EXISTS (
			SELECT FROM unnest($2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[]) AS k (seq, id_rand, version, tag)
			WHERE k.seq = m.seq AND k.id_rand = m.id_rand AND k.version = m.version AND k.tag = m.tag
			OFFSET 0)
	RETURNING m.seq, m.id_rand, m.version, m.tag
)
SELECT (SELECT id FROM q), array(SELECT seq FROM del), array(SELECT id_rand FROM del),
	array(SELECT version FROM del), array(SELECT tag FROM del)`

	// clear removes every message of the queue $1. One row: the queue's
	// id (NULL: no such queue).
	sqlClear = `
WITH q AS (SELECT id FROM {{schema}}.queues WHERE name = $1),
del AS (DELETE FROM {{schema}}.messages m WHERE m.queue_id = (SELECT id FROM q))
SELECT (SELECT id FROM q)`

	// count counts the unexpired messages of the queue whose id is $1 (see
	// queueID) at $2. One row: whether the queue still exists, and the
	// count. The id comes from a statement before, rather than from a
	// subquery by name, so that the planner knows it: from a subquery,
	// its estimate is the table's rows over the number of queues, and
	// with one deep queue in the table it read the whole table, in
	// parallel and compiled, to count an empty queue (300 ms beside a
	// queue of a million messages; by the id, an index probe). The
	// queue's row and its messages are read in one snapshot, so a queue
	// deleted since its id was read is not found, and a count is never
	// that of a queue whose messages are half removed.
	sqlCount = `
SELECT EXISTS (SELECT FROM {{schema}}.queues WHERE id = $1), (SELECT count(*) FROM {{schema}}.messages m
	WHERE m.queue_id = $1 AND m.expires_at > coalesce($2::bigint, {{dbnow}}))`

	// properties is count with the queue's metadata. No row: the queue
	// was deleted since its id was read.
	sqlProperties = `
SELECT q.metadata_names, q.metadata_values, (SELECT count(*) FROM {{schema}}.messages m
	WHERE m.queue_id = $1 AND m.expires_at > coalesce($2::bigint, {{dbnow}}))
FROM {{schema}}.queues q WHERE q.id = $1`

	// createQueue creates the queue $1 with the metadata $2, $3 unless it
	// exists. One row: whether it was created, and the metadata of the
	// queue that exists. No row: a queue of that name was committed since
	// the statement began; the caller tries again.
	sqlCreateQueue = `
WITH ins AS (
	INSERT INTO {{schema}}.queues (name, metadata_names, metadata_values) VALUES ($1, $2, $3)
	ON CONFLICT (name) DO NOTHING
	RETURNING metadata_names, metadata_values
)
SELECT true, metadata_names, metadata_values FROM ins
UNION ALL
SELECT false, metadata_names, metadata_values FROM {{schema}}.queues
WHERE name = $1 AND NOT EXISTS (SELECT FROM ins)`

	// lockQueueExclusive takes the queue name's advisory lock in
	// exclusive mode for the transaction: see lockQueue.
	sqlLockQueueExclusive = `SELECT pg_advisory_xact_lock($1::int4, $2::int4)`

	// dropQueue deletes the queue $1 and records its id for the removal
	// of its messages, and wakes any Service waiting on it ($2: the
	// notification channel). One row: the id, if there was such a queue.
	sqlDropQueue = `
WITH del AS (DELETE FROM {{schema}}.queues WHERE name = $1 RETURNING id),
rec AS (INSERT INTO {{schema}}.dropped_queues (id) SELECT id FROM del)
SELECT id, pg_notify($2, $1)::text FROM del`

	// removeDropped removes up to $2 messages of the deleted queue $1 and,
	// when none is left, forgets the queue. One row: the number removed.
	sqlRemoveDropped = `
WITH doomed AS (
	SELECT seq FROM {{schema}}.messages WHERE queue_id = $1 LIMIT $2 FOR UPDATE SKIP LOCKED
),
del AS (DELETE FROM {{schema}}.messages m USING doomed d WHERE m.seq = d.seq RETURNING 1),
done AS (
	DELETE FROM {{schema}}.dropped_queues WHERE id = $1
	AND NOT EXISTS (SELECT FROM {{schema}}.messages WHERE queue_id = $1 AND seq NOT IN (SELECT seq FROM doomed))
)
SELECT count(*) FROM del`

	// droppedQueues lists deleted queues whose messages may remain.
	sqlDroppedQueues = `SELECT id FROM {{schema}}.dropped_queues ORDER BY dropped_at LIMIT 16`

	// purgeExpired removes up to $2 messages that expired by $1, oldest
	// expiry first. One row: the number removed.
	sqlPurgeExpired = `
WITH doomed AS (
	SELECT seq FROM {{schema}}.messages
	WHERE expires_at <= coalesce($1::bigint, {{dbnow}}) AND expires_at < 9223372036854775806
	ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
),
del AS (DELETE FROM {{schema}}.messages m USING doomed d WHERE m.seq = d.seq RETURNING 1)
SELECT count(*) FROM del`

	// listQueues lists up to $3 queues whose names start with $1, from
	// $2 on, in name order, with their metadata.
	sqlListQueues = `
SELECT name, metadata_names, metadata_values FROM {{schema}}.queues
WHERE name >= $2 AND starts_with(name, $1)
ORDER BY name LIMIT $3`

	// setMetadata replaces the metadata of the queue $1. No row: no such
	// queue.
	sqlSetMetadata = `
UPDATE {{schema}}.queues SET metadata_names = $2, metadata_values = $3 WHERE name = $1 RETURNING id`

	// accessPolicies returns the stored access policies of the queue $1
	// in order, after a row with the queue's id (NULL: no such queue).
	sqlAccessPolicies = `
SELECT q.id, p.position, p.id, p.start_sec, p.start_nsec, p.expiry_sec, p.expiry_nsec, p.permission
FROM (SELECT (SELECT id FROM {{schema}}.queues WHERE name = $1) AS id) q
LEFT JOIN {{schema}}.access_policies p ON p.queue_id = q.id
ORDER BY p.position NULLS FIRST`

	// lockQueueRow locks the row of the queue $1 against a concurrent
	// setAccessPolicies, before it in the same transaction: a statement
	// that waited for the lock would otherwise still see, in the snapshot
	// it began with, the policies the other one replaced.
	sqlLockQueueRow = `SELECT id FROM {{schema}}.queues WHERE name = $1 FOR NO KEY UPDATE`

	// setAccessPolicies replaces the stored access policies of the queue
	// $1 with those given column by column in $2 to $7, in order. One
	// row: the queue's id (NULL: no such queue).
	sqlSetAccessPolicies = `
WITH q AS (SELECT id FROM {{schema}}.queues WHERE name = $1),
del AS (DELETE FROM {{schema}}.access_policies WHERE queue_id = (SELECT id FROM q) RETURNING 1),
ins AS (
	INSERT INTO {{schema}}.access_policies (queue_id, position, id, start_sec, start_nsec, expiry_sec, expiry_nsec, permission)
	SELECT (SELECT id FROM q), p.ord - 1, p.id, p.start_sec, p.start_nsec, p.expiry_sec, p.expiry_nsec, p.permission
	FROM unnest($2::bytea[], $3::bigint[], $4::int[], $5::bigint[], $6::int[], $7::text[])
		WITH ORDINALITY AS p (id, start_sec, start_nsec, expiry_sec, expiry_nsec, permission, ord)
	-- Reading del's count makes the deletion run first: the positions
	-- are the same.
	WHERE EXISTS (SELECT FROM q) AND (SELECT count(*) FROM del) >= 0
)
SELECT (SELECT id FROM q)`

	// serviceProperties returns the account's service properties
	// document (NULL: none set). lockServiceProperties is the same,
	// locking the row for an update in the same transaction, and
	// setServiceProperties stores $1.
	sqlServiceProperties     = `SELECT document FROM {{schema}}.service_properties`
	sqlLockServiceProperties = `SELECT document FROM {{schema}}.service_properties FOR UPDATE`
	sqlSetServiceProperties  = `UPDATE {{schema}}.service_properties SET document = $1`

	// registerWaiter records that the Service listening on the backend
	// $2 waits on the queue $1.
	sqlRegisterWaiter = `
INSERT INTO {{schema}}.waiters (queue_name, pid) VALUES ($1, $2) ON CONFLICT DO NOTHING`

	// unregisterWaiter removes registerWaiter's row.
	sqlUnregisterWaiter = `DELETE FROM {{schema}}.waiters WHERE queue_name = $1 AND pid = $2`

	// forgetWaiters removes the rows of backends that are gone, as the
	// listening connection of a Service that was killed leaves them, and
	// those of the backend $1.
	sqlForgetWaiters = `
DELETE FROM {{schema}}.waiters w
WHERE w.pid = $1 OR NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = w.pid)`
)

// statements are the statements of one schema.
type statements struct {
	lockQueue, lockQueueExclusive                        string
	put, putBatch, notify, get, nextVisible, queueID     string
	peek, update, delete, deleteBatch                    string
	clear, count, properties                             string
	createQueue, dropQueue, removeDropped, droppedQueues string
	purgeExpired, listQueues, setMetadata                string
	accessPolicies, lockQueueRow, setAccessPolicies      string
	registerWaiter, unregisterWaiter, forgetWaiters      string

	serviceProperties, lockServiceProperties, setServiceProperties string
}

// dbNow is the database's time in Unix nanoseconds, to the microsecond:
// the start of the transaction, a stable value, which the planner reads
// once per statement.
const dbNow = `((extract(epoch FROM now()) * 1000000)::bigint * 1000)`

// newStatements fills in the quoted schema name.
func newStatements(quotedSchema string) *statements {
	r := strings.NewReplacer("{{schema}}", quotedSchema, "{{dbnow}}", dbNow)
	return &statements{
		lockQueue:          sqlLockQueue,
		lockQueueExclusive: sqlLockQueueExclusive,
		put:                r.Replace(sqlPut),
		putBatch:           r.Replace(sqlPutBatch),
		notify:             sqlNotify,
		get:                r.Replace(sqlGet),
		nextVisible:        r.Replace(sqlNextVisible),
		queueID:            r.Replace(sqlQueueID),
		peek:               r.Replace(sqlPeek),
		update:             r.Replace(sqlUpdate),
		delete:             r.Replace(sqlDelete),
		deleteBatch:        r.Replace(sqlDeleteBatch),
		clear:              r.Replace(sqlClear),
		count:              r.Replace(sqlCount),
		properties:         r.Replace(sqlProperties),
		createQueue:        r.Replace(sqlCreateQueue),
		dropQueue:          r.Replace(sqlDropQueue),
		removeDropped:      r.Replace(sqlRemoveDropped),
		droppedQueues:      r.Replace(sqlDroppedQueues),
		purgeExpired:       r.Replace(sqlPurgeExpired),
		listQueues:         r.Replace(sqlListQueues),
		setMetadata:        r.Replace(sqlSetMetadata),
		accessPolicies:     r.Replace(sqlAccessPolicies),
		lockQueueRow:       r.Replace(sqlLockQueueRow),
		setAccessPolicies:  r.Replace(sqlSetAccessPolicies),
		registerWaiter:     r.Replace(sqlRegisterWaiter),
		unregisterWaiter:   r.Replace(sqlUnregisterWaiter),
		forgetWaiters:      r.Replace(sqlForgetWaiters),

		serviceProperties:     r.Replace(sqlServiceProperties),
		lockServiceProperties: r.Replace(sqlLockServiceProperties),
		setServiceProperties:  r.Replace(sqlSetServiceProperties),
	}
}
