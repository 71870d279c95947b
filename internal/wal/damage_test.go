package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/azqlib/azq/internal/vfs"
)

// frameOffsets returns where the valid frames of the file data start, in
// order: its header, and each frame after it that passes its checksums
// under the file's key and in the chain (whatever the records before it).
func frameOffsets(data []byte) []int {
	var offs []int
	keySum, chain := headerKeySum, uint32(0)
	for off := 0; off < len(data); {
		h, bad := headerAt(data, off, keySum)
		end := off + frameHeaderSize + h.n
		if bad != "" || end > len(data) || payloadSum(chain, data[off+frameHeaderSize:end]) != h.psum {
			break
		}
		if off == 0 {
			keySum = fileKeyOf(data).sum()
		}
		offs = append(offs, off)
		off, chain = end, h.sum
	}
	return offs
}

// fileKeyOf returns the key in the header of the file data.
func fileKeyOf(data []byte) fileKey {
	for _, magic := range []string{segmentMagic, checkpointMagic} {
		if h, _, bad, err := readHeader(data, magic); bad == "" && err == nil {
			return h.key
		}
	}
	panic("no header")
}

// frameEnd returns where the frame at data[off:] ends, as its length
// says.
func frameEnd(data []byte, off int) int {
	return off + frameHeaderSize + int(binary.LittleEndian.Uint32(data[off+4:])&MaxPayload)
}

// rewrite replaces the file name of fs with what change makes of its
// contents, durably.
func rewrite(t *testing.T, fs vfs.FS, name string, change func([]byte) []byte) {
	t.Helper()
	data, err := fs.ReadFile(name)
	mustNil(t, err)
	data = change(data)
	f, err := fs.Create(name)
	mustNil(t, err)
	_, err = f.WriteAt(data, 0)
	mustNil(t, err)
	mustNil(t, f.Sync())
	mustNil(t, f.Close())
}

// twoHundred makes a log of 200 records, each synced on its own, so each
// is a frame of its own: frame 0 is the header, frame i record i. The
// segment is allotted 256 KiB, which the strict file system copies at
// each sync (rather than the default megabyte): the frames take under 5
// KiB, so a length raised by 128 KiB still points into allotted zeros.
func twoHundred(t *testing.T) (*vfs.MemFS, []string) {
	fs := vfs.NewMem()
	l, _, _ := open(t, fs, Options{AllotBytes: 256 << 10})
	recs := appendN(t, l, "put", 200)
	mustNil(t, l.Close())
	return fs, recs
}

func wantCorrupt(t *testing.T, err error, file string, offset int64) {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("Open: %v, want a *CorruptError", err)
	}
	if ce.File != file || ce.Offset != offset {
		t.Fatalf("Open: %v; want the error to name %s at offset %d", err, file, offset)
	}
}

