package envelope_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/azqlib/azq/envelope"
)

// maxText is the largest message text the queue service takes: 64 KiB.
const maxText = 64 << 10

// The bound on what Decode allocates, as the package documentation states
// it: at most allocRatio bytes a byte of the text, plus allocConst; at
// most allocRatioNoMetadata a byte for a text without metadata. The
// metadata map is the most of it: a pair takes 8 bytes of text ("ab":"",)
// and a 32-byte slot of a map whose tables are a power of two in size and
// split, at random, when they pass 7/8 full.
const (
	allocRatio           = 18
	allocRatioNoMetadata = 2
	allocConst           = 1 << 10
)

// allocBound is the most that decoding text may allocate.
func allocBound(text string, metadata bool) uint64 {
	if !metadata {
		return allocRatioNoMetadata*uint64(len(text)) + allocConst
	}
	return allocRatio*uint64(len(text)) + allocConst
}

// decodeAllocation returns the bytes that Decode(text) allocates. A count
// over bound is taken again, up to three times, since other goroutines
// (the test framework's, the fuzzing engine's) may allocate while Decode
// runs; an excess of Decode's own shows every time.
func decodeAllocation(text string, bound uint64) uint64 {
	var n uint64
	for range 4 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		envelope.Decode(text)
		runtime.ReadMemStats(&after)
		if n = after.TotalAlloc - before.TotalAlloc; n <= bound {
			break
		}
	}
	return n
}

// hostile is a text of a given size shaped to make a decoder work: a
// prefix, as many units as fit, and a suffix.
type hostile struct {
	name   string
	prefix string
	unit   func(i int) string
	sep    string // between units
	suffix string
	ok     bool // whether the text is a valid envelope
}

// text builds h's text, of at most size bytes.
func (h hostile) text(size int) string {
	var b strings.Builder
	b.WriteString(h.prefix)
	for i := 0; ; i++ {
		u := h.unit(i)
		if i > 0 {
			u = h.sep + u
		}
		if b.Len()+len(u)+len(h.suffix) > size {
			break
		}
		b.WriteString(u)
	}
	b.WriteString(h.suffix)
	return b.String()
}

func repeat(s string) func(int) string { return func(int) string { return s } }

// shortKey is the i-th of the shortest distinct metadata names that need
// no escape: one printable ASCII character, then two, and so on.
func shortKey(i int) string {
	const alphabet = " !#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~"
	n := len(alphabet)
	width, count := 1, n
	for i >= count {
		i -= count
		width++
		count *= n
	}
	k := make([]byte, width)
	for j := width - 1; j >= 0; j-- {
		k[j] = alphabet[i%n]
		i /= n
	}
	return string(k)
}

// hostileTexts are the shapes that cost a decoder most per byte: short
// escaped strings (each of which once allocated the rest of the text),
// escaped member names, many tiny metadata pairs, long runs of \u escapes,
// deep nesting, repeated unknown members, and a malformed end after all
// of them, so that everything is decoded before the error.
var hostileTexts = []hostile{
	{name: "skipped array of short escaped strings", sep: ",", prefix: `{"azqenvelope":1,"x":[`, unit: repeat(`"\n"`), suffix: `]}`, ok: true},
	{name: "short escaped strings, malformed end", sep: ",", prefix: `{"azqenvelope":1,"x":[`, unit: repeat(`"\n"`), suffix: `]`},
	{name: "escaped member names", sep: ",", prefix: `{"azqenvelope":1,`, unit: repeat(`"\u0078":0`), suffix: `}`, ok: true},
	{name: "metadata of escaped values", sep: ",", prefix: `{"azqenvelope":1,"metadata":{`,
		unit: func(i int) string { return fmt.Sprintf(`%q:"\n"`, shortKey(i)) }, suffix: `}}`, ok: true},
	{name: "metadata of escaped names", sep: ",", prefix: `{"azqenvelope":1,"metadata":{`,
		unit: func(i int) string { return fmt.Sprintf(`"\u%04x":""`, 0x100+i) }, suffix: `}}`, ok: true},
	{name: "many tiny metadata pairs", sep: ",", prefix: `{"azqenvelope":1,"metadata":{`,
		unit: func(i int) string { return fmt.Sprintf(`%q:""`, shortKey(i)) }, suffix: `}}`, ok: true},
	{name: "many tiny metadata pairs, malformed end", sep: ",", prefix: `{"azqenvelope":1,"metadata":{`,
		unit: func(i int) string { return fmt.Sprintf(`%q:""`, shortKey(i)) }, suffix: `}`},
	{name: "body of short escapes", prefix: `{"azqenvelope":1,"body":"`, unit: repeat(`\n`), suffix: `"}`, ok: true},
	{name: "body of \\u escapes", prefix: `{"azqenvelope":1,"body":"`, unit: repeat(`\u00e9`), suffix: `"}`, ok: true},
	{name: "body of surrogate pairs", prefix: `{"azqenvelope":1,"body":"`, unit: repeat(`\ud83d\ude00`), suffix: `"}`, ok: true},
	{name: "body of lone surrogates", prefix: `{"azqenvelope":1,"body":"`, unit: repeat(`\ud800`), suffix: `"}`, ok: true},
	{name: "ID of \\u escapes", prefix: `{"azqenvelope":1,"id":"`, unit: repeat(`\u00e9`), suffix: `"}`, ok: true},
	{name: "plain body", prefix: `{"azqenvelope":1,"body":"`, unit: repeat(`x`), suffix: `"}`, ok: true},
	{name: "base64 body", prefix: `{"azqenvelope":1,"body64":"`, unit: repeat(`vbJ4`), suffix: `"}`, ok: true},
	{name: "deep nesting, repeated", sep: ",", prefix: `{"azqenvelope":1,"x":[`,
		unit: repeat(strings.Repeat("[", 64) + strings.Repeat("]", 64)), suffix: `]}`, ok: true},
	{name: "repeated unknown members", sep: ",", prefix: `{"azqenvelope":1,`, unit: repeat(`"x":0`), suffix: `}`, ok: true},
}

