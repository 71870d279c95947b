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

// frameOffsets returns where the valid frames of data start, in order.
func frameOffsets(data []byte) []int {
	var offs []int
	for off := 0; off < len(data); {
		_, p, bad := frameAt(data, off)
		if bad != "" {
			break
		}
		offs = append(offs, off)
		off += frameHeaderSize + len(p)
	}
	return offs
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
// is a frame of its own: frame 0 is the header, frame i record i.
func twoHundred(t *testing.T) (*vfs.MemFS, []string) {
	fs := vfs.NewMem()
	l, _, _ := open(t, fs, Options{})
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
			binary.LittleEndian.PutUint32(d[off:], binary.LittleEndian.Uint32(d[off:])+128<<10)
		}},
		{"length's low bit flipped", 100, func(d []byte, off int) { d[off] ^= 1 }},
		{"length's high bit flipped", 50, func(d []byte, off int) { d[off+2] ^= 0x80 }},
		{"kind changed", 50, func(d []byte, off int) { d[off+3] = 0x55 }},
		{"checksum flipped", 150, func(d []byte, off int) { d[off+5] ^= 0x10 }},
		{"payload flipped", 1, func(d []byte, off int) { d[off+frameHeaderSize+2] ^= 0x01 }},
		{"header frame flipped", 0, func(d []byte, off int) { d[off+frameHeaderSize] ^= 0x01 }},
		{"frame zeroed", 120, func(d []byte, off int) {
			_, p, _ := frameAt(d, off)
			clear(d[off : off+frameHeaderSize+len(p)])
		}},
		{"second to last frame flipped", 199, func(d []byte, off int) { d[off+frameHeaderSize] ^= 0x01 }},
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
func sealedPair(t *testing.T) *vfs.MemFS {
	fs := vfs.NewMem()
	l, _, _ := open(t, fs, Options{})
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
			clear(d[off : off+16])
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
				_, base, _, _, err := checkpointHeader("", d)
				mustNil(t, err)
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