// TestDamageIsCorruption damages one frame of a log in the middle and
// checks that Open refuses it with a *CorruptError naming the file and
// the damaged frame's offset, rather than treat it as a torn tail and lose
// the acknowledged records after it.
func TestDamageIsCorruption(t *testing.T) {
	seg := SegmentName(dir, 1)
	for _, tc := range []struct {
		name   string
		frame  int // the frame damaged
		damage func(data []byte, off int)
	}{
		// The case: the 100th record's length raised by 128 KiB
		// points past the written data into the allotted zeros.
		{"length raised by 128 KiB", 100, func(d []byte, off int) {
			binary.LittleEndian.PutUint32(d[off+4:], binary.LittleEndian.Uint32(d[off+4:])+128<<10)
			if end := frameEnd(d, off); end <= lastNonZero(d) || end > len(d) {
				panic("the raised length does not point into the allotted zeros")
			}
		}},
		{"length's low bit flipped", 100, func(d []byte, off int) { d[off+4] ^= 1 }},
		{"length's high bit flipped", 50, func(d []byte, off int) { d[off+6] ^= 0x80 }},
		{"kind changed", 50, func(d []byte, off int) { d[off+kindOffset] = 0x55 }},
		{"checksum flipped", 150, func(d []byte, off int) { d[off+1] ^= 0x10 }},
		{"payload checksum flipped", 150, func(d []byte, off int) { d[off+9] ^= 0x10 }},
		{"sequence flipped", 150, func(d []byte, off int) { d[off+12] ^= 0x01 }},
		{"payload flipped", 1, func(d []byte, off int) { d[off+frameHeaderSize+2] ^= 0x01 }},
		{"header frame flipped", 0, func(d []byte, off int) { d[off+frameHeaderSize] ^= 0x01 }},
		{"frame zeroed", 120, func(d []byte, off int) {
			clear(d[off:frameEnd(d, off)])
		}},
		{"second to last frame flipped", 199, func(d []byte, off int) { d[off+frameHeaderSize] ^= 0x01 }},
		// Frames of this segment, valid in themselves, where they do not
		// belong: the sequence numbers and the chain tell.
		{"two frames swapped", 100, func(d []byte, off int) {
			next := frameEnd(d, off)
			a, b := bytes.Clone(d[off:next]), bytes.Clone(d[next:frameEnd(d, next)])
			copy(d[off:], b)
			copy(d[off+len(b):], a)
		}},
		{"a frame replaced by an earlier one", 150, func(d []byte, off int) {
			earlier := frameOffsets(d)[120]
			copy(d[off:], d[earlier:frameEnd(d, earlier)])
		}},
		{"a frame rewritten outside the chain", 100, func(d []byte, off int) {
			// Its payload changed, its checksums made anew under the
			// file's key, but chained to nothing.
			d[off+frameHeaderSize+2] ^= 0x01
			n := frameEnd(d, off) - off - frameHeaderSize
			finishFrame(d[off:], n, kindRecords, fileKeyOf(d).sum(), 0, binary.LittleEndian.Uint64(d[off+12:]))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, _ := twoHundred(t)
			var off int
			rewrite(t, fs, seg, func(d []byte) []byte {
				off = frameOffsets(d)[tc.frame]
				tc.damage(d, off)
				return d
			})
			_, _, err := Open(dir, Options{FS: fs}, (&replayed{}).replay())
			wantCorrupt(t, err, seg, int64(off))
		})
	}
}

// TestZeroedPageIsCorruption zeroes a 4 KiB page in the middle of a
// segment, as a lost write of a disk can: the frames after it are valid,
// so this is damage.
func TestZeroedPageIsCorruption(t *testing.T) {
	fs := vfs.NewMem()
	l, _, _ := open(t, fs, Options{})
	appendN(t, l, "record-with-some-length-to-it", 600) // about 30 KiB
	mustNil(t, l.Close())
	seg := SegmentName(dir, 1)
	var first int
	rewrite(t, fs, seg, func(d []byte) []byte {
		clear(d[8192:12288])
		for _, off := range frameOffsets(d) {
			first = off
		}
		return d
	})
	_, _, err := Open(dir, Options{FS: fs}, (&replayed{}).replay())
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.File != seg || ce.Offset != int64(first+0) && (ce.Offset < 8192-64 || ce.Offset > 8192) {
		t.Fatalf("Open with a zeroed page: %v, want a *CorruptError naming %s at the frame that straddles offset 8192", err, seg)
	}
}

// TestTornTailIsMovedAside damages the last frame, which nothing valid
// follows: a torn tail. Open drops it, keeps its bytes in a file beside
// the segment, and the log goes on after the last good record.
func TestTornTailIsMovedAside(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(d []byte, off int) []byte
	}{
		{"last frame's payload flipped", func(d []byte, off int) []byte { d[off+frameHeaderSize+3] ^= 0x20; return d }},
		{"last frame cut short", func(d []byte, off int) []byte {
			clear(d[off+frameHeaderSize+2:])
			return d
		}},
		{"file ends inside the last frame", func(d []byte, off int) []byte { return d[:off+5] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, recs := twoHundred(t)
			seg := SegmentName(dir, 1)
			var off int
			var tail []byte
			rewrite(t, fs, seg, func(d []byte) []byte {
				offs := frameOffsets(d)
				off = offs[len(offs)-1]
				d = tc.damage(d, off)
				tail = bytes.Clone(d[off:lastNonZero(d)])
				return d
			})
			l, r, rec := open(t, fs, Options{})
			if !equal(r.records, recs[:199]) {
				t.Fatalf("recovered %d records, want the 199 before the torn one", len(r.records))
			}
			if want := fmt.Sprintf("%s.torn-%d", seg, off); rec.TornFile != want || rec.TornBytes != int64(len(tail)) {
				t.Fatalf("torn tail moved to %q (%d bytes), want %q (%d bytes)", rec.TornFile, rec.TornBytes, want, len(tail))
			}
			kept, err := fs.ReadFile(rec.TornFile)
			mustNil(t, err)
			if !bytes.Equal(kept, tail) {
				t.Fatalf("the file beside holds %x, want the cut bytes %x", kept, tail)
			}
			more := appendN(t, l, "more", 2)
			mustNil(t, l.Close())
			_, r, rec = open(t, fs, Options{})
			if !equal(r.records, append(recs[:199:199], more...)) || rec.TornFile != "" {
				t.Fatalf("second reopening: %d records, torn %q; want 201 and nothing torn", len(r.records), rec.TornFile)
			}
		})
	}
}

