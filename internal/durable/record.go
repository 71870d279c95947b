package durable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The records of the durable mode's log and checkpoints, each the payload
// the log (internal/wal) stores: a type byte, then fields as unsigned or
// zig-zag varints, fixed 8 or 16 bytes for random values (IDs, tags), and
// length-prefixed strings. A queue is named by the number it was given at
// creation, not its name, which keeps records small and tells a queue from
// a later one of the same name. Each record's encoder sits beside its
// decoder below; replay.go says what each means.
const (
	// Log records: one per acknowledged change.
	recCreateQueue = 1  // qid, name, metadata
	recDeleteQueue = 2  // qid
	recMetadata    = 3  // qid, metadata
	recPolicies    = 4  // qid, policies
	recPut         = 5  // qid, slot, message (see appendPut); a checkpoint's messages too
	recGet         = 6  // qid, visible, count, count × (slot, dequeues, version, tag)
	recUpdate      = 7  // qid, slot, visible, version, tag, has content, [content]
	recDelete      = 8  // qid, slot
	recClear       = 9  // qid
	recPutBatch    = 10 // qid, count, count × message (as a Put's): one PutBatch
	recDeleteBatch = 11 // qid, count, count × slot: one DeleteBatch

	// Checkpoint records, around the Puts of the messages.
	recCkptService  = 20 // magic, format, next qid
	recCkptQueue    = 21 // qid, name, seq, next slot, metadata, policies, lsn
	recCkptChunk    = 22 // qid, chunk, lsn; the chunk's messages follow as Puts
	recCkptQueueEnd = 23 // qid, chunks, lsn
	recCkptEnd      = 24 // queues, messages
	recCkptChunkRef = 25 // qid, chunk, gen, lsn: the chunk as checkpoint gen holds it
)

const (
	ckptMagic  = "azq-state"
	ckptFormat = 1
)

// MaxPolicies is the most access policies a queue has: the queue's
// limit, which bounds what a damaged record makes a decoder allocate.
const MaxPolicies = 5

// enc appends record fields to a buffer.
type enc []byte

func (e enc) u(v uint64) enc            { return binary.AppendUvarint(e, v) }
func (e enc) i(v int64) enc             { return binary.AppendVarint(e, v) }
func (e enc) u64(v uint64) enc          { return binary.LittleEndian.AppendUint64(e, v) }
func (e enc) id(id [16]byte) enc        { return append(e, id[:]...) }
func (e enc) str(s string) enc          { return append(e.u(uint64(len(s))), s...) }
func (e enc) op(t byte, qid uint64) enc { return append(e, t).u(qid) }

// dec reads record fields; the first failure sticks and later reads
// return zero values, so a decoder checks err once at the end.
type dec struct {
	b   []byte
	err error
}

var errShortRecord = errors.New("record ends early")

func (d *dec) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *dec) byte() byte {
	if len(d.b) < 1 {
		d.fail(errShortRecord)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *dec) u() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShortRecord)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) i() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShortRecord)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// u32 reads a varint that must fit 32 bits (a slot, a version).
func (d *dec) u32() uint32 {
	v := d.u()
	if v > math.MaxUint32 {
		d.fail(fmt.Errorf("value %d is out of range", v))
	}
	return uint32(v)
}

