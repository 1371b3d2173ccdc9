package registry

import (
	"encoding/binary"
	"math"
	"math/big"
	"time"

	"github.com/hamba/avro/v2"
)

// decodeAvro decodes b as one value of s into what hamba/avro decodes into any (the
// types Schema.Decode lists; fixed as []byte), in one strict pass: the same checks as
// validateAvro, b consumed whole. Written here rather than hamba's generic decoding,
// which goes through reflection for every value: the tables role decodes every
// record of a typed table topic.
func decodeAvro(s avro.Schema, b []byte) (any, error) {
	r := avroReader{b: b}
	v, err := r.decode(s, 0)
	if err != nil {
		return nil, err
	}
	if r.off != len(b) {
		return nil, r.fail("bytes left after the value")
	}
	return v, nil
}

func (r *avroReader) decode(s avro.Schema, depth int) (any, error) {
	if depth > maxAvroDepth {
		return nil, r.fail("nesting too deep")
	}
	logical := ""
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		logical = string(ls.Logical().Type())
	}
	switch s.Type() {
	case avro.Null:
		return nil, nil
	case avro.Boolean:
		if r.off >= len(r.b) || r.b[r.off] > 1 {
			return nil, r.fail("not a boolean")
		}
		r.off++
		return r.b[r.off-1] == 1, nil
	case avro.Int:
		n, err := r.varint(5)
		if err != nil {
			return nil, err
		}
		if n < math.MinInt32 || n > math.MaxInt32 {
			return nil, r.fail("int out of range")
		}
		switch logical {
		case "date":
			return time.Unix(n*86400, 0).UTC(), nil
		case "time-millis":
			return time.Duration(n) * time.Millisecond, nil
		}
		return int(n), nil
	case avro.Long:
		n, err := r.varint(10)
		if err != nil {
			return nil, err
		}
		switch logical {
		case "time-micros":
			return time.Duration(n) * time.Microsecond, nil
		case "timestamp-millis", "local-timestamp-millis":
			return time.UnixMilli(n).UTC(), nil
		case "timestamp-micros", "local-timestamp-micros":
			return time.UnixMicro(n).UTC(), nil
		}
		return n, nil
	case avro.Float:
		if err := r.skip(4, "float"); err != nil {
			return nil, err
		}
		return math.Float32frombits(binary.LittleEndian.Uint32(r.b[r.off-4:])), nil
	case avro.Double:
		if err := r.skip(8, "double"); err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(r.b[r.off-8:])), nil
	case avro.Bytes:
		n, err := r.varint(10)
		if err != nil {
			return nil, err
		}
		if err := r.skip(n, "bytes"); err != nil {
			return nil, err
		}
		b := append([]byte(nil), r.b[r.off-int(n):r.off]...)
		if logical == "decimal" {
			if d, ok := s.(avro.LogicalTypeSchema).Logical().(*avro.DecimalLogicalSchema); ok {
				return decimalRat(b, d.Scale()), nil
			}
		}
		return b, nil
	case avro.String:
		return r.strValue()
	case avro.Fixed:
		fs := s.(*avro.FixedSchema)
		if err := r.skip(int64(fs.Size()), "fixed"); err != nil {
			return nil, err
		}
		b := append([]byte(nil), r.b[r.off-fs.Size():r.off]...)
		if d, ok := fs.Logical().(*avro.DecimalLogicalSchema); ok {
			return decimalRat(b, d.Scale()), nil
		}
		return b, nil
	case avro.Enum:
		i, err := r.varint(5)
		if err != nil {
			return nil, err
		}
		syms := s.(*avro.EnumSchema).Symbols()
		if i < 0 || i >= int64(len(syms)) {
			return nil, r.fail("enum index out of range")
		}
		return syms[i], nil
	case avro.Union:
		types := s.(*avro.UnionSchema).Types()
		i, err := r.varint(10)
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= int64(len(types)) {
			return nil, r.fail("union index out of range")
		}
		return r.decode(types[i], depth+1)
	case avro.Record:
		fields := s.(*avro.RecordSchema).Fields()
		m := make(map[string]any, len(fields))
		for _, f := range fields {
			v, err := r.decode(f.Type(), depth+1)
			if err != nil {
				return nil, err
			}
			m[f.Name()] = v
		}
		return m, nil
	case avro.Array:
		items := s.(*avro.ArraySchema).Items()
		out := []any{}
		err := r.blocks(depth, func() error {
			v, err := r.decode(items, depth+1)
			out = append(out, v)
			return err
		})
		return out, err
	case avro.Map:
		values := s.(*avro.MapSchema).Values()
		out := map[string]any{}
		err := r.blocks(depth, func() error {
			k, err := r.strValue()
			if err != nil {
				return err
			}
			v, err := r.decode(values, depth+1)
			out[k] = v
			return err
		})
		return out, err
	case avro.Ref:
		return r.decode(s.(*avro.RefSchema).Schema(), depth+1)
	}
	return nil, r.fail("unsupported type " + string(s.Type()))
}

// decimalRat is a decimal's two's-complement big-endian unscaled value over 10^scale.
func decimalRat(b []byte, scale int) *big.Rat {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	return new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
}

// strValue reads a string (checked as str checks it).
func (r *avroReader) strValue() (string, error) {
	start := r.off
	if err := r.str(); err != nil {
		return "", err
	}
	end := r.off
	r.off = start
	n, _ := r.varint(10) // read once already
	r.off = end
	return string(r.b[end-int(n) : end]), nil
}