// sealedPair makes a log of two segments, the first sealed, with no
// checkpoint: a crash between a rotation and its checkpoint leaves this.
func sealedPair(t testing.TB) *vfs.MemFS {
	fs := vfs.NewMem()
	l, _, _ := open(t, fs, Options{AllotBytes: smallAllot})
	appendN(t, l, "first", 20)
	mustNil(t, l.Prepare())
	_, _, err := l.Rotate()
	mustNil(t, err)
	appendN(t, l, "second", 20)
	mustNil(t, l.Close())
	return fs
}

func TestSealedSegmentDamageIsCorruption(t *testing.T) {
	seg := SegmentName(dir, 1)
	for _, tc := range []struct {
		name   string
		damage func(d []byte, offs []int) (int, []byte)
	}{
		{"last record flipped", func(d []byte, offs []int) (int, []byte) {
			off := offs[len(offs)-2]
			d[off+frameHeaderSize] ^= 1
			return off, d
		}},
		{"seal zeroed", func(d []byte, offs []int) (int, []byte) {
			off := offs[len(offs)-1]
			clear(d[off:frameEnd(d, off)])
			return off, d
		}},
		{"cut before the seal", func(d []byte, offs []int) (int, []byte) {
			off := offs[len(offs)-1]
			return off, d[:off]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := sealedPair(t)
			var off int
			rewrite(t, fs, seg, func(d []byte) []byte {
				var out []byte
				off, out = tc.damage(d, frameOffsets(d))
				return out
			})
			_, _, err := Open(dir, Options{FS: fs}, (&replayed{}).replay())
			wantCorrupt(t, err, seg, int64(off))
		})
	}
}

func TestMissingFilesAreNamed(t *testing.T) {
	withCheckpoint := func(t *testing.T) *vfs.MemFS {
		fs := vfs.NewMem()
		l, _, _ := open(t, fs, Options{})
		appendN(t, l, "a", 10)
		checkpoint(t, l, "state")
		appendN(t, l, "b", 10)
		mustNil(t, l.Close())
		return fs
	}
	t.Run("segment of the checkpoint", func(t *testing.T) {
		fs := withCheckpoint(t)
		mustNil(t, fs.Remove(SegmentName(dir, 2)))
		_, _, err := Open(dir, Options{FS: fs}, (&replayed{}).replay())
		wantCorrupt(t, err, SegmentName(dir, 2), -1)
	})
	t.Run("checkpoint", func(t *testing.T) {
		fs := withCheckpoint(t)
		mustNil(t, fs.Remove(CheckpointName(dir, 2)))
		_, _, err := Open(dir, Options{FS: fs}, (&replayed{}).replay())
		wantCorrupt(t, err, CheckpointName(dir, 2), -1)
	})
	t.Run("segment in the middle", func(t *testing.T) {
		fs := vfs.NewMem()
		l, _, _ := open(t, fs, Options{})
		for i := 0; i < 3; i++ {
			appendN(t, l, "x", 5)
			mustNil(t, l.Prepare())
			_, _, err := l.Rotate()
			mustNil(t, err)
		}
		mustNil(t, l.Close())
		mustNil(t, fs.Remove(SegmentName(dir, 2)))
		_, _, err := Open(dir, Options{FS: fs}, (&replayed{}).replay())
		wantCorrupt(t, err, SegmentName(dir, 2), -1)
	})
}

