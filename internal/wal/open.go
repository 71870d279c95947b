package wal

import (
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
	end     int    // the end of the last valid frame
	created bool   // it has a valid header (one whose creation a crash cut short has none)
	sealed  bool   // it ends with its seal, or is of format 1 (nothing is appended to it)
	torn    bool   // bytes other than zeros follow end: a torn tail
	tornWhy string // why the frame at end is not valid, if torn
	bytes   int64
	// For appending after end: the key's sum and the chain.
	keySum, chain uint32
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
		// A log starts at wal-1, and the segments before a checkpoint's
		// are removed only once it is durable: a log that starts later
		// has lost the checkpoint that holds the state before it.
		if segs[0] != 1 {
			return rec, &CorruptError{File: CheckpointName(dir, segs[0]), Offset: -1,
				Reason: fmt.Sprintf("missing: the log starts at %s, so the checkpoint that holds the state before it is needed", filepath.Base(SegmentName(dir, segs[0])))}
		}
		first = 1
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
		h, _, err := checkpointHeader(name, data)
		if err != nil {
			return rec, err
		}
		if h.gen != ckptGen {
			return rec, errGeneration(name, h.gen)
		}
		// The checkpoints it depends on first, oldest first.
		for _, g := range h.deps {
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
		l.keep = h.deps
	}

	// Replay the segments in order, up to the first that is not sealed:
	// the log ends in it (at endIdx; len(replay) if every one is sealed).
	endIdx := len(replay)
	var (
		end     scanned
		endData []byte
	)
	for j, g := range replay {
		name := SegmentName(dir, g)
		data, err := fs.ReadFile(name)
		if err != nil {
			return rec, err
		}
		s, err := scanSegment(name, g, data, &running, r.Record)
		if err != nil {
			return rec, err
		}
		if j == 0 && ckptGen > 0 && !s.created {
			// It was created, header and all, and synced, before the
			// log switched to it, and the checkpoint was committed after.
			return rec, &CorruptError{File: name, Offset: 0, Reason: fmt.Sprintf("no valid header, though %s says the log goes on here", filepath.Base(CheckpointName(dir, ckptGen)))}
		}
		rec.Bytes += s.bytes
		if s.created {
			l.segs = append(l.segs, &segment{gen: g, name: name, size: int64(s.end), keySum: s.keySum, chain: s.chain})
		}
		if !s.sealed {
			endIdx, end, endData = j, s, data
			break
		}
	}
	// Every segment after the end must hold nothing after its header.
	var after []uint64
	if endIdx < len(replay) {
		after = replay[endIdx+1:]
	}
	for _, g2 := range after {
		name2 := SegmentName(dir, g2)
		data2, err := fs.ReadFile(name2)
		if err != nil {
			return rec, err
		}
		if empty, _ := emptySegment(data2, g2); !empty {
			name := SegmentName(dir, replay[endIdx])
			reason := "the segment ends without its seal"
			switch {
			case !end.created:
				reason = "the segment has no valid header"
			case end.torn:
				reason = end.tornWhy
			}
			return rec, &CorruptError{File: name, Offset: int64(end.end),
				Reason: fmt.Sprintf("%s, but %s after it holds data", reason, filepath.Base(name2))}
		}
	}
	rec.Last = running
	l.appended, l.written, l.synced = running, running, running
	l.ckptGen = ckptGen

	// Where to append: after the last record of the segment the log ends
	// in; or in a new segment, after the last, sealed, one, or in place
	// of the one the log ends in if a crash cut its creation short.
	if endIdx < len(replay) && end.created {
		name := SegmentName(dir, replay[endIdx])
		if end.torn {
			if err := l.moveAside(name, endData, end.end, &rec); err != nil {
				return rec, err
			}
		}
		f, err := fs.OpenRW(name)
		if err != nil {
			return rec, err
		}
		seg := l.segs[len(l.segs)-1]
		seg.f, seg.alloc = f, int64(len(endData))
		l.cur = seg
	} else {
		g := uint64(1)
		switch {
		case endIdx < len(replay):
			g = replay[endIdx]
		case len(replay) > 0:
			g = replay[len(replay)-1] + 1
		}
		seg, err := l.createSegment(g)
		if err != nil {
			return rec, err
		}
		l.cur = seg
		l.segs = append(l.segs, seg)
	}
	// Of the segments after it, which hold nothing: the first, if its
	// header is valid, is the one prepared for the next rotation; the
	// others go.
	for k, g2 := range after {
		name2 := SegmentName(dir, g2)
		if k == 0 {
			data2, err := fs.ReadFile(name2)
			if err != nil {
				return rec, err
			}
			if _, hr := emptySegment(data2, g2); hr != nil {
				f2, err := fs.OpenRW(name2)
				if err != nil {
					return rec, err
				}
				l.prepared = &segment{gen: g2, name: name2, f: f2, alloc: int64(len(data2)), size: int64(hr.off), keySum: hr.keySum, chain: hr.chain}
				continue
			}
		}
		if err := fs.Remove(name2); err != nil {
			return rec, err
		}
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
// the next valid frame: the end of the segment if only zeros follow; a
// torn tail if no frame of this segment's writer follows; damage
// otherwise. A segment with no valid header is one whose creation a
// crash cut short if nothing but zeros follows where its header would
// end, and damage otherwise.
func scanSegment(name string, gen uint64, data []byte, running *LSN, fn func(LSN, []byte) error) (scanned, error) {
	var s scanned
	corrupt := func(off int, reason string) error {
		return &CorruptError{File: name, Offset: int64(off), Reason: reason}
	}
	if allZero(data) {
		return s, nil // created, and the crash came before its header was written
	}
	h, r, bad, err := readHeader(data, segmentMagic)
	switch {
	case err != nil:
		return s, corrupt(0, err.Error())
	case bad != "" && isLegacyFrame(data):
		return s, errLegacy(name)
	case bad != "" && lastNonZero(data) <= maxSegmentHeaderFrame:
		return s, nil // its creation cut short
	case bad != "":
		return s, corrupt(0, fmt.Sprintf("%s in the header, and data follows it", bad))
	case h.gen != gen:
		return s, errGeneration(name, h.gen)
	case h.format == 1:
		if len(h.deps) > 0 {
			return s, corrupt(0, "a segment's header names checkpoints")
		}
		if h.base != *running {
			return s, corrupt(0, fmt.Sprintf("the segment starts after record %d, but the log before it ends at record %d", h.base, *running))
		}
		return scanSegment1(name, data, r.off, h)
	}
	s.created = true
	r.seq = *running
	first, sealed := r.off, false
	for r.off < len(data) {
		off := r.off
		var (
			kind byte
			p    []byte
		)
		kind, p, bad, err = r.next()
		if err != nil {
			if off == first {
				err = fmt.Errorf("the segment starts after record %d, but the log before it ends at record %d", r.h.seq, *running)
			}
			return s, corrupt(off, err.Error())
		}
		if bad != "" {
			break
		}
		switch {
		case sealed:
			return s, corrupt(off, "a frame after the seal")
		case kind == kindRecords:
			err := forRecords(p, func(rec []byte) error {
				*running++
				return fn(*running, rec)
			})
			if err != nil {
				return s, corrupt(off, err.Error())
			}
			r.seq = *running
			s.bytes += int64(len(p))
		case kind == kindSeal:
			v, err := parseSeal(p)
			if err != nil {
				return s, corrupt(off, err.Error())
			}
			if v != *running {
				return s, corrupt(off, fmt.Sprintf("the seal names record %d as the last, the segment ends at record %d", v, *running))
			}
			sealed = true
		default:
			return s, corrupt(off, fmt.Sprintf("a frame of kind %d out of place", kind))
		}
	}
	s.end, s.sealed, s.keySum, s.chain = r.off, sealed, r.keySum, r.chain
	if r.off == len(data) || allZero(data[r.off:]) {
		return s, nil
	}
	if v := r.followerFrom(r.followerSearchStart()); v >= 0 {
		return s, corrupt(r.off, fmt.Sprintf("%s, and a frame of this segment follows at offset %d", bad, v))
	}
	if sealed {
		return s, corrupt(r.off, "bytes after the seal")
	}
	s.torn, s.tornWhy = true, bad
	return s, nil
}

// emptySegment reports whether the segment data, of generation gen, which
// comes after the end of the log, holds nothing: no frame after its
// header, or, with no valid header, nothing but zeros after where one
// would end. If it has a valid header of this format, it returns a reader
// after it, for appending.
func emptySegment(data []byte, gen uint64) (bool, *frameReader) {
	if allZero(data) {
		return true, nil
	}
	h, r, bad, err := readHeader(data, segmentMagic)
	switch {
	case err != nil:
		return false, nil
	case bad != "":
		return lastNonZero(data) <= maxSegmentHeaderFrame, nil
	case !allZero(data[r.off:]):
		return false, nil
	case h.format != format || h.gen != gen:
		return true, nil
	}
	return true, &r
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
