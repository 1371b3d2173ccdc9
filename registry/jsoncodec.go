package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// JSON in and out of a schema's encoding, for HTTP clients that send and read JSON on
// topics whose records are framed for the registry. Avro: hamba/avro encodes and
// decodes; the JSON it takes is Avro's JSON encoding (a union's value as
// {"branch": value}, or bare when only one branch could hold it; bytes and fixed as
// strings of code points 0-255), turned into the Go values hamba expects here.
// JSON Schema: the value is validated and stored as its compact JSON text. Protobuf:
// protojson and dynamicpb against the schema's first message (message index [0]).

// ErrEncode is a JSON value that does not fit the schema.
var ErrEncode = errors.New("does not fit the schema")

// EncodeJSON encodes the JSON text v to s's encoding: the bytes that follow the
// registry's framing (the id).
func (s *Schema) EncodeJSON(v []byte) ([]byte, error) {
	switch {
	case s.avro != nil:
		f := s.avro
		doc, err := decodeJSONNumbers(v)
		if err != nil {
			return nil, err
		}
		native, err := avroNative(f.s, doc, 0)
		if err != nil {
			return nil, err
		}
		out, err := avro.Marshal(f.s, native)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrEncode, err)
		}
		return out, nil
	case s.json != nil:
		f := s.json
		if err := f.validate(v); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrEncode, err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrEncode, err)
		}
		return buf.Bytes(), nil
	case s.proto != nil:
		f := s.proto
		if f.fd.Messages().Len() == 0 {
			return nil, fmt.Errorf("%w: the schema has no message", ErrEncode)
		}
		m := dynamicpb.NewMessage(f.fd.Messages().Get(0))
		if err := protojson.Unmarshal(v, m); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrEncode, err)
		}
		body, err := proto.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrEncode, err)
		}
		return append(AppendMessageIndexes(nil, []int{0}), body...), nil
	}
	return nil, fmt.Errorf("%w: %s values cannot be sent as JSON", ErrEncode, s.typ)
}

// DecodeJSON decodes payload (the bytes after the id) to JSON text.
func (s *Schema) DecodeJSON(payload []byte) ([]byte, error) {
	switch {
	case s.avro != nil:
		f := s.avro
		if err := f.validate(payload); err != nil {
			return nil, err
		}
		var v any
		if err := avro.Unmarshal(f.s, payload, &v); err != nil {
			return nil, err
		}
		return json.Marshal(jsonFriendly(v))
	case s.json != nil:
		var buf bytes.Buffer
		if err := json.Compact(&buf, payload); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case s.proto != nil:
		f := s.proto
		path, body, err := MessageIndexes(payload)
		if err != nil {
			return nil, err
		}
		md, err := f.message(path)
		if err != nil {
			return nil, err
		}
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(body, m); err != nil {
			return nil, err
		}
		return protojson.MarshalOptions{}.Marshal(m)
	}
	return nil, fmt.Errorf("%s values cannot be shown as JSON", s.typ)
}

func decodeJSONNumbers(v []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrEncode, err)
	}
	if d.More() {
		return nil, fmt.Errorf("%w: more than one JSON value", ErrEncode)
	}
	return doc, nil
}

