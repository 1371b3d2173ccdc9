package registry

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
)

// Avro: hamba/avro parses (with a cache of named types per parse, so that one schema's
// names never leak into another's), gives the full canonical JSON (the identity: two
// spellings of one schema get one id; defaults and docs count, as they do in
// Confluent's registry) and checks reader/writer compatibility as Avro's own checker
// does. Validation is written here: a walk over the binary encoding that allocates
// nothing, stricter than decoding into Go values (every byte must be consumed, union
// and enum indexes in range, strings valid UTF-8).

type avroSchema struct {
	s    avro.Schema
	text string
	name string // full name of a named top-level type, for the record strategies
}

func parseAvro(text string, refs []Resolved) (*avroSchema, error) {
	cache := &avro.SchemaCache{}
	if err := addAvroRefs(cache, refs, 0); err != nil {
		return nil, err
	}
	s, err := avro.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	canon, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	out := &avroSchema{s: s, text: string(canon)}
	if n, ok := s.(avro.NamedSchema); ok {
		out.name = n.FullName()
	}
	return out, nil
}

// addAvroRefs parses referenced schemas (theirs first) into cache, so the schema that
// names them resolves.
func addAvroRefs(cache *avro.SchemaCache, refs []Resolved, depth int) error {
	if depth > maxRefDepth {
		return fmt.Errorf("%w: references nest deeper than %d", ErrInvalidSchema, maxRefDepth)
	}
	for _, r := range refs {
		if r.Type != TypeAvro {
			return fmt.Errorf("%w: reference %q is a %s schema; an Avro schema references Avro schemas", ErrInvalidSchema, r.Name, r.Type)
		}
		if err := addAvroRefs(cache, r.Refs, depth+1); err != nil {
			return err
		}
		if _, err := avro.ParseWithCache(r.Text, "", cache); err != nil {
			return fmt.Errorf("%w: reference %q: %v", ErrInvalidSchema, r.Name, err)
		}
	}
	return nil
}

func (a *avroSchema) canonical() string             { return a.text }
func (a *avroSchema) recordName() string            { return a.name }
func (a *avroSchema) validate(payload []byte) error { return validateAvro(a.s, payload) }

// reads checks, with Avro's own checker, that data written with writer reads with a.
func (a *avroSchema) reads(writer *avroSchema) []string {
	if err := avro.NewSchemaCompatibility().Compatible(a.s, writer.s); err != nil {
		return []string{err.Error()}
	}
	return nil
}

// errAvro is the decoder's refusal; the message says where.
var errAvro = errors.New("does not decode")

type avroReader struct {
	b   []byte
	off int
}

// validateAvro walks b as one value of s, which must consume it whole.
func validateAvro(s avro.Schema, b []byte) error {
	r := avroReader{b: b}
	if err := r.value(s, 0); err != nil {
		return err
	}
	if r.off != len(b) {
		return fmt.Errorf("%w: %d bytes left after the value (of %d)", errAvro, len(b)-r.off, len(b))
	}
	return nil
}

// maxAvroDepth bounds nesting (a recursive schema and hostile bytes must not blow the
// stack).
const maxAvroDepth = 64

func (r *avroReader) fail(what string) error {
	return fmt.Errorf("%w: %s at byte %d", errAvro, what, r.off)
}

func (r *avroReader) varint(maxBytes int) (int64, error) {
	var ux uint64
	for i := 0; i < maxBytes; i++ {
		if r.off >= len(r.b) {
			return 0, r.fail("truncated number")
		}
		c := r.b[r.off]
		r.off++
		ux |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(ux>>1) ^ -int64(ux&1), nil
		}
	}
	return 0, r.fail("number too long")
}

func (r *avroReader) skip(n int64, what string) error {
	if n < 0 || n > int64(len(r.b)-r.off) {
		return r.fail(what + " longer than the bytes left")
	}
	r.off += int(n)
	return nil
}

