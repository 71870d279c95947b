package wal

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// LSN numbers the records of a log, from 1; 0 is the position before the
// first record.
type LSN = uint64

const (
	// frameHeaderSize is the size of a frame's header in format 2 (see
	// the package documentation), and kindOffset where in it the kind is.
	frameHeaderSize = 20
	kindOffset      = 7

	// MaxPayload is the largest payload of a frame.
	MaxPayload = 1<<24 - 1
	// MaxRecord is the largest record the log takes.
	MaxRecord = MaxPayload - binary.MaxVarintLen32

	// batchBytes is the payload at which a records frame is closed and
	// the next record starts another, unless one record alone is larger.
	batchBytes = 1 << 20
)

// The kinds of frames.
const (
	kindRecords = 1 // a batch of records
	kindHeader  = 2 // the first frame of a file
	kindSeal    = 3 // the last frame of a file
)

// The headers' magic strings, and the format of the files this version
// writes; it reads format 1 too, as far as format1.go says.
const (
	segmentMagic    = "azq-log"
	checkpointMagic = "azq-checkpoint"
	format          = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum continues the CRC-32C c over b: every checksum of the package
// is computed here.
func checksum(c uint32, b []byte) uint32 {
	if testHookChecksummed != nil {
		*testHookChecksummed += int64(len(b))
	}
	return crc32.Update(c, castagnoli, b)
}

// testHookChecksummed, if set, counts the bytes checksummed: for the
// check of FuzzScanSegment that a scan costs time linear in its input.
var testHookChecksummed *int64

// keySize is the size of a file's key: random bytes chosen when the file
// is created, written in its header and covered by the header checksum
// of every frame after it. The key tells this file's frames from any
// other's (an older file of the same name, a file of another directory)
// and, since nothing outside the file ever shows it, from bytes that
// someone put in a message to pass for a frame.
const keySize = 8

// fileKey is a file's key.
type fileKey [keySize]byte

// newKey returns a new random key.
func newKey() fileKey {
	var k fileKey
	rand.Read(k[:]) // never fails (crypto/rand)
	return k
}

// keySum is the CRC-32C of a file's key: where the header checksum of
// each of its frames starts. The header frame, which holds the key, is
// read before the key is known: its sum starts from the zero key's.
func (k fileKey) sum() uint32 { return checksum(0, k[:]) }

// headerKeySum is the key sum of every file's header frame.
var headerKeySum = fileKey{}.sum()

// frameHeader is a frame's header, decoded.
type frameHeader struct {
	kind byte
	n    int    // the payload's length
	sum  uint32 // the header checksum: the next frame's chain
	psum uint32 // the payload checksum, chained to the frame before
	seq  uint64 // the records of the log (of a checkpoint, of the file) before the frame
}

// headerSum is the header checksum of the frame header b[:frameHeaderSize]
// of a file whose key sums to keySum: of the key and bytes 4-19.
func headerSum(b []byte, keySum uint32) uint32 { return checksum(keySum, b[4:frameHeaderSize]) }

// payloadSum is the payload checksum of a frame whose payload is p and
// whose previous frame's header checksum is chain: a CRC-32C of p that
// starts from chain, so that each frame's header checksum, which covers
// it, covers every frame of the file before it.
func payloadSum(chain uint32, p []byte) uint32 { return checksum(chain, p) }

// finishFrame fills the header b[:frameHeaderSize] of a frame of kind
// whose payload is the n bytes after it, which follows seq records and
// the frame whose header checksum is chain, in the file whose key sums to
// keySum. It returns the frame's header checksum, the next frame's chain.
// The encoder of every frame; headerAt and payloadSum are its decoder.
func finishFrame(b []byte, n int, kind byte, keySum, chain uint32, seq uint64) uint32 {
	binary.LittleEndian.PutUint32(b[4:], uint32(n)|uint32(kind)<<24)
	binary.LittleEndian.PutUint32(b[8:], payloadSum(chain, b[frameHeaderSize:frameHeaderSize+n]))
	binary.LittleEndian.PutUint64(b[12:], seq)
	sum := headerSum(b, keySum)
	binary.LittleEndian.PutUint32(b[0:], sum)
	return sum
}

// reserveFrame reserves a frame header at the end of b and returns where
// the frame starts; finishFrame fills it once the payload follows.
func reserveFrame(b []byte) ([]byte, int) {
	var h [frameHeaderSize]byte
	return append(b, h[:]...), len(b)
}

// appendFrame appends a whole frame of kind with payload p, following seq
// records and the frame whose header checksum is chain, in the file whose
// key sums to keySum, and returns its header checksum.
func appendFrame(b []byte, kind byte, p []byte, keySum, chain uint32, seq uint64) ([]byte, uint32) {
	b, start := reserveFrame(b)
	b = append(b, p...)
	return b, finishFrame(b[start:], len(p), kind, keySum, chain, seq)
}

// headerAt reads the frame header at data[off:] and checks its kind and
// its header checksum against the file's key sum. It does not read the
// payload, nor check that it fits in data: it costs the same whatever
// the length the header claims.
func headerAt(data []byte, off int, keySum uint32) (frameHeader, string) {
	rest := data[off:]
	if len(rest) < frameHeaderSize {
		return frameHeader{}, "a frame header cut short"
	}
	w := binary.LittleEndian.Uint32(rest[4:])
	h := frameHeader{kind: byte(w >> 24), n: int(w & MaxPayload)}
	if h.kind < kindRecords || h.kind > kindSeal {
		return frameHeader{}, fmt.Sprintf("no frame (kind %d)", h.kind)
	}
	h.sum = binary.LittleEndian.Uint32(rest)
	if headerSum(rest, keySum) != h.sum {
		return frameHeader{}, "header checksum mismatch"
	}
	h.psum = binary.LittleEndian.Uint32(rest[8:])
	h.seq = binary.LittleEndian.Uint64(rest[12:])
	return h, ""
}

// frameReader reads the frames of a file of format 2 in order: each one
// must pass its header checksum under the file's key, start where the
// one before it ended, follow it in the checksum chain, and say it
// follows as many records as the frames before it hold.
type frameReader struct {
	data   []byte
	off    int    // where the next frame starts
	keySum uint32 // the file's key's
	chain  uint32 // the header checksum of the frame before off
	seq    uint64 // the records before off
	// After next fails: whether the frame at off had a valid header, and
	// that header.
	header bool
	h      frameHeader
}

// next reads the frame at r.off and moves past it. It returns its kind
// and payload, or why there is no valid frame there (bad), or, for a
// frame whose header is valid but out of order, an error. The caller
// advances r.seq by the records of a records frame.
func (r *frameReader) next() (kind byte, payload []byte, bad string, err error) {
	h, bad := headerAt(r.data, r.off, r.keySum)
	r.header, r.h = bad == "", h
	if bad != "" {
		return 0, nil, bad, nil
	}
	if h.seq != r.seq {
		return 0, nil, "", fmt.Errorf("a frame out of order: it follows record %d, the frames before it end at record %d", h.seq, r.seq)
	}
	end := r.off + frameHeaderSize + h.n
	if end > len(r.data) {
		return 0, nil, fmt.Sprintf("a frame of %d bytes runs past the end of the file", h.n), nil
	}
	p := r.data[r.off+frameHeaderSize : end]
	if payloadSum(r.chain, p) != h.psum {
		return 0, nil, "payload checksum mismatch", nil
	}
	r.off, r.chain = end, h.sum
	return h.kind, p, "", nil
}

// followerFrom returns the offset of the first frame at or after from
// that this file's writer wrote after the frame at which r stopped: one
// whose header passes the header checksum under the file's key and that
// follows at least r.seq records; or -1. It looks at every offset, so
// that it finds the next frame wherever a damaged length claims the
// damaged one ends, and at each it reads only a header, so that it costs
// time linear in the data. A frame-shaped payload cannot pass (the key is
// unknown to whoever wrote the payload), nor a frame of another file (its
// key differs), nor a frame of this file from before the damage (it
// follows fewer records).
func (r *frameReader) followerFrom(from int) int {
	for p := max(from, 0); p+frameHeaderSize <= len(r.data); p++ {
		if k := r.data[p+kindOffset]; k != kindRecords && k != kindSeal {
			continue // the common case, zeros among them
		}
		if h, bad := headerAt(r.data, p, r.keySum); bad == "" && h.seq >= r.seq {
			return p
		}
	}
	return -1
}

// followerSearchStart is where to look for a frame after the one at
// which r stopped: after its extent if its header was valid (its length
// is then the writer's, and what lies inside is its payload, whatever it
// looks like), after its header if not.
func (r *frameReader) followerSearchStart() int {
	if r.header {
		return r.off + frameHeaderSize + r.h.n
	}
	return r.off + frameHeaderSize
}

// fileHeader is what a file's header frame says.
type fileHeader struct {
	format int
	key    fileKey // format 2
	gen    uint64
	base   LSN      // a checkpoint's (and a segment's of format 1)
	deps   []uint64 // a checkpoint's
}

// appendHeaderFrame appends the header frame of a file of format 2 to b
// and returns its header checksum, the chain of the frame after it. A
// segment's header names no base: the first frame after it says which
// record it follows.
func appendHeaderFrame(b []byte, magic string, h fileHeader) ([]byte, uint32) {
	b, start := reserveFrame(b)
	b = append(append(b, magic...), 0)
	b = binary.AppendUvarint(b, format)
	b = append(b, h.key[:]...)
	b = binary.AppendUvarint(b, h.gen)
	if magic == checkpointMagic {
		b = binary.AppendUvarint(b, h.base)
		b = binary.AppendUvarint(b, uint64(len(h.deps)))
		for _, d := range h.deps {
			b = binary.AppendUvarint(b, d)
		}
	}
	return b, finishFrame(b[start:], len(b)-start-frameHeaderSize, kindHeader, headerKeySum, 0, 0)
}

// maxSegmentHeaderFrame is the size of the largest header frame of a
// segment: a segment whose header frame is damaged and that holds
// nothing after it but zeros is one whose creation a crash cut short.
const maxSegmentHeaderFrame = frameHeaderSize + len(segmentMagic) + 1 + 1 + keySize + binary.MaxVarintLen64

// readHeader reads the header frame at the start of the file data, of
// format 2, or of format 1 (see format1.go), and returns what it says and
// a frameReader positioned after it. bad says why there is no valid
// header frame; err, why a valid one is not a header of this kind.
func readHeader(data []byte, magic string) (h fileHeader, r frameReader, bad string, err error) {
	r = frameReader{data: data, keySum: headerKeySum}
	kind, p, bad, err := r.next()
	if err != nil {
		bad = err.Error() // not a header frame of format 2
	}
	if bad != "" {
		if kind1, p1, bad1 := frame1At(data, 0); bad1 == "" {
			if kind1 != kindHeader {
				return h, r, "", fmt.Errorf("no %s header", magic)
			}
			h, err = parseHeader1(p1, magic)
			r.off = frame1HeaderSize + len(p1)
			return h, r, "", err
		}
		return h, r, bad, nil
	}
	if kind != kindHeader {
		return h, r, "", fmt.Errorf("no %s header", magic)
	}
	h, err = parseHeader(p, magic)
	if err != nil {
		return h, r, "", err
	}
	r.keySum = h.key.sum()
	return h, r, "", nil
}

// headerParser reads the fields of a header's payload.
type headerParser struct {
	p   []byte
	err error
}

func (hp *headerParser) uvarint() uint64 {
	v, n := binary.Uvarint(hp.p)
	if n <= 0 {
		hp.fail()
		return 0
	}
	hp.p = hp.p[n:]
	return v
}

func (hp *headerParser) fail() {
	if hp.err == nil {
		hp.err = errors.New("bad header")
	}
	hp.p = nil
}

// magicAndFormat reads the magic string and the format number.
func (hp *headerParser) magicAndFormat(magic string) uint64 {
	p := hp.p
	if len(p) <= len(magic) || string(p[:len(magic)]) != magic || p[len(magic)] != 0 {
		hp.err = fmt.Errorf("not an %s file", magic)
		hp.p = nil
		return 0
	}
	hp.p = p[len(magic)+1:]
	return hp.uvarint()
}

// baseAndDeps reads a base LSN and a list of generations.
func (hp *headerParser) baseAndDeps(h *fileHeader) {
	h.base = hp.uvarint()
	n := hp.uvarint()
	if n > uint64(len(hp.p)) {
		hp.fail()
	}
	for i := uint64(0); i < n && hp.err == nil; i++ {
		h.deps = append(h.deps, hp.uvarint())
	}
}

// end checks that nothing follows the fields read.
func (hp *headerParser) end() error {
	if hp.err == nil && len(hp.p) != 0 {
		hp.fail()
	}
	return hp.err
}

// parseHeader reads the payload of a header frame of format 2.
func parseHeader(p []byte, magic string) (fileHeader, error) {
	hp := headerParser{p: p}
	h := fileHeader{format: int(hp.magicAndFormat(magic))}
	if hp.err == nil && h.format != format {
		return fileHeader{}, fmt.Errorf("%s format %d in a frame of format %d", magic, h.format, format)
	}
	if hp.err == nil && len(hp.p) < keySize {
		hp.fail()
	}
	if hp.err == nil {
		copy(h.key[:], hp.p)
		hp.p = hp.p[keySize:]
	}
	h.gen = hp.uvarint()
	if magic == checkpointMagic {
		hp.baseAndDeps(&h)
	}
	if err := hp.end(); err != nil {
		return fileHeader{}, err
	}
	return h, nil
}

func sealPayload(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func parseSeal(p []byte) (uint64, error) {
	v, n := binary.Uvarint(p)
	if n <= 0 || n != len(p) {
		return 0, fmt.Errorf("bad seal")
	}
	return v, nil
}

// forRecords calls fn with each record of a records frame's payload.
func forRecords(p []byte, fn func(rec []byte) error) error {
	for len(p) > 0 {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return fmt.Errorf("a record's length runs past its frame")
		}
		if err := fn(p[k : k+int(n)]); err != nil {
			return err
		}
		p = p[k+int(n):]
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// lastNonZero returns the index after the last byte of b that is not
// zero, or 0.
func lastNonZero(b []byte) int {
	for i := len(b); i > 0; i-- {
		if b[i-1] != 0 {
			return i
		}
	}
	return 0
}
