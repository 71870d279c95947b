package wal

import (
	"encoding/binary"
	"fmt"
)

// Format 1 is the format azq wrote before this one, during its
// development, before v0.1.0: frames with an 8-byte header (the length
// and kind, then a CRC-32C of those 4 bytes and the payload), no key, no
// chain, no sequence, and segments whose header frame, naming the
// segment's base, was written with its first records. Whether a valid
// frame followed a damaged one was decided by any bytes that passed for a
// frame, so that a message's content could make a torn tail look like
// damage; format 2 was made to end that.
//
// This version reads of format 1 what carries no such risk: checkpoints,
// and backups, which have no torn tail (any damage in them is an error),
// and segments that hold no records, which is how Close leaves a log. So
// a directory that an earlier version closed, and a backup it wrote, open
// and restore; the log goes on in a new segment of format 2, and the next
// checkpoint, written in format 2, replaces the files of format 1. A
// segment of format 1 that holds records is refused (errFormat1), saying
// how to carry it over. The tests write files of format 1 with an encoder
// of their own.
const frame1HeaderSize = 8

// frame1At parses the frame of format 1 at data[off:]: its kind and
// payload, or why it is not a valid frame.
func frame1At(data []byte, off int) (kind byte, payload []byte, bad string) {
	rest := data[off:]
	if len(rest) < frame1HeaderSize {
		return 0, nil, "a frame header cut short"
	}
	w := binary.LittleEndian.Uint32(rest)
	kind, n := byte(w>>24), int(w&MaxPayload)
	if kind < kindRecords || kind > kindSeal {
		return 0, nil, fmt.Sprintf("no frame (kind %d)", kind)
	}
	if frame1HeaderSize+n > len(rest) {
		return 0, nil, fmt.Sprintf("a frame of %d bytes runs past the end of the file", n)
	}
	if frame1CRC(rest, n) != binary.LittleEndian.Uint32(rest[4:]) {
		return 0, nil, "checksum mismatch"
	}
	return kind, rest[frame1HeaderSize : frame1HeaderSize+n], ""
}

// frame1CRC is the checksum of the frame of format 1 at b whose payload
// is the n bytes after its header: a CRC-32C of its first word and the
// payload.
func frame1CRC(b []byte, n int) uint32 {
	return checksum(checksum(0, b[:4]), b[frame1HeaderSize:frame1HeaderSize+n])
}

// parseHeader1 reads the payload of a header frame of format 1: magic,
// format, generation, base LSN, and the generations of the checkpoints it
// depends on.
func parseHeader1(p []byte, magic string) (fileHeader, error) {
	hp := headerParser{p: p}
	h := fileHeader{format: int(hp.magicAndFormat(magic))}
	if hp.err == nil && h.format != 1 {
		return fileHeader{}, fmt.Errorf("%s format %d, which this version cannot read", magic, h.format)
	}
	h.gen = hp.uvarint()
	hp.baseAndDeps(&h)
	if err := hp.end(); err != nil {
		return fileHeader{}, err
	}
	return h, nil
}

// scanSegment1 reads the rest of a segment of format 1, data, after its
// header h, which ends at off: it may hold a seal naming its base, and
// zeros; any record makes it errFormat1.
func scanSegment1(name string, data []byte, off int, h fileHeader) (scanned, error) {
	s := scanned{end: off, created: true, sealed: true}
	if kind, p, bad := frame1At(data, off); bad == "" && kind == kindSeal {
		if v, err := parseSeal(p); err == nil && v == h.base {
			s.end = off + frame1HeaderSize + len(p)
		}
	}
	if !allZero(data[s.end:]) {
		return s, errFormat1(name)
	}
	return s, nil
}

// errFormat1 reports a segment of format 1 that holds records.
func errFormat1(name string) error {
	return &CorruptError{File: name, Offset: 0, Reason: "written in format 1 of the log, by a version of azq from before v0.1.0, " +
		"and it holds records that this version does not replay: open the directory with that version and Close it " +
		"(a clean Close leaves every record in a checkpoint, which this version reads), then open it with this one; " +
		"or restore a Backup made with that version (RestoreDir)"}
}

// errLegacy reports a file of the format azq wrote before format 1:
// records framed one by one, and snapshots named snap-N.
func errLegacy(name string) error {
	return &CorruptError{File: name, Offset: 0, Reason: "written by an earlier version of azq, whose format this one does not read"}
}

// isLegacyFrame reports whether data starts with a frame of that format:
// a payload length below 16 MiB and a CRC-32C of the length and the
// payload, with no frame kind.
func isLegacyFrame(data []byte) bool {
	if len(data) < frame1HeaderSize {
		return false
	}
	n := int(binary.LittleEndian.Uint32(data))
	if n == 0 || n > MaxPayload || frame1HeaderSize+n > len(data) {
		return false
	}
	return frame1CRC(data, n) == binary.LittleEndian.Uint32(data[4:])
}
