package wal

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/azqlib/azq/internal/vfs"
)

// appendFrame1 appends a frame of format 1: the length and kind, a
// CRC-32C of those and the payload, the payload. The package reads
// format 1 and no longer writes it; this is its encoder, for the tests.
func appendFrame1(b []byte, kind byte, p []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p))|uint32(kind)<<24)
	b = append(b, 0, 0, 0, 0)
	b = append(b, p...)
	binary.LittleEndian.PutUint32(b[start+4:], frame1CRC(b[start:], len(p)))
	return b
}

// header1 is the payload of a header frame of format 1.
func header1(magic string, gen uint64, base LSN, deps ...uint64) []byte {
	p := append([]byte(magic), 0)
	p = binary.AppendUvarint(p, 1)
	p = binary.AppendUvarint(p, gen)
	p = binary.AppendUvarint(p, base)
	p = binary.AppendUvarint(p, uint64(len(deps)))
	for _, d := range deps {
		p = binary.AppendUvarint(p, d)
	}
	return p
}

// records1 is the payload of a records frame.
func records1(recs ...string) []byte {
	var p []byte
	for _, r := range recs {
		p = binary.AppendUvarint(p, uint64(len(r)))
		p = append(p, r...)
	}
	return p
}

// checkpoint1 is a checkpoint file of format 1 holding recs.
func checkpoint1(gen uint64, base LSN, recs ...string) []byte {
	b := appendFrame1(nil, kindHeader, header1(checkpointMagic, gen, base))
	b = appendFrame1(b, kindRecords, records1(recs...))
	return appendFrame1(b, kindSeal, sealPayload(uint64(len(recs))))
}

// writeFiles writes files into dir of fs, durably.
func writeFiles(t *testing.T, fs vfs.FS, files map[string][]byte) {
	t.Helper()
	mustNil(t, fs.MkdirAll(dir))
	for name, data := range files {
		f, err := fs.Create(dir + "/" + name)
		mustNil(t, err)
		_, err = f.WriteAt(data, 0)
		mustNil(t, err)
		mustNil(t, f.Sync())
		mustNil(t, f.Close())
	}
	mustNil(t, fs.SyncDir(dir))
}

// TestFormat1Checkpoint: a directory of format 1 as Close leaves it (a
// checkpoint, and its segment holding only a header, or a header and a
// seal) opens; the log goes on in a new segment of format 2, and the next
// checkpoint lets the files of format 1 go.
func TestFormat1Checkpoint(t *testing.T) {
	seg := appendFrame1(nil, kindHeader, header1(segmentMagic, 3, 10))
	for _, tc := range []struct {
		name string
		seg  []byte
	}{
		{"header", append(seg, make([]byte, 4096)...)},
		{"header and seal", appendFrame1(seg, kindSeal, sealPayload(10))},
		{"header, allotment cut off", seg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			writeFiles(t, fs, map[string][]byte{
				"ckpt-0000000000000002": checkpoint1(2, 5, "old"),
				"ckpt-0000000000000003": checkpoint1(3, 10, "state"),
				"wal-0000000000000003":  tc.seg,
			})
			l, r, rec := open(t, fs, Options{AllotBytes: smallAllot})
			if !equal(r.ckpt, []string{"state"}) || len(r.records) != 0 || rec.Last != 10 {
				t.Fatalf("opened with checkpoint %q, records %q, last %d", r.ckpt, r.records, rec.Last)
			}
			recs := appendN(t, l, "new", 3)
			mustNil(t, l.Close())
			l, r, rec = open(t, fs, Options{AllotBytes: smallAllot})
			if !equal(r.records, recs) || r.lsns[0] != 11 {
				t.Fatalf("reopened with records %q at %v, want %q from 11", r.records, r.lsns, recs)
			}
			checkpoint(t, l, "newer")
			mustNil(t, l.Close())
			names, _ := fs.List(dir)
			if strings.Join(names, " ") != "ckpt-0000000000000005 wal-0000000000000005" {
				t.Fatalf("after a checkpoint in format 2: %v", names)
			}
			_, r, _ = open(t, fs, Options{})
			if !equal(r.ckpt, []string{"newer"}) {
				t.Fatalf("checkpoint %q", r.ckpt)
			}
		})
	}
}

// TestFormat1RecordsAreRefused: a segment of format 1 that holds records
// is refused with the error that says what to do, and left as it is.
func TestFormat1RecordsAreRefused(t *testing.T) {
	seg := appendFrame1(nil, kindHeader, header1(segmentMagic, 1, 0))
	seg = appendFrame1(seg, kindRecords, records1("a", "b"))
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		file  string
	}{
		{"log", map[string][]byte{"wal-0000000000000001": append(seg, make([]byte, 100)...)}, "wal-0000000000000001"},
		{"torn log", map[string][]byte{"wal-0000000000000001": append(seg, 9, 0, 0, 1, 7)}, "wal-0000000000000001"},
		{"after a checkpoint", map[string][]byte{
			"ckpt-0000000000000002": checkpoint1(2, 2, "state"),
			"wal-0000000000000002":  appendFrame1(appendFrame1(nil, kindHeader, header1(segmentMagic, 2, 2)), kindRecords, records1("c")),
		}, "wal-0000000000000002"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			writeFiles(t, fs, tc.files)
			_, _, err := Open(dir, Options{FS: fs}, (&replayed{}).replay())
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File != dir+"/"+tc.file || ce.Offset != 0 || !strings.Contains(ce.Reason, "format 1") {
				t.Fatalf("Open: %v; want a CorruptError naming %s and format 1", err, tc.file)
			}
			for name, want := range tc.files {
				if got, _ := fs.ReadFile(dir + "/" + name); string(got) != string(want) {
					t.Fatalf("the refused Open changed %s", name)
				}
			}
		})
	}
}

// TestFormat1CheckpointDamage: damage in a checkpoint of format 1 is
// refused as in one of format 2.
func TestFormat1CheckpointDamage(t *testing.T) {
	good := checkpoint1(2, 0, "a", "b", "c")
	for i := range good {
		d := []byte(string(good))
		d[i] ^= 0x04
		if _, _, _, err := ReadCheckpoint("ckpt", d, func([]byte) error { return nil }); err == nil {
			t.Fatalf("a checkpoint of format 1 with byte %d flipped was read", i)
		}
	}
	if _, _, _, err := ReadCheckpoint("ckpt", good[:len(good)-1], func([]byte) error { return nil }); err == nil {
		t.Fatal("a checkpoint of format 1 cut short was read")
	}
}
