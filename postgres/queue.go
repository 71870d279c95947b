package postgres

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/internal/queuemeta"
	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Queue is a queue of a Service addressed by its name, as azq.NamedQueue
// is one of an in-memory Service: each operation looks the queue up in
// the statement that does it. The queue need not exist when the Queue is
// made (until it does, every operation gives ErrQueueNotFound), and a
// queue deleted and created again, by any process, is followed. Get one
// from Service.Named, Ref or CreateQueue.
//
// It keeps the semantics of *azq.Queue, which azq.MessageQueue documents:
// the same order, receipts, visibility, time-to-live, limits and errors.
// Argument errors come before ErrQueueNotFound, as over Azure's REST API.
type Queue struct {
	svc  *Service
	name string
}

var (
	_ azq.QueueRef    = (*Queue)(nil)
	_ azq.QueueOpener = (*Queue)(nil)
)

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Service returns the Service the queue belongs to.
func (q *Queue) Service() *Service { return q.svc }

// Clock returns the clock of the Service's queues.
func (q *Queue) Clock() clock.Clock { return q.svc.Clock() }

// contentParam is message content as a bytea parameter: never nil, which
// would be NULL.
func contentParam(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return []byte(s)
}

// textScanner scans a bytea column into a string with one copy.
type textScanner struct{ dst *string }

func (t textScanner) ScanBytes(v []byte) error {
	*t.dst = string(v)
	return nil
}

// Put adds a message, as azq.Queue.Put does, and notifies the Services
// waiting on the queue in Receive, if any.
func (q *Queue) Put(ctx context.Context, content string, opts *azq.PutOptions) (azq.Message, error) {
	s := q.svc
	ttl, err := s.limits.CheckPut(content, opts)
	if err != nil {
		return azq.Message{}, err
	}
	if err := s.check(ctx); err != nil {
		return azq.Message{}, err
	}
	if !storable(q.name) {
		return azq.Message{}, queueNotFound(q.name)
	}
	var visibility time.Duration
	if opts != nil {
		visibility = opts.VisibilityTimeout
	}
	idRand, tag := newIDRand(), newTag()
	var seq, inserted, visible, expires int64
	var waited bool
	err = s.retry(ctx, func(db querier) error {
		b := &pgx.Batch{}
		b.Queue(s.sql.lockQueue, s.keys.queueClass, s.keys.queue(q.name))
		b.Queue(s.sql.put, q.name, idRand, int64(visibility), int64(ttl), tag, contentParam(content), s.now())
		return sendBatch(ctx, db, b, &seq, &inserted, &visible, &expires, &waited)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return azq.Message{}, queueNotFound(q.name)
	}
	if err != nil {
		return azq.Message{}, dbError(ctx, err)
	}
	if waited {
		s.notify(ctx, q.name)
	}
	s.maybePurge(ctx)
	return azq.Message{
		ID:              messageID(seq, idRand),
		Content:         content,
		InsertionTime:   fromNanos(inserted),
		ExpirationTime:  expirationTime(expires),
		NextVisibleTime: fromNanos(visible),
		PopReceipt:      makeReceipt(seq, 0, tag),
	}, nil
}

// Get takes up to n visible messages (1 to 32) and hides them for the
// visibility timeout, as azq.Queue.Get does, in one statement: messages
// that another Get is taking at the same moment are skipped, not waited
// for. It returns an empty slice, not an error, when nothing is visible.
func (q *Queue) Get(ctx context.Context, n int, visibility time.Duration) ([]azq.Message, error) {
	msgs, err := q.AppendGet(ctx, nil, n, visibility)
	if msgs == nil && err == nil {
		msgs = []azq.Message{}
	}
	return msgs, err
}

// AppendGet is Get that appends the messages it takes to dst and returns
// the extended slice, as azq.Queue.AppendGet does; on error it returns dst
// unchanged.
func (q *Queue) AppendGet(ctx context.Context, dst []azq.Message, n int, visibility time.Duration) ([]azq.Message, error) {
	if err := q.svc.limits.CheckGet(n, visibility); err != nil {
		return dst, err
	}
	if err := q.svc.check(ctx); err != nil {
		return dst, err
	}
	msgs, err := q.get(ctx, dst, n, visibility)
	if err != nil {
		return dst, err
	}
	q.svc.maybePurge(ctx)
	return msgs, nil
}

// get runs the Get statement for up to n messages and appends them to
// dst.
func (q *Queue) get(ctx context.Context, dst []azq.Message, n int, visibility time.Duration) ([]azq.Message, error) {
	s := q.svc
	if !storable(q.name) {
		return dst, queueNotFound(q.name)
	}
	first := len(dst)
	exists := true
	tag := newTag()
	err := s.retry(ctx, func(db querier) error {
		dst, exists = dst[:first], true
		rows, err := db.Query(ctx, s.sql.get, q.name, s.now(), n, int64(visibility), tag)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var was, seq, idRand pgtype.Int8
			var inserted, visible, expires, dequeues, version, tag pgtype.Int8
			var content string
			if err := rows.Scan(&was, &seq, &idRand, textScanner{&content}, &inserted, &visible, &expires, &dequeues, &version, &tag); err != nil {
				return err
			}
			if !seq.Valid { // nothing taken: the queue's id, if it exists
				exists = idRand.Valid
				continue
			}
			dst = append(dst, azq.Message{
				ID:              messageID(seq.Int64, idRand.Int64),
				Content:         content,
				InsertionTime:   fromNanos(inserted.Int64),
				ExpirationTime:  expirationTime(expires.Int64),
				NextVisibleTime: fromNanos(visible.Int64),
				DequeueCount:    dequeues.Int64,
				PopReceipt:      makeReceipt(seq.Int64, version.Int64, tag.Int64),
			})
		}
		return rows.Err()
	})
	if err != nil {
		return dst[:first], dbError(ctx, err)
	}
	if !exists {
		return dst[:first], queueNotFound(q.name)
	}
	return dst, nil
}

