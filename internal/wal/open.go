package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	iofs "io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/azqlib/azq/internal/vfs"
)

// Replay receives what Open reads.
type Replay struct {
	// Dependency is called with each record of each older checkpoint
	// that the newest depends on (see CreateCheckpoint), oldest first,
	// with its generation, before the newest's records.
	Dependency func(gen uint64, rec []byte) error
	// Checkpoint is called with each record of the newest checkpoint, in
	// order.
	Checkpoint func(rec []byte) error
	// Record is called with each record of the log after the checkpoint,
	// in order, with its LSN.
	Record func(lsn LSN, rec []byte) error
}

// Recovery describes what Open found.
type Recovery struct {
	Checkpoint   string   // the checkpoint loaded; "" if none
	Gen          uint64   // its generation; 0 if none
	Dependencies []string // the older checkpoints it depends on
	Base         LSN      // the last record the checkpoint holds the state of
	Bytes        int64    // bytes of records frames replayed
	Last         LSN      // the last record of the log
	// A torn tail: the file its bytes were moved to, and how many there
	// were; "" and 0 if there was none (or it was only zeros).
	TornFile  string
	TornBytes int64
}

// Open locks the log directory dir (creating it if need be) and reads it:
// the newest checkpoint's records go to r.Checkpoint, then every record
// of the segments after it to r.Record, in order. Damage gives a
// *CorruptError (see the package documentation); a torn tail is moved
// aside. The returned Log appends after the last record.
func Open(dir string, o Options, r Replay) (*Log, Recovery, error) {
	fs := o.FS
	if fs == nil {
		fs = vfs.OS
	}
	o.FS = fs
	dir = filepath.Clean(dir)
	if err := fs.MkdirAll(dir); err != nil {
		return nil, Recovery{}, err
	}
	// The directory's own entry, in case MkdirAll just made it.
	if err := fs.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, Recovery{}, err
	}
	lock, err := fs.Lock(dir)
	if err != nil {
		return nil, Recovery{}, err
	}
	l := &Log{fs: fs, dir: dir, lock: lock, opts: o, onFail: o.OnFailure, allot: o.AllotBytes, due: make(chan struct{}, 1)}
	if l.allot <= 0 {
		l.allot = defaultAllot
	}
	l.cond.L = &l.mu
	rec, err := l.recover(r)
	if err != nil {
		l.closeFilesLocked()
		lock.Close()
		return nil, Recovery{}, err
	}
	return l, rec, nil
}

// scanned is what scanSegment found in a segment.
type scanned struct {
	end       int  // the end of the last valid frame
	activated bool // it starts with its header
	sealed    bool // it ends with its seal
	torn      bool // bytes other than zeros follow end: a torn tail
	bytes     int64
}