func (r *avroReader) value(s avro.Schema, depth int) error {
	if depth > maxAvroDepth {
		return r.fail("nesting too deep")
	}
	switch s.Type() {
	case avro.Null:
		return nil
	case avro.Boolean:
		if r.off >= len(r.b) || r.b[r.off] > 1 {
			return r.fail("not a boolean")
		}
		r.off++
		return nil
	case avro.Int:
		_, err := r.varint(5)
		return err
	case avro.Long:
		_, err := r.varint(10)
		return err
	case avro.Float:
		return r.skip(4, "float")
	case avro.Double:
		return r.skip(8, "double")
	case avro.Bytes:
		n, err := r.varint(10)
		if err != nil {
			return err
		}
		return r.skip(n, "bytes")
	case avro.String:
		return r.str()
	case avro.Fixed:
		return r.skip(int64(s.(*avro.FixedSchema).Size()), "fixed")
	case avro.Enum:
		i, err := r.varint(5)
		if err != nil {
			return err
		}
		if n := len(s.(*avro.EnumSchema).Symbols()); i < 0 || i >= int64(n) {
			return r.fail(fmt.Sprintf("enum index %d of %d symbols", i, n))
		}
		return nil
	case avro.Union:
		types := s.(*avro.UnionSchema).Types()
		i, err := r.varint(10)
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(types)) {
			return r.fail(fmt.Sprintf("union index %d of %d branches", i, len(types)))
		}
		return r.value(types[i], depth+1)
	case avro.Record:
		for _, f := range s.(*avro.RecordSchema).Fields() {
			if err := r.value(f.Type(), depth+1); err != nil {
				return fmt.Errorf("field %s: %w", f.Name(), err)
			}
		}
		return nil
	case avro.Array:
		items := s.(*avro.ArraySchema).Items()
		return r.blocks(depth, func() error { return r.value(items, depth+1) })
	case avro.Map:
		values := s.(*avro.MapSchema).Values()
		return r.blocks(depth, func() error {
			if err := r.str(); err != nil {
				return err
			}
			return r.value(values, depth+1)
		})
	case avro.Ref:
		return r.value(s.(*avro.RefSchema).Schema(), depth+1)
	}
	return r.fail("unsupported type " + string(s.Type()))
}

func (r *avroReader) str() error {
	n, err := r.varint(10)
	if err != nil {
		return err
	}
	start := r.off
	if err := r.skip(n, "string"); err != nil {
		return err
	}
	if !utf8.Valid(r.b[start:r.off]) {
		return r.fail("string is not UTF-8")
	}
	return nil
}

// blocks walks an array's or a map's blocks: a count (negative: followed by the
// block's byte size), items, until a zero count.
func (r *avroReader) blocks(depth int, item func() error) error {
	for {
		n, err := r.varint(10)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n < 0 {
			if n == math.MinInt64 {
				return r.fail("block count out of range")
			}
			n = -n
			if _, err := r.varint(10); err != nil {
				return err
			}
		}
		// Every item takes a byte at least unless its type is null; bound the loop
		// by what is left either way.
		if n > int64(len(r.b)-r.off)+1<<16 {
			return r.fail("block count larger than the bytes left")
		}
		for range n {
			if err := item(); err != nil {
				return err
			}
		}
	}
}

// frame is Confluent's wire framing: magic byte 0, then the schema id, big-endian.
const frameLen = 5

// ParseFrame splits a framed value into the schema id and the payload.
func ParseFrame(b []byte) (id int32, payload []byte, ok bool) {
	if len(b) < frameLen || b[0] != 0 {
		return 0, nil, false
	}
	return int32(binary.BigEndian.Uint32(b[1:5])), b[frameLen:], true
}

// AppendFrame frames payload with id.
func AppendFrame(dst []byte, id int32, payload []byte) []byte {
	dst = append(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(id))
	return append(dst, payload...)
}
