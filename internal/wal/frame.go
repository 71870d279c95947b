package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// LSN numbers the records of a log, from 1; 0 is the position before the
// first record.
type LSN = uint64

const (
	frameHeaderSize = 8

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

// The headers' magic strings and the format they introduce.
const (
	segmentMagic    = "azq-log"
	checkpointMagic = "azq-checkpoint"
	format          = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// beginFrame reserves a frame header at the end of b and returns where
// the frame starts; endFrame fills the header once the payload follows.
func beginFrame(b []byte) ([]byte, int) {
	return append(b, 0, 0, 0, 0, 0, 0, 0, 0), len(b)
}

func endFrame(b []byte, start int, kind byte) {
	n := len(b) - start - frameHeaderSize
	endFrameLen(b, start, n, kind)
}

// endFrameLen fills the header of the frame at b[start:] whose payload is
// the n bytes after it.
func endFrameLen(b []byte, start, n int, kind byte) {
	binary.LittleEndian.PutUint32(b[start:], uint32(n)|uint32(kind)<<24)
	binary.LittleEndian.PutUint32(b[start+4:], frameCRC(b[start:], n))
}

// frameCRC is the checksum of the frame at b whose payload is the n bytes
// after its header: a CRC-32C of its first word and the payload.
func frameCRC(b []byte, n int) uint32 {
	crc := crc32.Update(0, castagnoli, b[:4])
	return crc32.Update(crc, castagnoli, b[frameHeaderSize:frameHeaderSize+n])
}

// appendFrame appends a whole frame of kind with payload p.
func appendFrame(b []byte, kind byte, p []byte) []byte {
	b, start := beginFrame(b)
	b = append(b, p...)
	endFrame(b, start, kind)
	return b
}

// headerPayload is a file header: magic, format, generation, the LSN of
// the last record before the file, and (a checkpoint's) the generations of
// the older checkpoints it depends on.
func headerPayload(magic string, gen uint64, base LSN, deps ...uint64) []byte {
	p := append([]byte(magic), 0)
	p = binary.AppendUvarint(p, format)
	p = binary.AppendUvarint(p, gen)
	p = binary.AppendUvarint(p, base)
	p = binary.AppendUvarint(p, uint64(len(deps)))
	for _, d := range deps {
		p = binary.AppendUvarint(p, d)
	}
	return p
}

// parseHeader reads a file header.
func parseHeader(p []byte, magic string) (gen uint64, base LSN, deps []uint64, err error) {
	if len(p) <= len(magic) || string(p[:len(magic)]) != magic || p[len(magic)] != 0 {
		return 0, 0, nil, fmt.Errorf("not an %s file", magic)
	}
	p = p[len(magic)+1:]
	next := func() uint64 {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			err = errors.New("bad header")
			p = nil
			return 0
		}
		p = p[n:]
		return v
	}
	if f := next(); err == nil && f != format {
		return 0, 0, nil, fmt.Errorf("%s format %d, which this version cannot read", magic, f)
	}
	gen, base = next(), next()
	n := next()
	if err == nil && n > uint64(len(p)) {
		err = errors.New("bad header")
	}
	for i := uint64(0); i < n && err == nil; i++ {
		deps = append(deps, next())
	}
	if err == nil && len(p) != 0 {
		err = errors.New("bad header")
	}
	if err != nil {
		return 0, 0, nil, err
	}
	return gen, base, deps, nil
}

func sealPayload(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func parseSeal(p []byte) (uint64, error) {
	v, n := binary.Uvarint(p)
	if n <= 0 || n != len(p) {
		return 0, fmt.Errorf("bad seal")
	}
	return v, nil
}

// frameAt parses the frame at data[off:]: its kind and payload, or why it
// is not a valid frame.
func frameAt(data []byte, off int) (kind byte, payload []byte, bad string) {
	rest := data[off:]
	if len(rest) < frameHeaderSize {
		return 0, nil, "a frame header cut short"
	}
	w := binary.LittleEndian.Uint32(rest)
	kind, n := byte(w>>24), int(w&MaxPayload)
	if kind < kindRecords || kind > kindSeal {
		return 0, nil, fmt.Sprintf("no frame (kind %d)", kind)
	}
	if frameHeaderSize+n > len(rest) {
		return 0, nil, fmt.Sprintf("a frame of %d bytes runs past the end of the file", n)
	}
	if frameCRC(rest, n) != binary.LittleEndian.Uint32(rest[4:]) {
		return 0, nil, "checksum mismatch"
	}
	return kind, rest[frameHeaderSize : frameHeaderSize+n], ""
}

// validFrameFrom returns the offset of the first valid frame that starts
// at or after from, or -1. It looks at every offset, so that it finds a
// frame inside the extent a damaged length claims.
func validFrameFrom(data []byte, from int) int {
	for p := from; p+frameHeaderSize <= len(data); p++ {
		if k := data[p+3]; k < kindRecords || k > kindSeal {
			continue // the common case, zeros among them: no CRC to compute
		}
		if _, _, bad := frameAt(data, p); bad == "" {
			return p
		}
	}
	return -1
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