func (l *Log) recover(r Replay) (Recovery, error) {
	fs, dir := l.fs, l.dir
	names, err := fs.List(dir)
	if err != nil {
		return Recovery{}, err
	}
	var segs, ckpts []uint64
	for _, n := range names {
		if g, ok := parseGen(n, segmentPrefix); ok {
			segs = append(segs, g)
		} else if g, ok := parseGen(n, checkpointPrefix); ok {
			ckpts = append(ckpts, g)
		} else if strings.HasPrefix(n, "snap-") {
			return Recovery{}, errLegacy(filepath.Join(dir, n))
		} else if isTemporary(n) {
			// A checkpoint whose writing a crash interrupted.
			if err := fs.Remove(filepath.Join(dir, n)); err != nil {
				return Recovery{}, err
			}
		}
	}
	slices.Sort(segs)
	slices.Sort(ckpts)

	var rec Recovery
	var ckptGen uint64
	if len(ckpts) > 0 {
		ckptGen = ckpts[len(ckpts)-1]
	}
	first := ckptGen
	if first == 0 && len(segs) > 0 {
		first = segs[0]
	}
	i, _ := slices.BinarySearch(segs, first)
	replay := segs[i:]
	for j, g := range replay {
		if g != first+uint64(j) {
			return rec, &CorruptError{File: SegmentName(dir, first+uint64(j)), Offset: -1,
				Reason: fmt.Sprintf("missing: the log goes on in %s, so there is a gap", filepath.Base(SegmentName(dir, g)))}
		}
	}
	if ckptGen > 0 && len(replay) == 0 {
		return rec, &CorruptError{File: SegmentName(dir, ckptGen), Offset: -1,
			Reason: fmt.Sprintf("missing: %s holds the state before it, and the log goes on in it", filepath.Base(CheckpointName(dir, ckptGen)))}
	}

	var running LSN
	if ckptGen > 0 {
		name := CheckpointName(dir, ckptGen)
		data, err := fs.ReadFile(name)
		if err != nil {
			return rec, err
		}
		g, _, deps, _, err := checkpointHeader(name, data)
		if err != nil {
			return rec, err
		}
		if g != ckptGen {
			return rec, errGeneration(name, g)
		}
		// The checkpoints it depends on first, oldest first.
		for _, g := range deps {
			depName := CheckpointName(dir, g)
			depData, err := fs.ReadFile(depName)
			if errors.Is(err, iofs.ErrNotExist) {
				return rec, &CorruptError{File: depName, Offset: -1, Reason: fmt.Sprintf("missing: %s depends on it", filepath.Base(name))}
			}
			if err != nil {
				return rec, err
			}
			depGen, _, _, err := ReadCheckpoint(depName, depData, func(p []byte) error {
				if r.Dependency == nil {
					return nil
				}
				return r.Dependency(g, p)
			})
			if err != nil {
				return rec, err
			}
			if depGen != g {
				return rec, errGeneration(depName, depGen)
			}
			rec.Dependencies = append(rec.Dependencies, depName)
		}
		_, base, _, err := ReadCheckpoint(name, data, r.Checkpoint)
		if err != nil {
			return rec, err
		}
		running = base
		rec.Checkpoint, rec.Gen, rec.Base = name, ckptGen, base
		l.keep = deps
	}

	// Replay the segments in order. Every one but the last that holds
	// anything must be sealed; the last may have a torn tail.
	var (
		last     scanned
		lastData []byte
		lastIdx  = -1
	)
	for j, g := range replay {
		name := SegmentName(dir, g)
		data, err := fs.ReadFile(name)
		if err != nil {
			return rec, err
		}
		s, err := scanSegment(name, g, data, &running, j == 0 && ckptGen == 0, r.Record)
		if err != nil {
			return rec, err
		}
		if j == 0 && ckptGen > 0 && !s.activated {
			return rec, &CorruptError{File: name, Offset: 0, Reason: fmt.Sprintf("no header, though %s says the log goes on here", filepath.Base(CheckpointName(dir, ckptGen)))}
		}
		if j == 0 && ckptGen == 0 && g > 1 && !s.activated {
			return rec, &CorruptError{File: CheckpointName(dir, g), Offset: -1, Reason: fmt.Sprintf("missing: the log starts at %s, whose header is unreadable, so the state before it cannot be known", filepath.Base(name))}
		}
		rec.Bytes += s.bytes
		l.segs = append(l.segs, &segment{gen: g, name: name, size: int64(s.end)})
		last, lastData, lastIdx = s, data, j
		if s.sealed {
			continue
		}
		// The end of the log: every later segment must be empty.
		for _, g2 := range replay[j+1:] {
			name2 := SegmentName(dir, g2)
			data2, err := fs.ReadFile(name2)
			if err != nil {
				return rec, err
			}
			if !allZero(data2) {
				reason := "the segment ends without its seal"
				if s.torn {
					_, _, bad := frameAt(data, s.end)
					reason = bad
				}
				return rec, &CorruptError{File: name, Offset: int64(s.end),
					Reason: fmt.Sprintf("%s, but %s after it holds data", reason, filepath.Base(name2))}
			}
		}
		break
	}
	rec.Last = running
	l.appended, l.written, l.synced = running, running, running
	l.ckptGen = ckptGen

	// Where to append: after the last record of an unsealed segment, or
	// in a new segment after a sealed one.
	if lastIdx >= 0 && !last.sealed {
		g := replay[lastIdx]
		name := SegmentName(dir, g)
		if last.torn {
			if err := l.moveAside(name, lastData, last.end, &rec); err != nil {
				return rec, err
			}
		}
		f, err := fs.OpenRW(name)
		if err != nil {
			return rec, err
		}
		seg := l.segs[len(l.segs)-1]
		seg.f, seg.alloc = f, int64(len(lastData))
		l.cur = seg
		if !last.activated {
			l.buf = appendFrame(nil, kindHeader, headerPayload(segmentMagic, g, running))
		}
		// An empty segment after it was prepared ahead: keep it for the
		// next rotation, and remove any beyond it.
		for k, g2 := range replay[lastIdx+1:] {
			name2 := SegmentName(dir, g2)
			if k == 0 {
				f2, err := fs.OpenRW(name2)
				if err != nil {
					return rec, err
				}
				size, err := f2.Size()
				if err != nil {
					f2.Close()
					return rec, err
				}
				l.prepared = &segment{gen: g2, name: name2, f: f2, alloc: size}
				continue
			}
			if err := fs.Remove(name2); err != nil {
				return rec, err
			}
		}
	} else {
		g := uint64(1)
		if lastIdx >= 0 {
			g = replay[lastIdx] + 1
		}
		seg, err := l.createSegment(g)
		if err != nil {
			return rec, err
		}
		l.cur = seg
		l.segs = append(l.segs, seg)
		l.buf = appendFrame(nil, kindHeader, headerPayload(segmentMagic, g, running))
	}
	l.nextGen = l.cur.gen + 1
	if l.prepared != nil {
		l.nextGen = l.prepared.gen + 1
	}
	// What the newest checkpoint replaces, a crash kept.
	if ckptGen > 0 {
		l.removeBefore(ckptGen, l.keep)
	}
	return rec, nil
}