// hasMetadata reports whether h's text has a metadata member.
func (h hostile) hasMetadata() bool { return strings.Contains(h.prefix, `"metadata"`) }

// TestDecodeHostileTextsCostLinearly holds Decode to its allocation bound
// on every hostile shape at the largest size a message may have. Each
// short escaped string once allocated the rest of the text: 7,000 times
// a 64 KiB text's size in all.
func TestDecodeHostileTextsCostLinearly(t *testing.T) {
	for _, h := range hostileTexts {
		t.Run(h.name, func(t *testing.T) {
			text := h.text(maxText)
			if _, err := envelope.Decode(text); (err == nil) != h.ok {
				t.Fatalf("Decode error = %v; want an error: %v", err, !h.ok)
			}
			bound := allocBound(text, h.hasMetadata())
			for range 3 { // a map's tables differ from run to run
				if got := decodeAllocation(text, bound); got > bound {
					t.Fatalf("Decode of %d bytes allocated %d bytes (%.1f a byte); the bound is %d",
						len(text), got, float64(got)/float64(len(text)), bound)
				}
			}
		})
	}
}

// TestDecodeMetadataCostsLinearlyAtEverySize holds Decode to its bound on
// metadata of the shortest pairs, at the sizes where a map's tables are
// least full or split: each power of two of the table size, and the
// multiples of a full table (896 pairs) where a table may split.
func TestDecodeMetadataCostsLinearlyAtEverySize(t *testing.T) {
	for _, n := range []int{1, 8, 9, 15, 57, 113, 225, 449, 895, 896, 897, 1791, 1792, 3583, 3584, 7167, 7168} {
		var b strings.Builder
		b.WriteString(`{"azqenvelope":1,"metadata":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `%q:""`, shortKey(i))
		}
		b.WriteString(`}}`)
		text := b.String()
		if e, err := envelope.Decode(text); err != nil || len(e.Metadata) != n {
			t.Fatalf("%d pairs decoded to %d, %v", n, len(e.Metadata), err)
		}
		bound := allocBound(text, true)
		for range 10 { // a map's tables differ from run to run
			if got := decodeAllocation(text, bound); got > bound {
				t.Fatalf("Decode of %d pairs, %d bytes, allocated %d bytes (%.1f a byte); the bound is %d",
					n, len(text), got, float64(got)/float64(len(text)), bound)
			}
		}
	}
}

// BenchmarkDecodeHostile decodes each hostile text at 16 and 64 KiB. Its
// figures to read: alloc-ratio, the bytes allocated a byte of text, and
// MB/s, which stays the same from one size to the other when decoding is
// linear.
func BenchmarkDecodeHostile(b *testing.B) {
	for _, h := range hostileTexts {
		for _, size := range []int{16 << 10, maxText} {
			text := h.text(size)
			b.Run(fmt.Sprintf("%s/%dKiB", strings.ReplaceAll(h.name, " ", "_"), size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				cpu0 := startCPU(b)
				for range b.N {
					envelope.Decode(text)
				}
				reportCPU(b, cpu0)
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(len(text)), "alloc-ratio")
			})
		}
	}
}