func TestCheckpointDamageIsCorruption(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(d []byte) []byte
	}{
		{"record flipped", func(d []byte) []byte { d[len(d)/2] ^= 4; return d }},
		{"cut short", func(d []byte) []byte { return d[:len(d)-3] }},
		{"seal missing", func(d []byte) []byte {
			offs := frameOffsets(d)
			return d[:offs[len(offs)-1]]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			l, _, _ := open(t, fs, Options{})
			appendN(t, l, "a", 10)
			var state []string
			for i := 0; i < 100; i++ {
				state = append(state, fmt.Sprintf("state-%d", i))
			}
			checkpoint(t, l, state...)
			mustNil(t, l.Close())
			rewrite(t, fs, CheckpointName(dir, 2), tc.damage)
			_, _, err := Open(dir, Options{FS: fs}, (&replayed{}).replay())
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File != CheckpointName(dir, 2) {
				t.Fatalf("Open: %v, want a *CorruptError naming the checkpoint", err)
			}
		})
	}
}

// TestCheckpointHeaderIsChecked: a checkpoint whose header names another
// generation than its file, or depends on one not older than itself, is
// damage at its header.
func TestCheckpointHeaderIsChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		gen  uint64
		deps []uint64
	}{
		{"another generation", 7, nil},
		{"a dependency not older", 2, []uint64{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			l, _, _ := open(t, fs, Options{})
			appendN(t, l, "a", 10)
			checkpoint(t, l, "state")
			mustNil(t, l.Close())
			rewrite(t, fs, CheckpointName(dir, 2), func(d []byte) []byte {
				h, _, err := checkpointHeader("", d)
				mustNil(t, err)
				base := h.base
				var b bytes.Buffer
				e := NewEncoder(&b, tc.gen, base, tc.deps...)
				mustNil(t, e.Append([]byte("state")))
				mustNil(t, e.Close())
				return b.Bytes()
			})
			_, _, err := Open(dir, Options{FS: fs}, (&replayed{}).replay())
			wantCorrupt(t, err, CheckpointName(dir, 2), 0)
		})
	}
}

// TestReplayErrorIsCorruption: a record the caller cannot decode is
// damage at its frame.
func TestReplayErrorIsCorruption(t *testing.T) {
	fs, _ := twoHundred(t)
	var off int
	data, _ := fs.ReadFile(SegmentName(dir, 1))
	off = frameOffsets(data)[42]
	_, _, err := Open(dir, Options{FS: fs}, Replay{Record: func(lsn LSN, rec []byte) error {
		if lsn == 42 {
			return errors.New("undecodable")
		}
		return nil
	}})
	wantCorrupt(t, err, SegmentName(dir, 1), int64(off))
}

// TestLegacyFormatIsRefused: a directory written by azq before this
// format (records framed one by one, snapshots named snap-N) is refused
// with an error that says so, not read as a torn tail and opened empty.
func TestLegacyFormatIsRefused(t *testing.T) {
	legacyFrame := func(p []byte) []byte {
		b := binary.LittleEndian.AppendUint32(nil, uint32(len(p)))
		crc := crc32.Update(0, castagnoli, b)
		crc = crc32.Update(crc, castagnoli, p)
		return append(binary.LittleEndian.AppendUint32(b, crc), p...)
	}
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		file  string
	}{
		{"log", map[string][]byte{"wal-0000000000000001": append(legacyFrame([]byte("\\x01\\x01queue\\x00")), make([]byte, 4096)...)}, "wal-0000000000000001"},
		{"snapshot", map[string][]byte{"snap-0000000000000002": legacyFrame([]byte("azq-snapshot")), "wal-0000000000000002": nil}, "snap-0000000000000002"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			mustNil(t, fs.MkdirAll(dir))
			for name, data := range tc.files {
				f, err := fs.Create(dir + "/" + name)
				mustNil(t, err)
				f.WriteAt(data, 0)
				f.Close()
			}
			_, _, err := Open(dir, Options{FS: fs}, (&replayed{}).replay())
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File != dir+"/"+tc.file || !strings.Contains(ce.Reason, "earlier version") {
				t.Fatalf("Open of a directory in the earlier format: %v", err)
			}
		})
	}
}

// forgedFrame is a whole records frame holding payload, built with the
// package's own encoder as someone who has read the source and wants a
// message's content to pass for the frame after it would build it: the
// next sequence number, and a key and chain guessed (they are not known
// outside the file; keySum picks them).
func forgedFrame(payload []byte, keySum uint32, seq uint64) []byte {
	b, _ := appendFrame(nil, kindRecords, payload, keySum, 0, seq)
	return b
}

