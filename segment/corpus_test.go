package segment

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWriteCorpus regenerates the checked-in seed corpus under testdata/fuzz from real
// encoded objects when STRATA_WRITE_CORPUS=1 (after a format change). It leaves files
// the fuzzer added (failures it found) alone.
func TestWriteCorpus(t *testing.T) {
	if os.Getenv("STRATA_WRITE_CORPUS") != "1" {
		t.Skip("set STRATA_WRITE_CORPUS=1 to regenerate testdata/fuzz")
	}
	write := func(target, name string, args ...any) {
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		for _, a := range args {
			switch v := a.(type) {
			case []byte:
				fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
			case string:
				fmt.Fprintf(&b, "string(%s)\n", strconv.Quote(v))
			case uint16:
				fmt.Fprintf(&b, "uint16(%d)\n", v)
			case int32:
				fmt.Fprintf(&b, "int32(%d)\n", v)
			case int64:
				fmt.Fprintf(&b, "int64(%d)\n", v)
			default:
				t.Fatalf("type %T", a)
			}
		}
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names := []string{"none", "gzip", "snappy", "lz4", "zstd", "compacted"}
	for i, obj := range seedObjects(t) {
		n := names[i]
		write("FuzzReadFooter", n, obj)
		write("FuzzReadFooter", n+"-truncated", obj[:len(obj)-3])
		fb := footerOf(t, obj)
		write("FuzzDecodeFooter", n, fb)
		write("FuzzDecodeFooterBody", n, fb[:len(fb)-4])
		write("FuzzParseTrailer", n, obj[len(obj)-TrailerSize:])
		raws := batchesOf(t, obj)
		write("FuzzSplitBatches", n, raws[0])
		write("FuzzSplitBatches", n+"-truncated", raws[0][:len(raws[0])-1])
		write("FuzzDecodeBatch", n, raws[0])
		h, _ := ParseBatchHeader(raws[0])
		write("FuzzDecodeRecords", n, binary.BigEndian.Uint16(raws[0][offAttributes:]), h.NumRecords, h.LastOffsetDelta, h.FirstTimestamp, raws[0][batchHeaderSize:])
	}
	write("FuzzKeyTime", "valid", NewKey(time.Date(2026, 12, 2, 11, 5, 33, 123e6, time.UTC)))
	write("FuzzKeyTime", "month13", "segments/20261302T110533.123Z-0123456789abcdef")
	write("FuzzEncode", "mixed", []byte("\x05\x03\x11\x07a\x01b\x02c\x00\xff\xfe\x35\x00\x02\x03\x04"), int64(50))
}
