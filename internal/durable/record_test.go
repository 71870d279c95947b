package durable

import (
	"reflect"
	"testing"
	"time"
)

// TestRecordsRoundTrip: every record decodes to what was encoded, and
// every record cut short fails to decode instead of decoding to
// something else.
func TestRecordsRoundTrip(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	msg := Message{Slot: 4097, Seq: 9, ID: [16]byte{1, 2, 3, 15: 16}, Content: "héllo",
		Inserted: start.UnixNano(), Visible: start.UnixNano() + 5e9, Expires: start.UnixNano() + 7e9,
		Tag: 0xfeedface, Dequeues: 3, Version: 4}
	forever := msg
	forever.Expires, forever.Dequeues, forever.Version = NeverExpires, 0, 0
	md := map[string]string{"a": "b", "c": ""}
	ps := []Policy{{ID: "p", Start: start, Expiry: start.Add(time.Hour), Permission: "raup"}, {ID: "q"}}
	hdr := Header{QID: 3, Name: "queue", Seq: 12, Next: 8193, Metadata: md, Policies: ps}
	taken := []Taken{{Slot: 1, Dequeues: 1, Version: 1, Tag: 7}, {Slot: 4096, Dequeues: 2, Version: 5, Tag: 8}}

	tests := []struct {
		name string
		rec  []byte
		want any
		read func(d *dec) (any, error)
	}{
		{"create", appendCreateQueue(nil, 3, "queue", md), []any{"queue", md},
			func(d *dec) (any, error) { n, m, err := readCreateQueue(d); return []any{n, m}, err }},
		{"metadata", appendMetadata(nil, 3, md), md,
			func(d *dec) (any, error) { return readMetadata(d) }},
		{"policies", appendPolicies(nil, 3, ps), ps,
			func(d *dec) (any, error) { return readPolicies(d) }},
		{"put", appendPut(nil, 3, &msg), msg,
			func(d *dec) (any, error) { return readPut(d) }},
		{"put forever", appendPut(nil, 3, &forever), forever,
			func(d *dec) (any, error) { return readPut(d) }},
		{"get", appendGet(nil, 3, msg.Visible, taken), []any{msg.Visible, taken},
			func(d *dec) (any, error) {
				var vis int64
				var got []Taken
				err := readGet(d, func(v int64, t Taken) error { vis = v; got = append(got, t); return nil })
				return []any{vis, got}, err
			}},
		{"update", appendUpdate(nil, 3, 5, 77, 2, 9, true, "new"),
			updateRec{slot: 5, visible: 77, version: 2, tag: 9, hasContent: true, content: "new"},
			func(d *dec) (any, error) { return readUpdate(d) }},
		{"update keeping the content", appendUpdate(nil, 3, 5, 77, 2, 9, false, "ignored"),
			updateRec{slot: 5, visible: 77, version: 2, tag: 9},
			func(d *dec) (any, error) { return readUpdate(d) }},
		{"delete", appendDelete(nil, 3, 5), uint32(5),
			func(d *dec) (any, error) { return readDelete(d) }},
		{"put batch", appendPutBatch(nil, 3, []Message{msg, forever}), []Message{msg, forever},
			func(d *dec) (any, error) {
				var got []Message
				err := readPutBatch(d, func(m Message) error { got = append(got, m); return nil })
				return got, err
			}},
		{"delete batch", appendDeleteBatch(nil, 3, []uint32{5, 4097}), []uint32{5, 4097},
			func(d *dec) (any, error) {
				var got []uint32
				err := readDeleteBatch(d, func(slot uint32) error { got = append(got, slot); return nil })
				return got, err
			}},
		{"checkpoint queue", appendCkptQueue(nil, &hdr, 40), []any{hdr, uint64(40)},
			func(d *dec) (any, error) { h, lsn, err := readCkptQueue(d, 3); return []any{h, lsn}, err }},
		{"checkpoint chunk", appendCkptChunk(nil, 3, 2, 41), []any{uint32(2), uint64(41)},
			func(d *dec) (any, error) { c, lsn, err := readCkptChunk(d); return []any{c, lsn}, err }},
		{"checkpoint chunk reference", appendCkptChunkRef(nil, 3, 2, 6, 41), []any{uint32(2), uint64(6), uint64(41)},
			func(d *dec) (any, error) {
				c, g, lsn, err := readCkptChunkRef(d)
				return []any{c, g, lsn}, err
			}},
		{"checkpoint queue end", appendCkptQueueEnd(nil, 3, 3, 42), []any{uint32(3), uint64(42)},
			func(d *dec) (any, error) { c, lsn, err := readCkptQueueEnd(d); return []any{c, lsn}, err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := dec{b: tc.rec}
			if _, qid := d.header(); qid != 3 {
				t.Fatalf("queue %d, want 3", qid)
			}
			body := d.b
			got, err := tc.read(&dec{b: body})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", got, tc.want)
			}
			for n := range body {
				if _, err := tc.read(&dec{b: body[:n]}); err == nil {
					t.Fatalf("the record cut to %d of %d bytes decoded", n, len(body))
				}
			}
		})
	}
}

// TestServiceRecordsRoundTrip: the checkpoint's service and end records,
// which name no queue.
func TestServiceRecordsRoundTrip(t *testing.T) {
	d := dec{b: appendCkptService(nil, 17)}
	if op := d.byte(); op != recCkptService {
		t.Fatalf("type %d", op)
	}
	if n, err := readCkptService(&d); err != nil || n != 17 {
		t.Fatalf("next queue %d, %v; want 17", n, err)
	}
	d = dec{b: appendCkptEnd(nil, 2, 300)}
	if op := d.byte(); op != recCkptEnd {
		t.Fatalf("type %d", op)
	}
	if q, m, err := readCkptEnd(&d); err != nil || q != 2 || m != 300 {
		t.Fatalf("%d queues, %d messages, %v; want 2, 300", q, m, err)
	}
	bad := dec{b: enc(nil).str("azq-other").u(ckptFormat).u(1)}
	if _, err := readCkptService(&bad); err == nil {
		t.Fatal("a service record of another magic decoded")
	}
}