// padded is content that holds forged, with bytes after it, so that a cut
// 50 bytes before the end of its frame falls after forged.
func padded(forged []byte) []byte {
	return append(append([]byte("frames follow:"), forged...), bytes.Repeat([]byte("-"), 300)...)
}

// smallAllot is the allotment of the logs of tests that sync often: the
// strict file system copies a file at each sync.
const smallAllot = 16 << 10

// TestOnlyTheNextFrameCounts: whether a frame follows a damaged one must
// not be decided by bytes that are not the log's next frame: a frame
// inside the torn frame's payload, a frame of another segment, of an
// older generation or of another directory, a frame of this segment from
// before the damage. With any of these in or after a torn last frame, it
// is a torn tail, set aside with the 50 records before it kept.
func TestOnlyTheNextFrameCounts(t *testing.T) {
	// frameOf returns frame i of segment gen of a log of a few records in
	// segments 1 and 2: a frame of another directory's file.
	frameOf := func(t *testing.T, gen uint64, i int) []byte {
		fs := sealedPair(t)
		d, err := fs.ReadFile(SegmentName(dir, gen))
		mustNil(t, err)
		offs := frameOffsets(d)
		return bytes.Clone(d[offs[i]:offs[i+1]])
	}
	for _, tc := range []struct {
		name string
		gen  uint64 // the segment written last: 1, or 2 after a sealed 1
		// content is the last record's, given the segment before it; nil
		// for 400 bytes of z.
		content func(t *testing.T, seg []byte) []byte
		// after returns bytes placed 10 bytes after the cut, given the
		// segment; nil for none.
		after func(t *testing.T, seg []byte) []byte
		// lengthToo damages the torn frame's length as well, so that where
		// it ends is not known and the search looks inside it.
		lengthToo bool
	}{
		{name: "a frame inside the torn frame", gen: 1, content: func(t *testing.T, _ []byte) []byte {
			return padded(forgedFrame([]byte("\x05hello"), headerKeySum, 51))
		}},
		{name: "a whole file's frames inside the torn frame", gen: 1, content: func(t *testing.T, _ []byte) []byte {
			var b bytes.Buffer
			e := NewEncoder(&b, 1, 50)
			mustNil(t, e.Append([]byte("forged")))
			mustNil(t, e.Close())
			return padded(b.Bytes())
		}},
		{name: "a frame under this segment's own key inside the torn frame", gen: 1, content: func(t *testing.T, seg []byte) []byte {
			// Not something a message can hold (the key never leaves the
			// file), but what the torn frame's valid header says is its
			// payload is payload, whatever it holds.
			return padded(forgedFrame([]byte("\x05hello"), fileKeyOf(seg).sum(), 51))
		}},
		{name: "a frame inside a torn frame whose length is damaged too", gen: 1, lengthToo: true, content: func(t *testing.T, _ []byte) []byte {
			return padded(forgedFrame([]byte("\x05hello"), headerKeySum, 51))
		}},
		{name: "a whole file's frames inside a torn frame whose length is damaged too", gen: 1, lengthToo: true, content: func(t *testing.T, _ []byte) []byte {
			var b bytes.Buffer
			e := NewEncoder(&b, 1, 50)
			mustNil(t, e.Append([]byte("forged")))
			mustNil(t, e.Close())
			return padded(b.Bytes())
		}},
		{name: "a frame of another directory's segment of the same generation after the torn frame", gen: 1, after: func(t *testing.T, _ []byte) []byte {
			return frameOf(t, 1, 3)
		}},
		{name: "a frame of another directory's segment after a torn frame whose length is damaged too", gen: 1, lengthToo: true, after: func(t *testing.T, _ []byte) []byte {
			return frameOf(t, 1, 3)
		}},
		{name: "a frame of an older segment after the torn frame", gen: 2, after: func(t *testing.T, _ []byte) []byte {
			return nil // filled in below: a frame of this log's wal-1
		}},
		{name: "a frame of this segment from before after the torn frame", gen: 1, after: func(t *testing.T, seg []byte) []byte {
			offs := frameOffsets(seg)
			return bytes.Clone(seg[offs[30]:offs[31]])
		}},
		{name: "a frame of this segment from before after a torn frame whose length is damaged too", gen: 1, lengthToo: true, after: func(t *testing.T, seg []byte) []byte {
			offs := frameOffsets(seg)
			return bytes.Clone(seg[offs[30]:offs[31]])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			l, _, _ := open(t, fs, Options{AllotBytes: smallAllot})
			var recs []string
			if tc.gen == 2 {
				recs = appendN(t, l, "first", 20)
				mustNil(t, l.Prepare())
				_, _, err := l.Rotate()
				mustNil(t, err)
			}
			recs = append(recs, appendN(t, l, "put", 50-len(recs))...)
			seg := SegmentName(dir, tc.gen)
			before, err := fs.ReadFile(seg)
			mustNil(t, err)
			last := bytes.Repeat([]byte("z"), 400)
			if tc.content != nil {
				last = tc.content(t, before)
			}
			mustNil(t, l.Wait(l.Append(last)))
			mustNil(t, l.Close())
			var placed []byte
			if tc.after != nil {
				placed = tc.after(t, before)
				if placed == nil {
					d, err := fs.ReadFile(SegmentName(dir, 1))
					mustNil(t, err)
					offs := frameOffsets(d)
					placed = bytes.Clone(d[offs[5]:offs[6]])
				}
			}
			var off int
			var tail []byte
			rewrite(t, fs, seg, func(d []byte) []byte {
				offs := frameOffsets(d)
				off = offs[len(offs)-1]
				end := frameEnd(d, off) - 50 // cut inside the last frame
				clear(d[end:])
				copy(d[end+10:], placed)
				if tc.lengthToo {
					d[off+5] ^= 0x40 // the length's second byte
				}
				tail = bytes.Clone(d[off:lastNonZero(d)])
				return d
			})
			l, r, rec := open(t, fs, Options{})
			defer l.Close()
			if !equal(r.records, recs) {
				t.Fatalf("recovered %d records, want the 50 before the torn one", len(r.records))
			}
			if want := fmt.Sprintf("%s.torn-%d", seg, off); rec.TornFile != want || rec.TornBytes != int64(len(tail)) {
				t.Fatalf("torn tail moved to %q (%d bytes), want %q (%d bytes)", rec.TornFile, rec.TornBytes, want, len(tail))
			}
		})
	}
}

