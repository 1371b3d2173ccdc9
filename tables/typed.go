package tables

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/hamba/avro/v2"

	"github.com/strata-io/strata/registry"
)

// Typed columns: when a table topic's value subject (TopicNameStrategy, <topic>-value)
// has a registered Avro or JSON schema whose top level is a record (an object with
// properties), the latest such version's fields become columns of the table, after the
// default ones; `value` keeps the record's bytes as they were produced, so nothing of
// a record is lost to a mapping. Each value is decoded with the schema its framing
// names (the registry's codecs, the same strict walk broker-side validation does), and
// its fields fill the columns of their names; a column the writer's schema lacks is
// null, as is every typed column of a tombstone.
//
// Every typed column and nested field is optional: Iceberg cannot add a required column
// to a table with rows, and a tombstone has no fields. Field ids are the table's: a
// column keeps its id for as long as the table has a column of its name (at its place
// in its struct), new ones take ids past the table's last, and a column a later
// version drops stays in the table (null from then on).

// errMismatch: a value or a schema the table cannot take.
var errMismatch = errors.New("does not fit the table")

// colName is the column of a value field: its own name, unless that is a default
// column's or starts with "value_", then "value_" and its name (one to one, both ways).
func colName(field string) string {
	switch field {
	case colPartition, colOffset, colTimestamp, colKey, colValue, colHeaders:
		return "value_" + field
	}
	if strings.HasPrefix(field, "value_") {
		return "value_" + field
	}
	return field
}

// fieldName is the value field a typed column holds (colName's inverse).
func fieldName(col string) string { return strings.TrimPrefix(col, "value_") }

func isDefaultColumn(name string) bool {
	switch name {
	case colPartition, colOffset, colTimestamp, colKey, colValue, colHeaders:
		return true
	}
	return false
}

// valueColumns are the typed columns schema s makes (ids not yet assigned), or nil
// when s types none: a Protobuf schema, or a top level that is not a record.
func valueColumns(s *registry.Schema) []iceberg.NestedField {
	var st iceberg.Type
	switch {
	case s.Avro() != nil:
		if deref(s.Avro()).Type() != avro.Record {
			return nil
		}
		st = avroType(s.Avro(), map[string]bool{})
	case s.JSONDocument() != nil:
		st = jsonType(s.JSONDocument(), s.JSONDocument(), map[string]bool{}, 0)
	}
	top, ok := st.(*iceberg.StructType)
	if !ok {
		return nil
	}
	out := make([]iceberg.NestedField, len(top.FieldList))
	for i, f := range top.FieldList {
		f.Name = colName(f.Name)
		out[i] = f
	}
	return out
}

func deref(s avro.Schema) avro.Schema {
	for i := 0; i < 64; i++ {
		r, ok := s.(*avro.RefSchema)
		if !ok {
			return s
		}
		s = r.Schema()
	}
	return s
}

