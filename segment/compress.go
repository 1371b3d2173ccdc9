package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// MaxBatchBytes bounds a batch's records section before compression. Encode refuses
// larger batches and the decoders refuse to inflate past it, so a small hostile batch
// (a decompression bomb) cannot make a reader allocate without limit.
const MaxBatchBytes = 64 << 20

// decompressLimit is MaxBatchBytes; tests lower it to exercise the limit cheaply.
var decompressLimit = MaxBatchBytes

// appendWriter is an io.Writer appending to a slice, so the streaming compressors write
// straight into the object buffer.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// Compressors and decompressors are costly to set up (their window buffers are large),
// so they are pooled; zstd's Encoder and Decoder are safe for concurrent EncodeAll and
// DecodeAll and are shared.

type gzipEnc struct {
	w  *gzip.Writer
	aw appendWriter
}

type lz4Enc struct {
	w  *lz4.Writer
	aw appendWriter
}

var (
	gzipEncs = sync.Pool{New: func() any {
		// Kafka's Java producer also uses the default deflate level.
		w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression)
		return &gzipEnc{w: w}
	}}
	lz4Encs = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		// 64 KiB blocks, as Kafka's Java producer writes: small per-writer buffers and
		// readable by every client's LZ4 frame reader.
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb))
		return &lz4Enc{w: w}
	}}
	zstdEnc = sync.OnceValue(func() *zstd.Encoder {
		// A 1 MiB window: batches are rarely larger, and each of the encoder's
		// GOMAXPROCS states keeps about twice its window in memory.
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithWindowSize(1<<20))
		if err != nil {
			panic(fmt.Sprintf("segment: zstd encoder: %v", err)) // only bad options fail
		}
		return e
	})
)

// compress appends the compressed form of src to dst.
func compress(dst, src []byte, c Compression) ([]byte, error) {
	switch c {
	case CompressionGzip:
		e := gzipEncs.Get().(*gzipEnc)
		defer gzipEncs.Put(e)
		e.aw.b = dst
		e.w.Reset(&e.aw)
		if _, err := e.w.Write(src); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if err := e.w.Close(); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		dst, e.aw.b = e.aw.b, nil
		return dst, nil
	case CompressionSnappy:
		// A plain snappy block, as franz-go and librdkafka write; the Java client reads
		// it too (its xerial stream falls back to a raw block without the header).
		n := s2.MaxEncodedLen(len(src))
		if n < 0 {
			return nil, fmt.Errorf("snappy: %d bytes too large", len(src))
		}
		start := len(dst)
		dst = grow(dst, n)
		enc := s2.EncodeSnappy(dst[start:start+n], src)
		return dst[:start+len(enc)], nil
	case CompressionLZ4:
		e := lz4Encs.Get().(*lz4Enc)
		defer lz4Encs.Put(e)
		e.aw.b = dst
		e.w.Reset(&e.aw)
		if _, err := e.w.Write(src); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		if err := e.w.Close(); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		dst, e.aw.b = e.aw.b, nil
		return dst, nil
	case CompressionZstd:
		return zstdEnc().EncodeAll(src, dst), nil
	}
	return nil, fmt.Errorf("compression %d: %w", c, ErrInvalid)
}

// grow makes room for n more bytes after len(b).
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+max(n, len(b)/2))
		copy(nb, b)
		return nb
	}
	return b
}

type gzipDec struct {
	r   gzip.Reader
	src bytes.Reader
}

type lz4Dec struct {
	r   *lz4.Reader
	src bytes.Reader
}

var (
	gzipDecs = sync.Pool{New: func() any { return new(gzipDec) }}
	lz4Decs  = sync.Pool{New: func() any { return &lz4Dec{r: lz4.NewReader(nil)} }}
	zstdDec  = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderMaxMemory(MaxBatchBytes),
			zstd.WithDecoderMaxWindow(MaxBatchBytes),
			zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			panic(fmt.Sprintf("segment: zstd decoder: %v", err)) // only bad options fail
		}
		return d
	})
)

// xerialMagic starts snappy data framed the way Kafka's Java client (xerial
// snappy-java's SnappyOutputStream) writes it.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func errTooLarge() error { return fmt.Errorf("decompressed records exceed %d bytes", decompressLimit) }

