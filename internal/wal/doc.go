// Package wal is the write-ahead log under azq's durable mode: segment
// files of checksummed frames, group commit, rotation to a segment
// prepared ahead, checkpoint files written beside the log, and recovery
// with strict rules for damage. It speaks bytes and log positions (LSNs)
// and reports its own errors; what the records mean is the caller's.
//
// # Files
//
// A log directory holds segments wal-G and checkpoints ckpt-G (G a
// 16-digit hex generation). Each file is a sequence of frames, in format
// 2:
//
//	bytes 0-3    header checksum: CRC-32C of the file's key and bytes 4-19
//	bytes 4-7    payload length (low 24 bits) and frame kind (high 8 bits)
//	bytes 8-11   payload checksum: CRC-32C of the payload, starting from
//	             the header checksum of the frame before (0 for the first)
//	bytes 12-19  sequence: how many records come before the frame, in the
//	             log (a segment's) or in the file (a checkpoint's)
//	bytes 20-    the payload
//
// all little endian. Every file starts with a header frame, whose payload
// is the magic string ("azq-log" or "azq-checkpoint") and a zero byte,
// the format (a uvarint, 2), the file's key (8 random bytes, chosen when
// the file is created), its generation (a uvarint) and, in a checkpoint,
// the LSN of the last record whose state it holds and the generations of
// the older checkpoints it depends on (uvarints, a count first). The
// header frame's own header checksum is taken with a key of eight zero
// bytes, since the key is read from it.
//
// So each frame identifies itself: the key says which file it belongs to
// (a file of another directory, or an older file of the same name, has
// another), the sequence where in the log it belongs, and the checksum
// chain that it follows the frame before it, which the header checksum
// covers; and the key, which nothing outside the file ever shows, makes a
// frame impossible to forge for anyone who can only put records in it,
// such as the content of a message. The header checksum can be checked
// alone, at the cost of 24 bytes, which is what lets recovery look for
// the frames of a file anywhere in it in time linear in its size.
//
// A segment is created with its header, allotted zeros after it, and
// synced, before the log switches to it; then it holds records frames
// (each a batch of records, every one a uvarint length and its bytes,
// numbered one after another) and, once the log has moved on to the next
// segment, a seal frame naming its last LSN. Space after the frames is
// zeros: segments are allotted ahead, so that appending rarely changes a
// file's size and fdatasync has no metadata to commit. A checkpoint file
// is a header, records frames and a seal that counts its records; ckpt-G
// holds the state made by every record before wal-G, and possibly some
// after (see the caller's replay rules), so recovery loads the newest
// checkpoint and replays wal-G, wal-G+1, ... in order.
//
// Format 1, before v0.1.0, had 8-byte frame headers with no key, chain or
// sequence; this version reads its checkpoints (and backups) and segments
// that hold no records, as Close leaves them, and refuses a segment of
// format 1 that holds records with an error that says how to carry it
// over (see format1.go).
//
// # Damage
//
// A frame that fails a checksum, or runs past the end of its file, or is
// not a frame at all, is a torn tail, cut short by a crash before it was
// synced and so never acknowledged, only when it is in the last segment
// that holds records, that segment is not sealed, and no frame of that
// segment's writer follows it: no header that passes its checksum under
// the segment's key and says it follows at least as many records, after
// the damaged frame's extent if that frame's header is valid (its length
// is then the writer's, and what lies inside is its payload, whatever it
// looks like), or anywhere after its header if not. Anything else is
// damage: Open fails with a *CorruptError naming the file and offset,
// rather than recover part of the log; so does a frame valid in itself
// that is not the next one (its sequence or its place in the chain
// wrong). A segment with no valid header is one whose creation a crash
// cut short if nothing but zeros follows where its header would end, and
// if it comes after the end of the log; otherwise it is damage. A torn
// tail is not cut in place: its bytes are first copied to
// wal-G.torn-OFFSET beside the segment, synced, and only then zeroed.
// Since a group commit writes its batch as one frame and syncs it before
// the next batch is written, the bytes that a power cut can leave half
// written are all in the last frame.
package wal