// avroType maps an Avro type: primitives as themselves (enum as string), date, time,
// timestamp (timestamptz) and local timestamp (timestamp) and decimal (up to 38
// digits) as their Iceberg types, records as structs, arrays as lists, maps as maps
// with string keys, a union of null and one type as that type. What has no Iceberg
// type — other unions, a record inside itself, uuid, wider decimals — is a string
// column holding the value's JSON (a string as it is). A null type has no column.
func avroType(s avro.Schema, open map[string]bool) iceberg.Type {
	s = deref(s)
	logical := ""
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		logical = string(ls.Logical().Type())
		if d, ok := ls.Logical().(*avro.DecimalLogicalSchema); ok {
			if d.Precision() >= 1 && d.Precision() <= 38 {
				return iceberg.DecimalTypeOf(d.Precision(), d.Scale())
			}
			return iceberg.PrimitiveTypes.String
		}
	}
	switch s.Type() {
	case avro.Null:
		return nil
	case avro.Boolean:
		return iceberg.PrimitiveTypes.Bool
	case avro.Int:
		switch logical {
		case "date":
			return iceberg.PrimitiveTypes.Date
		case "time-millis":
			return iceberg.PrimitiveTypes.Time
		}
		return iceberg.PrimitiveTypes.Int32
	case avro.Long:
		switch logical {
		case "time-micros":
			return iceberg.PrimitiveTypes.Time
		case "timestamp-millis", "timestamp-micros":
			return iceberg.PrimitiveTypes.TimestampTz
		case "local-timestamp-millis", "local-timestamp-micros":
			return iceberg.PrimitiveTypes.Timestamp
		}
		return iceberg.PrimitiveTypes.Int64
	case avro.Float:
		return iceberg.PrimitiveTypes.Float32
	case avro.Double:
		return iceberg.PrimitiveTypes.Float64
	case avro.Bytes:
		return iceberg.PrimitiveTypes.Binary
	case avro.String, avro.Enum:
		return iceberg.PrimitiveTypes.String
	case avro.Fixed:
		return iceberg.FixedTypeOf(s.(*avro.FixedSchema).Size())
	case avro.Record:
		rs := s.(*avro.RecordSchema)
		if open[rs.FullName()] {
			return iceberg.PrimitiveTypes.String
		}
		open[rs.FullName()] = true
		defer delete(open, rs.FullName())
		st := &iceberg.StructType{}
		for _, f := range rs.Fields() {
			if t := avroType(f.Type(), open); t != nil {
				st.FieldList = append(st.FieldList, iceberg.NestedField{Name: f.Name(), Type: t})
			}
		}
		return st
	case avro.Array:
		if t := avroType(s.(*avro.ArraySchema).Items(), open); t != nil {
			return &iceberg.ListType{Element: t}
		}
	case avro.Map:
		if t := avroType(s.(*avro.MapSchema).Values(), open); t != nil {
			return &iceberg.MapType{KeyType: iceberg.PrimitiveTypes.String, ValueType: t}
		}
	case avro.Union:
		var branches []avro.Schema
		for _, b := range s.(*avro.UnionSchema).Types() {
			if deref(b).Type() != avro.Null {
				branches = append(branches, b)
			}
		}
		if len(branches) == 1 {
			return avroType(branches[0], open)
		}
	}
	return iceberg.PrimitiveTypes.String
}

// maxJSONDepth bounds the nesting mapped to columns; deeper is a JSON string.
const maxJSONDepth = 32

// jsonType maps a JSON schema: "type" boolean, integer (long), number (double) and
// string as themselves, object with "properties" as a struct of them (by name: a JSON
// object's keys have no order), object with only an "additionalProperties" schema as a
// map, array with an "items" schema as a list; a type list of null and one type as that
// type; a "$ref" within the schema's own document (#/definitions/…, #/$defs/…) as what
// it names, unless it names a schema it is inside of. Anything else — other "$ref"s,
// allOf/anyOf/oneOf, several types, no type — is a string column holding the value's
// JSON (a string as it is).
func jsonType(doc, root any, open map[string]bool, depth int) iceberg.Type {
	m, ok := doc.(map[string]any)
	if !ok || depth > maxJSONDepth {
		return iceberg.PrimitiveTypes.String
	}
	if ref, ok := m["$ref"].(string); ok { // draft-07: what is beside a $ref does not count
		target, found := jsonPointer(root, ref)
		if !found || open[ref] {
			return iceberg.PrimitiveTypes.String
		}
		open[ref] = true
		defer delete(open, ref)
		return jsonType(target, root, open, depth+1)
	}
	for _, k := range []string{"$ref", "allOf", "anyOf", "oneOf", "not", "if"} {
		if _, ok := m[k]; ok {
			return iceberg.PrimitiveTypes.String
		}
	}
	var typ string
	switch t := m["type"].(type) {
	case string:
		typ = t
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok && s != "null" {
				if typ != "" {
					return iceberg.PrimitiveTypes.String
				}
				typ = s
			}
		}
	}
	switch typ {
	case "boolean":
		return iceberg.PrimitiveTypes.Bool
	case "integer":
		return iceberg.PrimitiveTypes.Int64
	case "number":
		return iceberg.PrimitiveTypes.Float64
	case "object":
		props, ok := m["properties"].(map[string]any)
		if !ok {
			if ap, ok := m["additionalProperties"].(map[string]any); ok {
				return &iceberg.MapType{KeyType: iceberg.PrimitiveTypes.String, ValueType: jsonType(ap, root, open, depth+1)}
			}
			break
		}
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		st := &iceberg.StructType{}
		for _, n := range names {
			st.FieldList = append(st.FieldList, iceberg.NestedField{Name: n, Type: jsonType(props[n], root, open, depth+1)})
		}
		return st
	case "array":
		if items, ok := m["items"].(map[string]any); ok {
			return &iceberg.ListType{Element: jsonType(items, root, open, depth+1)}
		}
	}
	return iceberg.PrimitiveTypes.String
}