// exists tells an operation that found no message why: ErrQueueNotFound
// if the queue does not exist, else notFound.
func (q *Queue) exists(ctx context.Context, notFound error) error {
	var id int64
	err := q.svc.retry(ctx, func(db querier) error {
		return db.QueryRow(ctx, q.svc.sql.queueID, q.name).Scan(&id)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return queueNotFound(q.name)
	case err != nil:
		return dbError(ctx, err)
	}
	return notFound
}

// Peek returns up to n visible messages (1 to 32) without changing
// anything, as azq.Queue.Peek does.
func (q *Queue) Peek(ctx context.Context, n int) ([]azq.Message, error) {
	s := q.svc
	if err := s.limits.CheckPeek(n); err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if !storable(q.name) {
		return nil, queueNotFound(q.name)
	}
	var msgs []azq.Message
	exists := false
	err := s.retry(ctx, func(db querier) error {
		msgs, exists = []azq.Message{}, false
		rows, err := db.Query(ctx, s.sql.peek, q.name, s.now(), n)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var qid, seq, idRand pgtype.Int8
			var inserted, visible, expires, dequeues pgtype.Int8
			var content string
			if err := rows.Scan(&qid, &seq, &idRand, textScanner{&content}, &inserted, &visible, &expires, &dequeues); err != nil {
				return err
			}
			exists = qid.Valid
			if !seq.Valid {
				continue
			}
			msgs = append(msgs, azq.Message{
				ID:              messageID(seq.Int64, idRand.Int64),
				Content:         content,
				InsertionTime:   fromNanos(inserted.Int64),
				ExpirationTime:  expirationTime(expires.Int64),
				NextVisibleTime: fromNanos(visible.Int64),
				DequeueCount:    dequeues.Int64,
			})
		}
		return rows.Err()
	})
	if err != nil {
		return nil, dbError(ctx, err)
	}
	if !exists {
		return nil, queueNotFound(q.name)
	}
	return msgs, nil
}

