package wal

import (
	"fmt"
	"testing"
)

// BenchmarkFrame is the writer's cost of framing one records frame, in
// format 2 (finishFrame: the payload checksum, chained, and the header
// checksum under the key) beside format 1 (one CRC-32C of the length and
// the payload), for a lone Put (a 76-byte record, as one caller's group
// commit writes it) and a batch of eight; and the reader's, the checks
// of frameReader.next. The durable benchmarks of the root measure the
// whole path; this isolates what the format changed.
func BenchmarkFrame(b *testing.B) {
	key := newKey().sum()
	for _, n := range []int{77, 8 * 77} {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(i)
		}
		b.Run(fmt.Sprintf("write/format=1/payload=%d", n), func(b *testing.B) {
			buf := appendFrame1(nil, kindRecords, payload)
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				buf = appendFrame1(buf[:0], kindRecords, payload)
			}
		})
		b.Run(fmt.Sprintf("write/format=2/payload=%d", n), func(b *testing.B) {
			buf, chain := appendFrame(nil, kindRecords, payload, key, 0, 0)
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				buf = append(buf[:0], make([]byte, frameHeaderSize)...)
				buf = append(buf, payload...)
				chain = finishFrame(buf, n, kindRecords, key, chain, 7)
			}
		})
		b.Run(fmt.Sprintf("read/format=1/payload=%d", n), func(b *testing.B) {
			buf := appendFrame1(nil, kindRecords, payload)
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				if _, _, bad := frame1At(buf, 0); bad != "" {
					b.Fatal(bad)
				}
			}
		})
		b.Run(fmt.Sprintf("read/format=2/payload=%d", n), func(b *testing.B) {
			buf, _ := appendFrame(nil, kindRecords, payload, key, 5, 7)
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				r := frameReader{data: buf, keySum: key, chain: 5, seq: 7}
				if _, _, bad, err := r.next(); bad != "" || err != nil {
					b.Fatal(bad, err)
				}
			}
		})
	}
}