// jsonPointer resolves a reference within the document root ("#/a/b", RFC 6901
// escapes), nothing else.
func jsonPointer(root any, ref string) (any, bool) {
	rest, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	cur := root
	if rest == "" {
		return cur, true
	}
	if !strings.HasPrefix(rest, "/") {
		return nil, false
	}
	for _, tok := range strings.Split(rest[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// evolve is the table's schema cur with the typed columns: a column of cur keeps its id
// and place (its type widened as Iceberg allows: int to long, float to double, a
// decimal's precision), a new one is added after the last with ids past lastID. It
// answers cur itself when nothing changes, and errMismatch when a column would change
// in a way Iceberg does not allow.
func evolve(cur *iceberg.Schema, lastID int, typed []iceberg.NestedField) (*iceberg.Schema, error) {
	next := lastID
	fields, err := mergeFields("", cur.Fields(), typed, &next)
	if err != nil {
		return nil, err
	}
	if st := cur.AsStruct(); (&iceberg.StructType{FieldList: fields}).Equals(&st) {
		return cur, nil
	}
	return iceberg.NewSchema(cur.ID+1, fields...), nil
}

func mergeFields(path string, old, derived []iceberg.NestedField, next *int) ([]iceberg.NestedField, error) {
	out := slices.Clone(old)
	at := make(map[string]int, len(out))
	for i, f := range out {
		at[f.Name] = i
	}
	for _, d := range derived {
		if path == "" && isDefaultColumn(d.Name) {
			continue
		}
		i, ok := at[d.Name]
		if !ok {
			*next++
			id := *next
			out = append(out, iceberg.NestedField{ID: id, Name: d.Name, Type: assignIDs(d.Type, next)})
			continue
		}
		t, err := mergeType(path+d.Name, out[i].Type, d.Type, next)
		if err != nil {
			return nil, err
		}
		out[i].Type = t
	}
	return out, nil
}

func mergeType(path string, old, derived iceberg.Type, next *int) (iceberg.Type, error) {
	bad := func() error {
		return fmt.Errorf("%w: column %s is %s, and the latest schema makes it %s (Iceberg cannot change a column so)", errMismatch, path, old, derived)
	}
	switch o := old.(type) {
	case *iceberg.StructType:
		d, ok := derived.(*iceberg.StructType)
		if !ok {
			return nil, bad()
		}
		fs, err := mergeFields(path+".", o.FieldList, d.FieldList, next)
		if err != nil {
			return nil, err
		}
		return &iceberg.StructType{FieldList: fs}, nil
	case *iceberg.ListType:
		d, ok := derived.(*iceberg.ListType)
		if !ok {
			return nil, bad()
		}
		e, err := mergeType(path+".element", o.Element, d.Element, next)
		if err != nil {
			return nil, err
		}
		return &iceberg.ListType{ElementID: o.ElementID, Element: e, ElementRequired: o.ElementRequired}, nil
	case *iceberg.MapType:
		d, ok := derived.(*iceberg.MapType)
		if !ok || !o.KeyType.Equals(d.KeyType) {
			return nil, bad()
		}
		v, err := mergeType(path+".value", o.ValueType, d.ValueType, next)
		if err != nil {
			return nil, err
		}
		return &iceberg.MapType{KeyID: o.KeyID, KeyType: o.KeyType, ValueID: o.ValueID, ValueType: v, ValueRequired: o.ValueRequired}, nil
	}
	if old.Equals(derived) {
		return old, nil
	}
	p := iceberg.PrimitiveTypes
	switch {
	case old.Equals(p.Int32) && derived.Equals(p.Int64), old.Equals(p.Float32) && derived.Equals(p.Float64):
		return derived, nil
	case old.Equals(p.Int64) && derived.Equals(p.Int32), old.Equals(p.Float64) && derived.Equals(p.Float32):
		return old, nil // the wider type holds what the narrower writes
	}
	if od, ok := old.(iceberg.DecimalType); ok {
		if dd, ok := derived.(iceberg.DecimalType); ok && od.Scale() == dd.Scale() {
			if dd.Precision() > od.Precision() {
				return dd, nil
			}
			return od, nil
		}
	}
	return nil, bad()
}

// assignIDs gives a new column's nested fields, elements, keys and values ids after
// next; every one optional.
func assignIDs(t iceberg.Type, next *int) iceberg.Type {
	switch t := t.(type) {
	case *iceberg.StructType:
		out := &iceberg.StructType{FieldList: make([]iceberg.NestedField, len(t.FieldList))}
		for i, f := range t.FieldList {
			*next++
			out.FieldList[i] = iceberg.NestedField{ID: *next, Name: f.Name}
		}
		for i, f := range t.FieldList {
			out.FieldList[i].Type = assignIDs(f.Type, next)
		}
		return out
	case *iceberg.ListType:
		*next++
		id := *next
		return &iceberg.ListType{ElementID: id, Element: assignIDs(t.Element, next)}
	case *iceberg.MapType:
		*next += 2
		k, v := *next-1, *next
		return &iceberg.MapType{KeyID: k, KeyType: t.KeyType, ValueID: v, ValueType: assignIDs(t.ValueType, next)}
	}
	return t
}

// typedRow is one record's typed columns, converted for the Arrow builders (rowValue).
type typedRow []any

// typedRow converts a decoded value (registry.Schema.Decode) to the typed columns
// cols of the table (nil for a tombstone).
func toTypedRow(cols []iceberg.NestedField, v any) (typedRow, error) {
	row := make(typedRow, len(cols))
	if v == nil {
		return row, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the value is %s, not a record", errMismatch, jsonText(v))
	}
	for i, c := range cols {
		x, err := convert(c.Name, c.Type, m[fieldName(c.Name)])
		if err != nil {
			return nil, err
		}
		row[i] = x
	}
	return row, nil
}

// convert turns a decoded value into what appendValue appends for type t: bool,
// int32, int64, float32, float64, string, []byte, arrow.Date32, arrow.Time64 and
// arrow.Timestamp (microseconds), decimal128.Num, []any for a struct's fields (in
// order) and a list's elements, [][2]any for a map's entries; nil for null.
func convert(path string, t iceberg.Type, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	bad := func() error {
		return fmt.Errorf("%w: %s: %s is not a %s", errMismatch, path, jsonText(v), t)
	}
	p := iceberg.PrimitiveTypes
	switch t := t.(type) {
	case *iceberg.StructType:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, bad()
		}
		out := make([]any, len(t.FieldList))
		for i, f := range t.FieldList {
			x, err := convert(path+"."+f.Name, f.Type, m[f.Name])
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case *iceberg.ListType:
		l, ok := v.([]any)
		if !ok {
			return nil, bad()
		}
		out := make([]any, len(l))
		for i, e := range l {
			x, err := convert(path+"[]", t.Element, e)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case *iceberg.MapType:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, bad()
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([][2]any, len(keys))
		for i, k := range keys {
			x, err := convert(path+"{}", t.ValueType, m[k])
			if err != nil {
				return nil, err
			}
			out[i] = [2]any{k, x}
		}
		return out, nil
	case iceberg.DecimalType:
		r, ok := v.(*big.Rat)
		if !ok {
			return nil, bad()
		}
		scaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(t.Scale())), nil)))
		if !scaled.IsInt() {
			return nil, bad()
		}
		n := decimal128.FromBigInt(scaled.Num())
		if !n.FitsInPrecision(int32(t.Precision())) {
			return nil, bad()
		}
		return n, nil
	case iceberg.FixedType:
		b, ok := bytesOf(v)
		if !ok || len(b) != t.Len() {
			return nil, bad()
		}
		return b, nil
	}
	switch {
	case t.Equals(p.Bool):
		b, ok := v.(bool)
		if !ok {
			return nil, bad()
		}
		return b, nil
	case t.Equals(p.Int32):
		n, ok := integer(v)
		if !ok || n < math.MinInt32 || n > math.MaxInt32 {
			return nil, bad()
		}
		return int32(n), nil
	case t.Equals(p.Int64):
		n, ok := integer(v)
		if !ok {
			return nil, bad()
		}
		return n, nil
	case t.Equals(p.Float32):
		f, ok := float(v)
		if !ok {
			return nil, bad()
		}
		return float32(f), nil
	case t.Equals(p.Float64):
		f, ok := float(v)
		if !ok {
			return nil, bad()
		}
		return f, nil
	case t.Equals(p.String):
		if s, ok := v.(string); ok {
			return s, nil
		}
		return jsonText(v), nil
	case t.Equals(p.Binary):
		b, ok := bytesOf(v)
		if !ok {
			return nil, bad()
		}
		return b, nil
	case t.Equals(p.Date):
		tm, ok := v.(time.Time)
		if !ok {
			return nil, bad()
		}
		return arrow.Date32FromTime(tm), nil
	case t.Equals(p.Time):
		d, ok := v.(time.Duration)
		if !ok {
			return nil, bad()
		}
		return arrow.Time64(d.Microseconds()), nil
	case t.Equals(p.TimestampTz), t.Equals(p.Timestamp):
		tm, ok := v.(time.Time)
		if !ok {
			return nil, bad()
		}
		return arrow.Timestamp(tm.UnixMicro()), nil
	}
	return nil, bad()
}