// Update makes the message id visible again after visibility and, unless
// content is nil, replaces its content, as azq.Queue.Update does; it
// notifies the Services waiting on the queue, if any.
func (q *Queue) Update(ctx context.Context, id azq.MessageID, receipt azq.PopReceipt, visibility time.Duration, content *string) (azq.UpdateResult, error) {
	s := q.svc
	if err := s.limits.CheckUpdate(visibility, content); err != nil {
		return azq.UpdateResult{}, err
	}
	if err := s.check(ctx); err != nil {
		return azq.UpdateResult{}, err
	}
	if receipt.IsZero() {
		return azq.UpdateResult{}, errZeroReceipt
	}
	slot, version, tag, ok := receiptParts(receipt)
	if !ok {
		// Another service's receipt is not current here, but the queue
		// must exist for that answer: the statement says, with a version
		// no receipt has.
		version = -1
	}
	seq, idRand, ok := idParts(id)
	if !ok {
		seq = -1 // likewise: no message has it
	}
	var newContent []byte
	if content != nil {
		newContent = contentParam(*content)
	}
	if !storable(q.name) {
		return azq.UpdateResult{}, queueNotFound(q.name)
	}
	newTag := newTag()
	var visible, newVersion int64
	var waited bool
	err := s.retry(ctx, func(db querier) error {
		b := &pgx.Batch{}
		b.Queue(s.sql.lockQueue, s.keys.queueClass, s.keys.queue(q.name))
		b.Queue(s.sql.update, q.name, seq, version, tag, int64(visibility), newTag, newContent, s.now(), idRand)
		return sendBatch(ctx, db, b, &visible, &newVersion, &waited)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return azq.UpdateResult{}, q.exists(ctx, messageNotFound(id))
	}
	if err != nil {
		return azq.UpdateResult{}, dbError(ctx, err)
	}
	if waited {
		s.notify(ctx, q.name)
	}
	return azq.UpdateResult{
		PopReceipt:      makeReceipt(slot, newVersion, newTag),
		NextVisibleTime: fromNanos(visible),
	}, nil
}

// Delete removes the message id, as azq.Queue.Delete does: the receipt
// must be its current one.
func (q *Queue) Delete(ctx context.Context, id azq.MessageID, receipt azq.PopReceipt) error {
	s := q.svc
	if err := s.check(ctx); err != nil {
		return err
	}
	if receipt.IsZero() {
		return errZeroReceipt
	}
	_, version, tag, ok := receiptParts(receipt)
	if !ok {
		version = -1 // see Update
	}
	seq, idRand, ok := idParts(id)
	if !ok {
		seq = -1 // see Update
	}
	if !storable(q.name) {
		return queueNotFound(q.name)
	}
	err := s.retry(ctx, func(db querier) error {
		return db.QueryRow(ctx, s.sql.delete, q.name, seq, version, tag, s.now(), idRand).Scan(&seq)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return q.exists(ctx, messageNotFound(id))
	}
	return dbError(ctx, err)
}

// Clear deletes every message, visible or not, in one statement. Every
// receipt dies.
func (q *Queue) Clear(ctx context.Context) error {
	s := q.svc
	if err := s.check(ctx); err != nil {
		return err
	}
	if !storable(q.name) {
		return queueNotFound(q.name)
	}
	var qid pgtype.Int8
	if err := s.retry(ctx, func(db querier) error {
		return db.QueryRow(ctx, s.sql.clear, q.name).Scan(&qid)
	}); err != nil {
		return dbError(ctx, err)
	}
	if !qid.Valid {
		return queueNotFound(q.name)
	}
	return nil
}

// ApproximateCount returns the number of unexpired messages, visible or
// not: exact, as the in-memory queue's, and counted, so it takes time in
// proportion to the queue's length. It is two statements: the queue's id,
// then the count by that id (see sqlCount).
func (q *Queue) ApproximateCount(ctx context.Context) (int, error) {
	s := q.svc
	id, err := q.id(ctx)
	if err != nil {
		return 0, err
	}
	var exists bool
	var n int64
	if err := s.retry(ctx, func(db querier) error {
		return db.QueryRow(ctx, s.sql.count, id, s.now()).Scan(&exists, &n)
	}); err != nil {
		return 0, dbError(ctx, err)
	}
	if !exists {
		return 0, queueNotFound(q.name)
	}
	return int(n), nil
}

// id returns the queue's id: ErrQueueNotFound if there is no such queue.
func (q *Queue) id(ctx context.Context) (int64, error) {
	s := q.svc
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	if !storable(q.name) {
		return 0, queueNotFound(q.name)
	}
	var id int64
	err := s.retry(ctx, func(db querier) error {
		return db.QueryRow(ctx, s.sql.queueID, q.name).Scan(&id)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, queueNotFound(q.name)
	}
	if err != nil {
		return 0, dbError(ctx, err)
	}
	return id, nil
}

// Create creates the queue with metadata (nil for none), as
// azq.Service.CreateQueue does: if it exists with the same metadata,
// Create returns created false and no error; with other metadata,
// ErrQueueAlreadyExists. A bad name gives ErrInvalidQueueName, bad
// metadata ErrInvalidMetadata.
func (q *Queue) Create(ctx context.Context, metadata map[string]string) (created bool, err error) {
	s := q.svc
	if err := azq.ValidateQueueName(q.name); err != nil {
		return false, err
	}
	if err := azq.ValidateMetadata(metadata); err != nil {
		return false, err
	}
	if err := s.check(ctx); err != nil {
		return false, err
	}
	names, values := metadataColumns(metadata)
	for {
		var existingNames []string
		var existingValues [][]byte
		err := s.retry(ctx, func(db querier) error {
			return db.QueryRow(ctx, s.sql.createQueue, q.name, names, values).Scan(&created, &existingNames, &existingValues)
		})
		if errors.Is(err, pgx.ErrNoRows) {
			// A queue of that name was committed after the statement
			// began (and maybe deleted again): look again.
			if err := ctx.Err(); err != nil {
				return false, err
			}
			continue
		}
		if err != nil {
			return false, dbError(ctx, err)
		}
		if created || queuemeta.Equal(metadataMap(existingNames, existingValues), metadata) {
			return created, nil
		}
		return false, queueAlreadyExists(q.name)
	}
}

// Properties returns the queue's metadata and its message count, read
// together, after the queue's id (see ApproximateCount).
func (q *Queue) Properties(ctx context.Context) (azq.Properties, error) {
	s := q.svc
	id, err := q.id(ctx)
	if err != nil {
		return azq.Properties{}, err
	}
	var names []string
	var values [][]byte
	var n int64
	err = s.retry(ctx, func(db querier) error {
		return db.QueryRow(ctx, s.sql.properties, id, s.now()).Scan(&names, &values, &n)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return azq.Properties{}, queueNotFound(q.name)
	}
	if err != nil {
		return azq.Properties{}, dbError(ctx, err)
	}
	return azq.Properties{Metadata: metadataMap(names, values), ApproximateMessagesCount: int(n)}, nil
}

// SetMetadata replaces the queue's metadata; an empty md clears it.
// Invalid metadata gives ErrInvalidMetadata and changes nothing.
func (q *Queue) SetMetadata(ctx context.Context, md map[string]string) error {
	s := q.svc
	if err := azq.ValidateMetadata(md); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	if !storable(q.name) {
		return queueNotFound(q.name)
	}
	names, values := metadataColumns(md)
	var id int64
	err := s.retry(ctx, func(db querier) error {
		return db.QueryRow(ctx, s.sql.setMetadata, q.name, names, values).Scan(&id)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return queueNotFound(q.name)
	}
	return dbError(ctx, err)
}

// AccessPolicies returns the queue's stored access policies, in the order
// they were set. Their times are in UTC.
func (q *Queue) AccessPolicies(ctx context.Context) ([]azq.AccessPolicy, error) {
	s := q.svc
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if !storable(q.name) {
		return nil, queueNotFound(q.name)
	}
	var ps []azq.AccessPolicy
	exists := false
	err := s.retry(ctx, func(db querier) error {
		ps, exists = nil, false
		rows, err := db.Query(ctx, s.sql.accessPolicies, q.name)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var qid pgtype.Int8
			var pos pgtype.Int2
			var id []byte
			var startSec, expirySec pgtype.Int8
			var startNsec, expiryNsec pgtype.Int4
			var perm pgtype.Text
			if err := rows.Scan(&qid, &pos, &id, &startSec, &startNsec, &expirySec, &expiryNsec, &perm); err != nil {
				return err
			}
			exists = qid.Valid
			if !pos.Valid {
				continue
			}
			ps = append(ps, azq.AccessPolicy{
				ID:         string(id),
				Start:      policyTime(startSec, startNsec),
				Expiry:     policyTime(expirySec, expiryNsec),
				Permission: perm.String,
			})
		}
		return rows.Err()
	})
	if err != nil {
		return nil, dbError(ctx, err)
	}
	if !exists {
		return nil, queueNotFound(q.name)
	}
	return ps, nil
}

func policyTime(sec pgtype.Int8, nsec pgtype.Int4) time.Time {
	if !sec.Valid {
		return time.Time{}
	}
	return time.Unix(sec.Int64, int64(nsec.Int32)).UTC()
}

// SetAccessPolicies replaces the queue's stored access policies: at most
// five, with unique IDs of 1 to 64 characters and permissions drawn from
// "raup"; otherwise ErrInvalidAccessPolicy, and nothing changes.
func (q *Queue) SetAccessPolicies(ctx context.Context, ps []azq.AccessPolicy) error {
	s := q.svc
	if err := azq.ValidateAccessPolicies(ps); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	ids := make([][]byte, len(ps))
	startSec, expirySec := make([]*int64, len(ps)), make([]*int64, len(ps))
	startNsec, expiryNsec := make([]*int32, len(ps)), make([]*int32, len(ps))
	perms := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = append([]byte{}, p.ID...)
		startSec[i], startNsec[i] = timeColumns(p.Start)
		expirySec[i], expiryNsec[i] = timeColumns(p.Expiry)
		perms[i] = p.Permission
	}
	if !storable(q.name) {
		return queueNotFound(q.name)
	}
	var qid pgtype.Int8
	err := s.retry(ctx, func(db querier) error {
		b := &pgx.Batch{}
		b.Queue(s.sql.lockQueueRow, q.name)
		b.Queue(s.sql.setAccessPolicies, q.name, ids, startSec, startNsec, expirySec, expiryNsec, perms)
		return sendBatch(ctx, db, b, &qid)
	})
	if err != nil {
		return dbError(ctx, err)
	}
	if !qid.Valid {
		return queueNotFound(q.name)
	}
	return nil
}

// timeColumns splits a policy time into Unix seconds and nanoseconds; nil
// for the zero time, which means "not set".
func timeColumns(t time.Time) (*int64, *int32) {
	if t.IsZero() {
		return nil, nil
	}
	sec, nsec := t.Unix(), int32(t.Nanosecond())
	return &sec, &nsec
}

// OpenQueue returns the queue name of the same Service, creating it if it
// does not exist (an existing queue is opened whatever its metadata): the
// azq.QueueOpener that package worker uses for poison queues.
func (q *Queue) OpenQueue(ctx context.Context, name string) (azq.MessageQueue, error) {
	r := q.svc.Named(name)
	if _, err := r.Create(ctx, nil); err != nil && !errors.Is(err, azq.ErrQueueAlreadyExists) {
		return nil, err
	}
	return r, nil
}

// sendBatch sends b, whose first statements return nothing to read and
// whose last returns one row, scanned into dest: Put's and Update's lock,
// then their statement. It returns the first error.
func sendBatch(ctx context.Context, db querier, b *pgx.Batch, dest ...any) error {
	br := db.SendBatch(ctx, b)
	var err error
	for range b.Len() - 1 {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if err == nil {
		err = br.QueryRow().Scan(dest...)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// storable reports whether a queue of the name could be in the database:
// a text column holds valid UTF-8 without NUL, and the database refuses
// any other string as a parameter. No queue has another name (Create
// refuses it as invalid), so an operation on one finds none, as in
// memory, without a statement.
func storable(name string) bool {
	return utf8.ValidString(name) && strings.IndexByte(name, 0) < 0
}
