package postgres

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/azqlib/azq"
	"github.com/jackc/pgx/v5"
)

var (
	_ azq.BatchPutter  = (*Queue)(nil)
	_ azq.BatchDeleter = (*Queue)(nil)
)

// checkBatchSize refuses a batch of more than azq.MaxBatchSize items, as
// azq.PutBatch and azq.DeleteBatch do.
func checkBatchSize(n int) error {
	if n > azq.MaxBatchSize {
		return &azq.Error{Code: azq.CodeOutOfRangeQueryParameterValue, StatusCode: http.StatusBadRequest,
			Message: "a batch holds at most " + strconv.Itoa(azq.MaxBatchSize) + " items; this one has " + strconv.Itoa(n)}
	}
	return nil
}

// PutBatch puts the messages of reqs, as azq.BatchPutter documents, in
// one statement and one commit: each item is checked as Put checks it,
// an item with bad input gets Put's error and is left out, and the
// others are inserted together, in order, with the one time of the
// statement (the database's, or the Options' Clock). The Services
// waiting on the queue, if any, are notified once for the batch. A
// statement that fails fails the whole call, and then none of the
// batch's messages is in the queue.
func (q *Queue) PutBatch(ctx context.Context, reqs []azq.PutRequest) ([]azq.PutResult, error) {
	s := q.svc
	if err := checkBatchSize(len(reqs)); err != nil {
		return nil, err
	}
	res := make([]azq.PutResult, len(reqs))
	// The columns of the items that go in, and which item each one is.
	items := make([]int, 0, len(reqs))
	idRands := make([]int64, 0, len(reqs))
	visibilities := make([]int64, 0, len(reqs))
	ttls := make([]int64, 0, len(reqs))
	tags := make([]int64, 0, len(reqs))
	contents := make([][]byte, 0, len(reqs))
	byIDRand := make(map[int64]int, len(reqs)) // index in items
	for i, r := range reqs {
		ttl, err := s.limits.CheckPut(r.Content, r.Options)
		if err != nil {
			res[i].Err = err
			continue
		}
		var visibility time.Duration
		if r.Options != nil {
			visibility = r.Options.VisibilityTimeout
		}
		// The random half tells the rows of the statement apart: unique
		// within the batch.
		idRand := newIDRand()
		for _, dup := byIDRand[idRand]; dup; _, dup = byIDRand[idRand] {
			idRand = newIDRand()
		}
		byIDRand[idRand] = len(items)
		items = append(items, i)
		idRands = append(idRands, idRand)
		visibilities = append(visibilities, int64(visibility))
		ttls = append(ttls, int64(ttl))
		tags = append(tags, newTag())
		contents = append(contents, contentParam(r.Content))
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return res, nil
	}
	if !storable(q.name) {
		return nil, queueNotFound(q.name)
	}
	msgs := make([]azq.Message, len(items))
	var waited bool
	err := s.retry(ctx, func(db querier) error {
		clear(msgs)
		waited = false
		b := &pgx.Batch{}
		b.Queue(s.sql.lockQueue, s.keys.queueClass, s.keys.queue(q.name))
		b.Queue(s.sql.putBatch, q.name, idRands, visibilities, ttls, tags, contents, s.now())
		br := db.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var idRand, seq, inserted, visible, expires int64
			var w bool
			if err := rows.Scan(&idRand, &seq, &inserted, &visible, &expires, &w); err != nil {
				return err
			}
			k, ok := byIDRand[idRand]
			if !ok {
				return errors.New("postgres: the batch's insert returned a row it did not insert")
			}
			waited = waited || w
			msgs[k] = azq.Message{
				ID:              messageID(seq, idRand),
				InsertionTime:   fromNanos(inserted),
				ExpirationTime:  expirationTime(expires),
				NextVisibleTime: fromNanos(visible),
				PopReceipt:      makeReceipt(seq, 0, tags[k]),
			}
			n++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if n == 0 {
			return pgx.ErrNoRows
		}
		if n != len(items) {
			return errors.New("postgres: the batch's insert returned " + strconv.Itoa(n) + " rows for " + strconv.Itoa(len(items)))
		}
		rows.Close()
		return br.Close()
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, queueNotFound(q.name)
	}
	if err != nil {
		return nil, dbError(ctx, err)
	}
	if waited {
		s.notify(ctx, q.name)
	}
	s.maybePurge(ctx)
	for k, i := range items {
		msgs[k].Content = reqs[i].Content
		res[i].Message = msgs[k]
	}
	return res, nil
}

// deleteKey is what an item of a DeleteBatch must match: the message's
// key and random half, and its receipt's version and tag.
type deleteKey struct{ seq, idRand, version, tag int64 }

// DeleteBatch deletes the messages of reqs, as azq.BatchDeleter
// documents, in one statement and one commit: each item is checked as
// Delete checks it, an item with bad input gets Delete's error and is
// left out, and an item whose message the statement did not delete (a
// stale receipt, a message gone) gets ErrMessageNotFound, as Delete
// would answer. A statement that fails fails the whole call, and then
// none of the batch's messages is deleted.
func (q *Queue) DeleteBatch(ctx context.Context, reqs []azq.DeleteRequest) ([]error, error) {
	s := q.svc
	if err := checkBatchSize(len(reqs)); err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	errs := make([]error, len(reqs))
	items := make([]int, 0, len(reqs))
	keys := make([]deleteKey, 0, len(reqs))
	for i, r := range reqs {
		if r.PopReceipt.IsZero() {
			errs[i] = errZeroReceipt
			continue
		}
		// As in Delete: a receipt or an ID that no message of this
		// Service has is not found, once the queue is found.
		_, version, tag, ok := receiptParts(r.PopReceipt)
		if !ok {
			version = -1
		}
		seq, idRand, ok := idParts(r.ID)
		if !ok {
			seq = -1
		}
		items = append(items, i)
		keys = append(keys, deleteKey{seq, idRand, version, tag})
	}
	if len(items) == 0 {
		return errs, nil
	}
	if !storable(q.name) {
		return nil, queueNotFound(q.name)
	}
	cols := [4][]int64{}
	for c := range cols {
		cols[c] = make([]int64, len(keys))
	}
	for k, key := range keys {
		cols[0][k], cols[1][k], cols[2][k], cols[3][k] = key.seq, key.idRand, key.version, key.tag
	}
	var exists bool
	var seqs, idRands, versions, tags []int64
	err := s.retry(ctx, func(db querier) error {
		var qid *int64
		if err := db.QueryRow(ctx, s.sql.deleteBatch, q.name, cols[0], cols[1], cols[2], cols[3], s.now()).Scan(&qid, &seqs, &idRands, &versions, &tags); err != nil {
			return err
		}
		exists = qid != nil
		return nil
	})
	if err != nil {
		return nil, dbError(ctx, err)
	}
	if !exists {
		return nil, queueNotFound(q.name)
	}
	// A message deleted answers the first item that names it with its
	// receipt; any later one, as a second Delete would, is not found.
	deleted := make(map[deleteKey]bool, len(seqs))
	for j := range seqs {
		deleted[deleteKey{seqs[j], idRands[j], versions[j], tags[j]}] = true
	}
	for k, i := range items {
		if key := keys[k]; deleted[key] {
			delete(deleted, key)
			continue
		}
		errs[i] = messageNotFound(reqs[i].ID)
	}
	return errs, nil
}