// avroNative turns a JSON value into what hamba encodes as schema s.
func avroNative(s avro.Schema, v any, depth int) (any, error) {
	if depth > maxAvroDepth {
		return nil, fmt.Errorf("%w: nesting too deep", ErrEncode)
	}
	bad := func(want string) error {
		return fmt.Errorf("%w: %s is not %s", ErrEncode, truncateJSON(v), want)
	}
	switch s.Type() {
	case avro.Null:
		if v != nil {
			return nil, bad("null")
		}
		return nil, nil
	case avro.Boolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, bad("a boolean")
	case avro.Int, avro.Long:
		n, ok := v.(json.Number)
		if !ok {
			return nil, bad("an integer")
		}
		i, err := n.Int64()
		if err != nil || (s.Type() == avro.Int && (i < math.MinInt32 || i > math.MaxInt32)) {
			return nil, bad("an " + string(s.Type()))
		}
		if s.Type() == avro.Int {
			return int(i), nil
		}
		return i, nil
	case avro.Float, avro.Double:
		n, ok := v.(json.Number)
		if !ok {
			return nil, bad("a number")
		}
		f, err := n.Float64()
		if err != nil {
			return nil, bad("a number")
		}
		if s.Type() == avro.Float {
			return float32(f), nil
		}
		return f, nil
	case avro.String:
		if str, ok := v.(string); ok {
			return str, nil
		}
		return nil, bad("a string")
	case avro.Bytes, avro.Fixed:
		str, ok := v.(string)
		if !ok {
			return nil, bad("a string of code points 0-255")
		}
		b, ok := latin1(str)
		if !ok {
			return nil, bad("a string of code points 0-255")
		}
		if s.Type() == avro.Bytes {
			return b, nil
		}
		size := s.(*avro.FixedSchema).Size()
		if len(b) != size {
			return nil, bad(fmt.Sprintf("%d bytes", size))
		}
		arr := reflect.New(reflect.ArrayOf(size, reflect.TypeFor[byte]())).Elem()
		reflect.Copy(arr, reflect.ValueOf(b))
		return arr.Interface(), nil
	case avro.Enum:
		str, ok := v.(string)
		if !ok || !slices.Contains(s.(*avro.EnumSchema).Symbols(), str) {
			return nil, bad("one of the enum's symbols")
		}
		return str, nil
	case avro.Array:
		items, ok := v.([]any)
		if !ok {
			return nil, bad("an array")
		}
		out := make([]any, len(items))
		for i, it := range items {
			var err error
			if out[i], err = avroNative(s.(*avro.ArraySchema).Items(), it, depth+1); err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return out, nil
	case avro.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, bad("an object")
		}
		out := make(map[string]any, len(m))
		for k, x := range m {
			var err error
			if out[k], err = avroNative(s.(*avro.MapSchema).Values(), x, depth+1); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
		}
		return out, nil
	case avro.Record:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, bad("an object")
		}
		out := make(map[string]any, len(m))
		for _, f := range s.(*avro.RecordSchema).Fields() {
			x, ok := m[f.Name()]
			if !ok {
				if !f.HasDefault() {
					return nil, fmt.Errorf("%w: field %s is missing and has no default", ErrEncode, f.Name())
				}
				continue // hamba writes the default
			}
			var err error
			if out[f.Name()], err = avroNative(f.Type(), x, depth+1); err != nil {
				return nil, fmt.Errorf("field %s: %w", f.Name(), err)
			}
		}
		return out, nil
	case avro.Ref:
		return avroNative(s.(*avro.RefSchema).Schema(), v, depth+1)
	case avro.Union:
		return avroUnion(s.(*avro.UnionSchema), v, depth)
	}
	return nil, fmt.Errorf("%w: type %s cannot be sent as JSON", ErrEncode, s.Type())
}

// avroUnion reads a union's value: null, {"branch": value} (Avro's JSON encoding), or
// a bare value the first branch that takes it holds.
func avroUnion(u *avro.UnionSchema, v any, depth int) (any, error) {
	if v == nil {
		if u.Nullable() || u.Contains(avro.Null) {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: null is not one of the union's branches", ErrEncode)
	}
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		for name, x := range m {
			for _, b := range u.Types() {
				if branchName(b) == name {
					nv, err := avroNative(b, x, depth+1)
					if err != nil {
						return nil, err
					}
					return map[string]any{name: nv}, nil
				}
			}
		}
	}
	for _, b := range u.Types() {
		if b.Type() == avro.Null {
			continue
		}
		if nv, err := avroNative(b, v, depth+1); err == nil {
			return map[string]any{branchName(b): nv}, nil
		}
	}
	return nil, fmt.Errorf("%w: %s fits no branch of the union", ErrEncode, truncateJSON(v))
}

// branchName is how Avro's JSON encoding names a union branch.
func branchName(s avro.Schema) string {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	return string(s.Type())
}

func latin1(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			return nil, false
		}
		out = append(out, byte(r))
	}
	return out, true
}

func fromLatin1(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		sb.WriteRune(rune(c))
	}
	return sb.String()
}

// jsonFriendly turns what hamba decodes into what shows as Avro's JSON: bytes and
// fixed as code-point strings, logical types as their text.
func jsonFriendly(v any) any {
	switch x := v.(type) {
	case []byte:
		return fromLatin1(x)
	case map[string]any:
		for k, e := range x {
			x[k] = jsonFriendly(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = jsonFriendly(e)
		}
		return x
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case time.Duration:
		return x.String()
	case *big.Rat:
		return x.FloatString(10)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
		b := make([]byte, rv.Len())
		reflect.Copy(reflect.ValueOf(b), rv)
		return fromLatin1(b)
	}
	return v
}

func truncateJSON(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(b)
}
