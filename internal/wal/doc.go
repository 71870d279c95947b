// Package wal is the write-ahead log under azq's durable mode: segment
// files of checksummed frames, group commit, rotation to a segment
// prepared ahead, checkpoint files written beside the log, and recovery
// with strict rules for damage. It speaks bytes and log positions (LSNs)
// and reports its own errors; what the records mean is the caller's.
//
// # Files
//
// A log directory holds segments wal-G and checkpoints ckpt-G (G a
// 16-digit hex generation). Each file is a sequence of frames:
//
//	bytes 0-3   payload length (low 24 bits) and frame kind (high 8 bits),
//	            little endian
//	bytes 4-7   CRC-32C (Castagnoli) of bytes 0-3 and the payload
//	bytes 8-    the payload
//
// A segment starts with a header frame (magic, format, generation, and
// the LSN of the last record before it), holds records frames (each a
// batch of records, every one a uvarint length and its bytes, numbered
// one after another), and, once the log has moved on to the next segment,
// ends with a seal frame naming its last LSN. Space after the frames is
// zeros: segments are allotted ahead, zeros written and synced, so that
// appending rarely changes a file's size and fdatasync has no metadata to
// commit. A checkpoint file is a header, records frames and a seal that
// counts its records; ckpt-G holds the state made by every record before
// wal-G, and possibly some after (see the caller's replay rules), so
// recovery loads the newest checkpoint and replays wal-G, wal-G+1, ... in
// order.
//
// # Damage
//
// A frame that fails its checksum, or runs past the end of its file, or
// is not a frame at all, is a torn tail, cut short by a crash before it
// was synced and so never acknowledged, only when it is in the last
// segment that holds records, that segment is not sealed, and no valid
// frame follows it anywhere after its header, the extent its length
// claims included. Anything else is damage: Open fails with a
// *CorruptError naming the file and offset, rather than recover part of
// the log. A torn tail is not cut in place: its bytes are first copied to
// wal-G.torn-OFFSET beside the segment, synced, and only then zeroed.
// Since a group commit writes its batch as one frame and syncs it before
// the next batch is written, the bytes that a power cut can leave half
// written are all in the last frame.
package wal