// scanSegment replays the segment data, the contents of the file name of
// generation gen, whose first record follows record *running; it leaves
// *running at its last record. It stops at the first frame that is not
// valid: the end of the segment if only zeros follow; a torn tail if no
// valid frame follows; damage otherwise. noCheckpoint says the segment is
// the log's first and no checkpoint precedes it.
func scanSegment(name string, gen uint64, data []byte, running *LSN, noCheckpoint bool, fn func(LSN, []byte) error) (scanned, error) {
	var s scanned
	off := 0
	corrupt := func(reason string) error { return &CorruptError{File: name, Offset: int64(off), Reason: reason} }
	state := 0 // 0: want the header, 1: records, 2: sealed
	for off < len(data) {
		kind, p, bad := frameAt(data, off)
		if bad != "" {
			break
		}
		switch {
		case state == 0 && kind != kindHeader:
			return s, corrupt("the segment does not start with its header")
		case state == 0:
			g, base, deps, err := parseHeader(p, segmentMagic)
			if err == nil && len(deps) > 0 {
				err = errors.New("a segment's header names checkpoints")
			}
			if err != nil {
				return s, corrupt(err.Error())
			}
			if g != gen {
				return s, errGeneration(name, g)
			}
			if base != *running {
				if noCheckpoint {
					dir := filepath.Dir(name)
					return s, &CorruptError{File: CheckpointName(dir, gen), Offset: -1,
						Reason: fmt.Sprintf("missing: %s starts after record %d, so the checkpoint that holds the state before it is needed", filepath.Base(name), base)}
				}
				return s, corrupt(fmt.Sprintf("the segment starts after record %d, but the log before it ends at record %d", base, *running))
			}
			state = 1
		case state == 2:
			return s, corrupt("a frame after the seal")
		case kind == kindRecords:
			err := forRecords(p, func(rec []byte) error {
				*running++
				return fn(*running, rec)
			})
			if err != nil {
				return s, corrupt(err.Error())
			}
			s.bytes += int64(len(p))
		case kind == kindSeal:
			v, err := parseSeal(p)
			if err != nil {
				return s, corrupt(err.Error())
			}
			if v != *running {
				return s, corrupt(fmt.Sprintf("the seal names record %d as the last, the segment ends at record %d", v, *running))
			}
			state = 2
		default:
			return s, corrupt(fmt.Sprintf("a frame of kind %d out of place", kind))
		}
		off += frameHeaderSize + len(p)
	}
	s.end, s.activated, s.sealed = off, state >= 1, state == 2
	if off == len(data) || allZero(data[off:]) {
		return s, nil
	}
	if off == 0 && isLegacyFrame(data) {
		return s, errLegacy(name)
	}
	_, _, bad := frameAt(data, off)
	if v := validFrameFrom(data, off+frameHeaderSize); v >= 0 {
		return s, corrupt(fmt.Sprintf("%s, and a valid frame follows at offset %d", bad, v))
	}
	if state == 2 {
		return s, corrupt("bytes after the seal")
	}
	s.torn = true
	return s, nil
}

// moveAside copies the torn tail of the segment name, data[end:] up to its
// last byte that is not zero, to name.torn-END, syncs that, and only then
// zeroes the tail in place, so that the log can append after end and no
// byte is lost to a mistaken diagnosis.
func (l *Log) moveAside(name string, data []byte, end int, rec *Recovery) error {
	stop := lastNonZero(data)
	tail := data[end:stop]
	aside := fmt.Sprintf("%s.torn-%d", name, end)
	f, err := l.fs.Create(aside)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(tail, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.fs.SyncDir(l.dir)
	}
	if err != nil {
		return err
	}
	f, err = l.fs.OpenRW(name)
	if err != nil {
		return err
	}
	err = writeZeros(f, int64(end), int64(stop))
	if err == nil {
		err = f.Datasync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	rec.TornFile, rec.TornBytes = aside, int64(len(tail))
	return nil
}

// errLegacy reports a file of the format azq wrote before this package's
// first: records framed one by one, and snapshots named snap-N.
func errLegacy(name string) error {
	return &CorruptError{File: name, Offset: 0, Reason: "written by an earlier version of azq, whose format this one does not read"}
}

// isLegacyFrame reports whether data starts with a frame of that format:
// a payload length below 16 MiB and a CRC-32C of the length and the
// payload, with no frame kind.
func isLegacyFrame(data []byte) bool {
	if len(data) < frameHeaderSize {
		return false
	}
	n := int(binary.LittleEndian.Uint32(data))
	if n == 0 || n > MaxPayload || frameHeaderSize+n > len(data) {
		return false
	}
	return frameCRC(data, n) == binary.LittleEndian.Uint32(data[4:])
}