func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case json.Number:
		i, err := n.Int64()
		if err == nil {
			return i, true
		}
		// JSON Schema's integer admits 1.0.
		f, err := n.Float64()
		if err == nil && f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
			return int64(f), true
		}
	}
	return 0, false
}

func float(v any) (float64, bool) {
	switch n := v.(type) {
	case float32:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	if i, ok := integer(v); ok {
		return float64(i), true
	}
	return 0, false
}

// bytesOf is v's bytes: []byte, or a fixed as hamba decodes it ([N]byte).
func bytesOf(v any) ([]byte, bool) {
	if b, ok := v.([]byte); ok {
		return b, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
		b := make([]byte, rv.Len())
		reflect.Copy(reflect.ValueOf(b), rv)
		return b, true
	}
	return nil, false
}

// jsonText is v as JSON: what a string column holds for a value of a construct with
// no Iceberg type.
func jsonText(v any) string {
	b, err := json.Marshal(jsonable(v))
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonable(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonable(e)
		}
		return out
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case time.Duration:
		return x.String()
	case *big.Rat:
		return x.FloatString(10)
	}
	if b, ok := bytesOf(v); ok {
		return b // base64, as encoding/json writes bytes
	}
	return v
}

// appendValue appends a converted value (convert) to b.
func appendValue(b array.Builder, v any) {
	if v == nil {
		b.AppendNull()
		return
	}
	switch b := b.(type) {
	case *array.BooleanBuilder:
		b.Append(v.(bool))
	case *array.Int32Builder:
		b.Append(v.(int32))
	case *array.Int64Builder:
		b.Append(v.(int64))
	case *array.Float32Builder:
		b.Append(v.(float32))
	case *array.Float64Builder:
		b.Append(v.(float64))
	case *array.StringBuilder:
		b.Append(v.(string))
	case *array.BinaryBuilder:
		b.Append(v.([]byte))
	case *array.FixedSizeBinaryBuilder:
		b.Append(v.([]byte))
	case *array.Date32Builder:
		b.Append(v.(arrow.Date32))
	case *array.Time64Builder:
		b.Append(v.(arrow.Time64))
	case *array.TimestampBuilder:
		b.Append(v.(arrow.Timestamp))
	case *array.Decimal128Builder:
		b.Append(v.(decimal128.Num))
	case *array.StructBuilder:
		b.Append(true)
		for i, x := range v.([]any) {
			appendValue(b.FieldBuilder(i), x)
		}
	case *array.ListBuilder:
		b.Append(true)
		for _, x := range v.([]any) {
			appendValue(b.ValueBuilder(), x)
		}
	case *array.MapBuilder:
		b.Append(true)
		for _, kv := range v.([][2]any) {
			appendValue(b.KeyBuilder(), kv[0])
			appendValue(b.ItemBuilder(), kv[1])
		}
	default:
		panic(fmt.Sprintf("tables: no appender for %T", b))
	}
}