func (d *dec) u64() uint64 {
	if len(d.b) < 8 {
		d.fail(errShortRecord)
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *dec) id() (id [16]byte) {
	if len(d.b) < len(id) {
		d.fail(errShortRecord)
		return id
	}
	copy(id[:], d.b)
	d.b = d.b[len(id):]
	return id
}

func (d *dec) str() string {
	n := d.u()
	if n > uint64(len(d.b)) {
		d.fail(errShortRecord)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// done reports the decoder's error, or that bytes are left over.
func (d *dec) done() error {
	if d.err == nil && len(d.b) != 0 {
		return fmt.Errorf("%d bytes left over at the end of the record", len(d.b))
	}
	return d.err
}

// Fields made of fields.

// expiry encodes an expiration time relative to the insertion time, 0
// meaning never.
func (e enc) expiry(inserted, expires int64) enc {
	if expires == NeverExpires {
		return e.u(0)
	}
	return e.u(uint64(expires-inserted) + 1)
}

func (d *dec) expiry(inserted int64) int64 {
	v := d.u()
	if v == 0 {
		return NeverExpires
	}
	if v-1 > uint64(NeverExpires-inserted) {
		d.fail(errors.New("expiration time is out of range"))
		return NeverExpires
	}
	return inserted + int64(v-1)
}

func (e enc) metadata(md map[string]string) enc {
	e = e.u(uint64(len(md)))
	for k, v := range md {
		e = e.str(k).str(v)
	}
	return e
}

func (d *dec) metadata() map[string]string {
	n := d.u()
	if n > uint64(len(d.b)) {
		d.fail(errShortRecord)
		return nil
	}
	if n == 0 {
		return nil
	}
	md := make(map[string]string, n)
	for ; n > 0 && d.err == nil; n-- {
		k := d.str()
		md[k] = d.str()
	}
	return md
}

func (e enc) time(t time.Time) enc {
	if t.IsZero() {
		return append(e, 0)
	}
	return append(e, 1).i(t.Unix()).u(uint64(t.Nanosecond()))
}

func (d *dec) time() time.Time {
	switch d.byte() {
	case 0:
		return time.Time{}
	case 1:
		sec := d.i()
		ns := d.u()
		if ns >= 1e9 {
			d.fail(fmt.Errorf("nanoseconds %d are out of range", ns))
		}
		return time.Unix(sec, int64(ns)).UTC()
	}
	d.fail(errors.New("bad time"))
	return time.Time{}
}

func (e enc) policies(ps []Policy) enc {
	e = e.u(uint64(len(ps)))
	for _, p := range ps {
		e = e.str(p.ID).time(p.Start).time(p.Expiry).str(p.Permission)
	}
	return e
}

func (d *dec) policies() []Policy {
	n := d.u()
	if n > MaxPolicies {
		d.fail(fmt.Errorf("%d access policies", n))
		return nil
	}
	var ps []Policy
	for ; n > 0 && d.err == nil; n-- {
		ps = append(ps, Policy{ID: d.str(), Start: d.time(), Expiry: d.time(), Permission: d.str()})
	}
	return ps
}

// header reads the type and queue number every log record starts with.
func (d *dec) header() (op byte, qid uint64) {
	return d.byte(), d.u()
}

// The log records.

func appendCreateQueue(b []byte, qid uint64, name string, md map[string]string) []byte {
	return enc(b).op(recCreateQueue, qid).str(name).metadata(md)
}

func readCreateQueue(d *dec) (name string, md map[string]string, err error) {
	name, md = d.str(), d.metadata()
	return name, md, d.done()
}

// appendQueueOp is a record of op with no fields but the queue: Delete
// Queue, Clear. readQueueOp is its decoder.
func appendQueueOp(b []byte, op byte, qid uint64) []byte { return enc(b).op(op, qid) }

func readQueueOp(d *dec) error { return d.done() }

func appendMetadata(b []byte, qid uint64, md map[string]string) []byte {
	return enc(b).op(recMetadata, qid).metadata(md)
}

func readMetadata(d *dec) (map[string]string, error) {
	md := d.metadata()
	return md, d.done()
}

func appendPolicies(b []byte, qid uint64, ps []Policy) []byte {
	return enc(b).op(recPolicies, qid).policies(ps)
}

func readPolicies(d *dec) ([]Policy, error) {
	ps := d.policies()
	return ps, d.done()
}

// appendPut records the message m: a Put in the log, and a message of a
// checkpoint, which is the Put that would make it. The fields are the
// slot, the insertion sequence, the ID, the insertion time, the
// next-visible and expiration times relative to it, the receipt tag, the
// dequeue count, the receipt version and the content.
func appendPut(b []byte, qid uint64, m *Message) []byte {
	return enc(b).op(recPut, qid).message(m)
}

// message encodes the fields of a Put record after its header.
func (e enc) message(m *Message) enc {
	return e.u(uint64(m.Slot)).u(m.Seq).id(m.ID).i(m.Inserted).i(m.Visible-m.Inserted).
		expiry(m.Inserted, m.Expires).u64(m.Tag).u(uint64(m.Dequeues)).u(uint64(m.Version)).str(m.Content)
}

func readPut(d *dec) (Message, error) {
	m, err := readMessage(d)
	if err != nil {
		return Message{}, err
	}
	if err := d.done(); err != nil {
		return Message{}, err
	}
	return m, nil
}

// readMessage reads the fields that message encoded, leaving what
// follows them.
func readMessage(d *dec) (m Message, err error) {
	m.Slot = d.u32()
	m.Seq = d.u()
	m.ID = d.id()
	m.Inserted = d.i()
	vis := d.i()
	m.Expires = d.expiry(m.Inserted)
	m.Tag = d.u64()
	dq := d.u()
	m.Version = d.u32()
	m.Content = d.str()
	if d.err != nil {
		return Message{}, d.err
	}
	visible, ok := addInt64(m.Inserted, vis)
	switch {
	case !ok:
		return Message{}, errors.New("next-visible time is out of range")
	case m.Seq == 0:
		return Message{}, errors.New("insertion sequence 0")
	case dq > math.MaxInt32:
		return Message{}, fmt.Errorf("dequeue count %d is out of range", dq)
	}
	m.Visible, m.Dequeues = visible, int32(dq)
	return m, nil
}

// addInt64 returns a+b and whether it did not overflow.
func addInt64(a, b int64) (int64, bool) {
	s := a + b
	return s, (s > a) == (b > 0)
}

func appendGet(b []byte, qid uint64, visible int64, taken []Taken) []byte {
	e := enc(b).op(recGet, qid).i(visible).u(uint64(len(taken)))
	for i := range taken {
		t := &taken[i]
		e = e.u(uint64(t.Slot)).u(uint64(t.Dequeues)).u(uint64(t.Version)).u64(t.Tag)
	}
	return e
}

// readGet reads a Get record, calling fn with each message taken.
func readGet(d *dec, fn func(visible int64, t Taken) error) error {
	visible := d.i()
	cnt := d.u()
	if cnt > uint64(len(d.b)) {
		return errShortRecord
	}
	for ; cnt > 0; cnt-- {
		slot, dq, ver, tag := d.u32(), d.u(), d.u32(), d.u64()
		if d.err != nil {
			return d.err
		}
		if dq > math.MaxInt32 {
			return fmt.Errorf("dequeue count %d is out of range", dq)
		}
		if err := fn(visible, Taken{slot, int32(dq), ver, tag}); err != nil {
			return err
		}
	}
	return d.done()
}

// updateRec is an Update: the message in slot is visible at visible, has
// receipt version and tag, and, if hasContent, the content.
type updateRec struct {
	slot       uint32
	visible    int64
	version    uint32
	tag        uint64
	hasContent bool
	content    string
}

// appendUpdate records an Update of the message in slot, which left it
// visible at visible with receipt version and tag, and, if hasContent,
// content.
func appendUpdate(b []byte, qid uint64, slot uint32, visible int64, version uint32, tag uint64, hasContent bool, content string) []byte {
	e := enc(b).op(recUpdate, qid).u(uint64(slot)).i(visible).u(uint64(version)).u64(tag)
	if !hasContent {
		return append(e, 0)
	}
	return append(e, 1).str(content)
}

func readUpdate(d *dec) (updateRec, error) {
	r := updateRec{slot: d.u32(), visible: d.i(), version: d.u32(), tag: d.u64()}
	switch d.byte() {
	case 0:
	case 1:
		r.hasContent, r.content = true, d.str()
	default:
		d.fail(errors.New("bad content flag"))
	}
	return r, d.done()
}

func appendDelete(b []byte, qid uint64, slot uint32) []byte {
	return enc(b).op(recDelete, qid).u(uint64(slot))
}

func readDelete(d *dec) (uint32, error) {
	slot := d.u32()
	return slot, d.done()
}

// The checkpoint records. A checkpoint is a service record, then each
// queue: its queue record, its chunks (each a chunk record followed by the
// Puts of the messages in it, or a reference to an older checkpoint that
// holds the chunk unchanged), and its end record; then an end record with
// the totals. The LSNs say as of which log record each part was copied
// (see replay.go).

func appendCkptService(b []byte, nextQID uint64) []byte {
	return enc(append(b, recCkptService)).str(ckptMagic).u(ckptFormat).u(nextQID)
}

func readCkptService(d *dec) (nextQID uint64, err error) {
	if d.str() != ckptMagic {
		return 0, errors.New("not an azq checkpoint")
	}
	if f := d.u(); f != ckptFormat {
		return 0, fmt.Errorf("checkpoint format %d, which this version cannot read", f)
	}
	nextQID = d.u()
	return nextQID, d.done()
}

// appendCkptQueue records the state of a queue, apart from its messages,
// as of record lsn.
func appendCkptQueue(b []byte, h *Header, lsn uint64) []byte {
	return enc(b).op(recCkptQueue, h.QID).str(h.Name).u(h.Seq).u(uint64(h.Next)).metadata(h.Metadata).policies(h.Policies).u(lsn)
}

func readCkptQueue(d *dec, qid uint64) (h Header, lsn uint64, err error) {
	h = Header{QID: qid, Name: d.str(), Seq: d.u(), Next: d.u32(), Metadata: d.metadata(), Policies: d.policies()}
	lsn = d.u()
	return h, lsn, d.done()
}

func appendCkptChunk(b []byte, qid uint64, chunk uint32, lsn uint64) []byte {
	return enc(b).op(recCkptChunk, qid).u(uint64(chunk)).u(lsn)
}

func readCkptChunk(d *dec) (chunk uint32, lsn uint64, err error) {
	chunk, lsn = d.u32(), d.u()
	return chunk, lsn, d.done()
}

// appendCkptChunkRef stands for a chunk that has not changed since an
// older checkpoint, gen, copied it as of record lsn: the records that
// checkpoint holds of it are its content.
func appendCkptChunkRef(b []byte, qid uint64, chunk uint32, gen, lsn uint64) []byte {
	return enc(b).op(recCkptChunkRef, qid).u(uint64(chunk)).u(gen).u(lsn)
}

func readCkptChunkRef(d *dec) (chunk uint32, gen, lsn uint64, err error) {
	chunk, gen, lsn = d.u32(), d.u(), d.u()
	return chunk, gen, lsn, d.done()
}

func appendCkptQueueEnd(b []byte, qid uint64, chunks uint32, lsn uint64) []byte {
	return enc(b).op(recCkptQueueEnd, qid).u(uint64(chunks)).u(lsn)
}

func readCkptQueueEnd(d *dec) (chunks uint32, lsn uint64, err error) {
	chunks, lsn = d.u32(), d.u()
	return chunks, lsn, d.done()
}

func appendCkptEnd(b []byte, queues, messages int) []byte {
	return enc(append(b, recCkptEnd)).u(uint64(queues)).u(uint64(messages))
}

func readCkptEnd(d *dec) (queues, messages uint64, err error) {
	queues, messages = d.u(), d.u()
	return queues, messages, d.done()
}

// appendPutBatch records the messages one PutBatch put, in the order it
// put them: one record, so that a crash keeps all of them or none.
func appendPutBatch(b []byte, qid uint64, ms []Message) []byte {
	e := enc(b).op(recPutBatch, qid).u(uint64(len(ms)))
	for i := range ms {
		e = e.message(&ms[i])
	}
	return e
}

// readPutBatch reads a PutBatch record, calling fn with each message put.
func readPutBatch(d *dec, fn func(m Message) error) error {
	n := d.u()
	if n > uint64(len(d.b)) {
		return errShortRecord
	}
	for ; n > 0; n-- {
		m, err := readMessage(d)
		if err != nil {
			return err
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	return d.done()
}

// appendDeleteBatch records the deletions of one DeleteBatch, of the
// messages in slots, in order: one record.
func appendDeleteBatch(b []byte, qid uint64, slots []uint32) []byte {
	e := enc(b).op(recDeleteBatch, qid).u(uint64(len(slots)))
	for _, slot := range slots {
		e = e.u(uint64(slot))
	}
	return e
}

// readDeleteBatch reads a DeleteBatch record, calling fn with each slot
// whose message was deleted.
func readDeleteBatch(d *dec, fn func(slot uint32) error) error {
	n := d.u()
	if n > uint64(len(d.b)) {
		return errShortRecord
	}
	for ; n > 0; n-- {
		slot := d.u32()
		if d.err != nil {
			return d.err
		}
		if err := fn(slot); err != nil {
			return err
		}
	}
	return d.done()
}
