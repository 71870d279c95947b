package wal

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/azqlib/azq/internal/vfs"
)

// FuzzScanSegment feeds arbitrary bytes, as segment 1 whose first record
// follows record running, to the scanner that recovery reads the log
// with (and to the readers of checkpoints and of the segments after the
// end). It must never panic; every record it replays must come from a
// frame that is the next one of the file's checksum chain, as the format
// defines it (checked by a second reading, chainRecords, written from the
// package documentation); and it must cost time linear in the input: it
// checksums at most a fixed multiple of the input's bytes, whatever
// lengths the frames claim and wherever frame-shaped bytes lie.
//
// The seed corpus is in testdata/fuzz/FuzzScanSegment, and segmentSeeds
// adds real segments of this version (their keys are random, so they are
// made anew each run).
func FuzzScanSegment(f *testing.F) {
	for _, seed := range segmentSeeds(f) {
		f.Add(seed, uint64(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, running uint64) {
		var cost int64
		testHookChecksummed = &cost
		defer func() { testHookChecksummed = nil }()
		start := running
		var got [][]byte
		s, err := scanSegment("wal", 1, data, &running, func(lsn LSN, rec []byte) error {
			if lsn != start+uint64(len(got))+1 {
				t.Fatalf("record %d replayed as LSN %d", start+uint64(len(got))+1, lsn)
			}
			got = append(got, rec)
			return nil
		})
		emptySegment(data, 1)
		ReadCheckpoint("ckpt", data, func([]byte) error { return nil })
		// Each byte is checksummed at most once as a payload, and each
		// offset costs at most one frame header (24 bytes with the key)
		// in the search for a frame after a damaged one; the rest is the
		// header frame, read as format 2 and as format 1.
		if limit := 64*int64(len(data)) + 1024; cost > limit {
			t.Fatalf("checksummed %d bytes of a %d-byte input", cost, len(data))
		}
		if s.end > len(data) || s.torn && s.end >= lastNonZero(data) {
			t.Fatalf("scan of %d bytes ended at %d (torn %v)", len(data), s.end, s.torn)
		}
		want, end, ok := chainRecords(data, start)
		if !ok || !s.created {
			if len(got) > 0 {
				t.Fatalf("%d records replayed from a segment with no header of format 2", len(got))
			}
			return
		}
		if len(got) > len(want) {
			t.Fatalf("%d records replayed, the chain holds %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("record %d replayed as %q, the chain holds %q", i+1, got[i], want[i])
			}
		}
		if err == nil && (len(got) != len(want) || s.end != end) {
			t.Fatalf("the scan replayed %d records and ended at %d; the chain holds %d and ends at %d", len(got), s.end, len(want), end)
		}
	})
}

// chainRecords reads the segment data as the package documentation
// defines format 2, independently of the scanner: its header frame, then
// each frame that is the next of the chain (its header checksum, of the
// key and bytes 4-19, its payload checksum, from the previous frame's
// header checksum, its count of the records before it, from start). It
// returns the records of the records frames, up to the first that does
// not decode; where the chain ends; and whether there is a header frame
// of format 2 for segment 1.
func chainRecords(data []byte, start uint64) (recs [][]byte, end int, ok bool) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	keyCRC := crc32.Update(0, tab, make([]byte, 8)) // the header frame's
	var chain uint32
	seq := uint64(0)
	for off := 0; off+20 <= len(data); {
		w := binary.LittleEndian.Uint32(data[off+4:])
		n, kind := int(w&(1<<24-1)), w>>24
		if off+20+n > len(data) {
			break
		}
		h := crc32.Update(keyCRC, tab, data[off+4:off+20])
		p := data[off+20 : off+20+n]
		if kind < 1 || kind > 3 || h != binary.LittleEndian.Uint32(data[off:]) ||
			crc32.Update(chain, tab, p) != binary.LittleEndian.Uint32(data[off+8:]) ||
			binary.LittleEndian.Uint64(data[off+12:]) != seq {
			break
		}
		if off == 0 {
			// "azq-log", 0, format 2, the key, generation 1.
			if kind != 2 || n != 18 || string(p[:9]) != "azq-log\x00\x02" || p[17] != 1 {
				return nil, 0, false
			}
			keyCRC, seq, ok = crc32.Update(0, tab, p[9:17]), start, true
		} else if kind == 1 {
			for q := p; len(q) > 0; {
				l, k := binary.Uvarint(q)
				if k <= 0 || l > uint64(len(q)-k) {
					return recs, off, ok
				}
				recs = append(recs, q[k:k+int(l)])
				seq++
				q = q[k+int(l):]
			}
		}
		chain = h
		off += 20 + n
		end = off
	}
	return recs, end, ok
}

// segmentSeeds returns segments of this version for the fuzzer to start
// from, their allotted zeros cut off but a few: whole, torn, sealed,
// holding frame-shaped records, damaged in the middle, empty.
func segmentSeeds(tb testing.TB) [][]byte {
	trim := func(d []byte) []byte { return bytes.Clone(d[:min(len(d), lastNonZero(d)+32)]) }
	segment := func(fill func(l *Log)) []byte {
		fs := vfs.NewMem()
		l, _, _ := open(tb, fs, Options{AllotBytes: smallAllot})
		fill(l)
		mustNil(tb, l.Close())
		d, err := fs.ReadFile(SegmentName(dir, 1))
		mustNil(tb, err)
		return trim(d)
	}
	whole := segment(func(l *Log) {
		appendN(tb, l, "record", 20)
		for i := 0; i < 5; i++ {
			l.Append(bytes.Repeat([]byte{byte(i)}, 100*i))
		}
		mustNil(tb, l.Sync())
	})
	forged := segment(func(l *Log) {
		appendN(tb, l, "record", 5)
		mustNil(tb, l.Wait(l.Append(forgedFrame([]byte("\x05hello"), headerKeySum, 6))))
		appendN(tb, l, "after", 5)
	})
	offs := frameOffsets(whole)
	torn := bytes.Clone(whole)
	clear(torn[offs[len(offs)-1]+frameHeaderSize+10:])
	damaged := bytes.Clone(whole)
	damaged[offs[10]+5] ^= 0x40 // the length
	fs := sealedPair(tb)
	sealed, err := fs.ReadFile(SegmentName(dir, 1))
	mustNil(tb, err)
	empty := segment(func(*Log) {})
	// A frame valid under the key but out of the chain.
	unchained := bytes.Clone(whole)
	unchained[offs[5]+frameHeaderSize+2] ^= 1
	finishFrame(unchained[offs[5]:], frameEnd(unchained, offs[5])-offs[5]-frameHeaderSize, kindRecords,
		fileKeyOf(unchained).sum(), 0, binary.LittleEndian.Uint64(unchained[offs[5]+12:]))
	// A torn tail of frame-shaped words claiming long frames, at every
	// offset: a search that read each one's payload would cost time
	// quadratic in it.
	costly := append(bytes.Clone(torn), make([]byte, 16<<10)...)
	for i := offs[len(offs)-1] + 8; i+frameHeaderSize <= len(costly); i += 4 {
		binary.LittleEndian.PutUint32(costly[i:], uint32(len(costly)-i-frameHeaderSize)|kindRecords<<24)
	}
	v1 := appendFrame1(nil, kindHeader, header1(segmentMagic, 1, 0))
	return [][]byte{whole, torn, damaged, forged, trim(sealed), empty, unchained, costly,
		v1, appendFrame1(v1, kindRecords, records1("a", "b"))}
}