// TestFrameShapedPayloadIsPayload: records that hold whole frames in the
// middle of the log, the frame that would come next among them, are
// records like any other; with the last frame torn after them too.
func TestFrameShapedPayloadIsPayload(t *testing.T) {
	for _, torn := range []bool{false, true} {
		t.Run(fmt.Sprint("torn=", torn), func(t *testing.T) {
			fs := vfs.NewMem()
			l, _, _ := open(t, fs, Options{AllotBytes: smallAllot})
			recs := appendN(t, l, "before", 20)
			seg, err := fs.ReadFile(SegmentName(dir, 1))
			mustNil(t, err)
			var e bytes.Buffer
			enc := NewEncoder(&e, 1, 20)
			mustNil(t, enc.Append([]byte("checkpoint record")))
			mustNil(t, enc.Close())
			for _, forged := range [][]byte{
				forgedFrame([]byte("\x05hello"), headerKeySum, 21),
				forgedFrame([]byte("\x05hello"), fileKeyOf(seg).sum(), 21),
				e.Bytes(),
			} {
				mustNil(t, l.Wait(l.Append(forged)))
				recs = append(recs, string(forged))
			}
			recs = append(recs, appendN(t, l, "after", 20)...)
			mustNil(t, l.Wait(l.Append(bytes.Repeat([]byte("z"), 100))))
			if !torn {
				recs = append(recs, strings.Repeat("z", 100))
			}
			mustNil(t, l.Close())
			if torn {
				rewrite(t, fs, SegmentName(dir, 1), func(d []byte) []byte {
					offs := frameOffsets(d)
					clear(d[frameEnd(d, offs[len(offs)-1])-30:])
					return d
				})
			}
			l, r, rec := open(t, fs, Options{})
			defer l.Close()
			if !equal(r.records, recs) || (rec.TornFile != "") != torn {
				t.Fatalf("recovered %d records (torn %q), want %d", len(r.records), rec.TornFile, len(recs))
			}
		})
	}
}
