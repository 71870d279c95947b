package wal

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// The names of a log directory's files.
const (
	segmentPrefix    = "wal-"
	checkpointPrefix = "ckpt-"
	tmpSuffix        = ".tmp"
)

// SegmentName is the path of segment gen in dir.
func SegmentName(dir string, gen uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%s%016x", segmentPrefix, gen))
}

// CheckpointName is the path of checkpoint gen in dir.
func CheckpointName(dir string, gen uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%s%016x", checkpointPrefix, gen))
}

// parseGen reads the generation of a file named prefix followed by 16 hex
// digits.
func parseGen(name, prefix string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || len(rest) != 16 {
		return 0, false
	}
	g, err := strconv.ParseUint(rest, 16, 64)
	return g, err == nil
}