// decompress inflates a batch's records section. hint is a guess of the result's size.
// The result never exceeds decompressLimit (MaxBatchBytes).
func decompress(src []byte, c Compression, hint int) (out []byte, err error) {
	// The decoders are third-party code fed hostile bytes: a panic in one must surface
	// as corrupt data, not crash the reader.
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("decompressor panicked: %v", r)
		}
	}()
	switch c {
	case CompressionGzip:
		// Pooled decoders go back only after a clean return: one that panicked is
		// dropped rather than reused.
		d := gzipDecs.Get().(*gzipDec)
		d.src.Reset(src)
		if err := d.r.Reset(&d.src); err != nil {
			gzipDecs.Put(d)
			return nil, fmt.Errorf("gzip: %w", err)
		}
		// A gzip member ends with its inflated size (mod 2^32): a good first guess,
		// and a lie costs only a regrown buffer.
		if len(src) >= 18 {
			if n := int64(binary.LittleEndian.Uint32(src[len(src)-4:])); n < int64(decompressLimit) {
				hint = int(n) + 1 // room to read the end without growing
			}
		}
		out, err := readLimited(&d.r, hint)
		d.src.Reset(nil)
		gzipDecs.Put(d)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return out, nil
	case CompressionSnappy:
		if len(src) >= len(xerialMagic) && bytes.Equal(src[:len(xerialMagic)], xerialMagic) {
			return xerialDecode(src)
		}
		return snappyBlock(nil, src)
	case CompressionLZ4:
		d := lz4Decs.Get().(*lz4Dec)
		d.src.Reset(src)
		d.r.Reset(&d.src)
		out, err := readLimited(d.r, hint)
		d.src.Reset(nil)
		lz4Decs.Put(d)
		if err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		return out, nil
	case CompressionZstd:
		return zstdDecode(src, hint)
	}
	return nil, fmt.Errorf("unknown compression %d", c)
}

// zstdDecode inflates zstd data into a buffer sized from the first frame's declared
// content size (or hint), doubling it while the data does not fit, up to
// decompressLimit. Growing by doubling matters: left to size its own output, DecodeAll
// grows it by exactly each frame's size, which is quadratic for many small frames.
func zstdDecode(src []byte, hint int) ([]byte, error) {
	size := hint
	var h zstd.Header
	if h.Decode(src) == nil && h.HasFCS && h.FrameContentSize <= uint64(decompressLimit) {
		size = int(h.FrameContentSize)
	}
	size = min(max(size, 512), decompressLimit)
	for {
		out, err := zstdDec().DecodeAll(src, make([]byte, 0, size))
		switch {
		case err == nil:
			return out, nil
		case !errors.Is(err, zstd.ErrDecoderSizeExceeded) && !zstdOutOfRoom(err, h.HasFCS):
			return nil, fmt.Errorf("zstd: %w", err)
		case size == decompressLimit:
			return nil, errTooLarge()
		}
		size = min(2*size, decompressLimit)
	}
}

// zstdOutOfRoom reports the other way DecodeAll says the output did not fit: for a
// frame that does not declare its size (librdkafka's streaming compressor writes
// none), running out of the room cap(dst) gives is reported as "output bigger than
// max block size", not ErrDecoderSizeExceeded.
func zstdOutOfRoom(err error, declared bool) bool {
	return !declared && strings.Contains(err.Error(), "output bigger than max block size")
}

// snappyBlock appends the decoded plain snappy block src to dst, refusing to exceed
// MaxBatchBytes in total before allocating.
func snappyBlock(dst, src []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	if n > decompressLimit-len(dst) {
		return nil, errTooLarge()
	}
	start := len(dst)
	dst = grow(dst, n)
	if _, err := s2.Decode(dst[start:start+n], src); err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	return dst[:start+n], nil
}

// xerialDecode decodes xerial framing: the 8-byte magic, two 4-byte versions, then
// chunks of a 4-byte big-endian length and a plain snappy block.
func xerialDecode(src []byte) ([]byte, error) {
	if len(src) < 16 {
		return nil, errors.New("snappy: xerial header truncated")
	}
	src = src[16:]
	var out []byte
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, errors.New("snappy: xerial chunk length truncated")
		}
		n := binary.BigEndian.Uint32(src)
		src = src[4:]
		if uint64(n) > uint64(len(src)) {
			return nil, errors.New("snappy: xerial chunk truncated")
		}
		var err error
		if out, err = snappyBlock(out, src[:n]); err != nil {
			return nil, err
		}
		src = src[n:]
	}
	if out == nil {
		return nil, errors.New("snappy: xerial stream without chunks")
	}
	return out, nil
}

// readLimited reads r to its end, refusing more than MaxBatchBytes.
func readLimited(r io.Reader, hint int) ([]byte, error) {
	buf := make([]byte, 0, min(max(hint, 512), decompressLimit+1))
	for {
		if len(buf) == cap(buf) {
			if len(buf) > decompressLimit {
				return nil, errTooLarge()
			}
			nb := make([]byte, len(buf), min(2*cap(buf), decompressLimit+1))
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > decompressLimit {
			return nil, errTooLarge()
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
