package connect

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Single-message transforms and predicates, Kafka Connect's built-in set, on schemaless
// records (maps, as JSON decodes them). Each is named as in Kafka Connect —
// org.apache.kafka.connect.transforms.InsertField$Value — or by its short name,
// InsertField$Value; the $Key/$Value variants work on the key or the value.

// transform changes a record; nil drops it.
type transform interface {
	apply(r Record) (*Record, error)
}

// predicate tests a record.
type predicate interface {
	test(r Record) bool
}

type transformDef struct {
	doc  string
	keys []ConfigKey
	// make builds the transform for the key (key true) or the value.
	make  func(g getter, key bool) (transform, error)
	sides bool // has $Key and $Value variants
}

type predicateDef struct {
	doc  string
	keys []ConfigKey
	make func(g getter) (predicate, error)
}

const transformsPackage = "org.apache.kafka.connect.transforms."

func req(name, doc string) ConfigKey {
	return ConfigKey{Name: name, Type: TypeString, NoDefault: true, Importance: "HIGH", Doc: doc}
}

func opt(name, typ, def, doc string) ConfigKey {
	return ConfigKey{Name: name, Type: typ, Default: def, Importance: "MEDIUM", Doc: doc}
}

var transformDefs = map[string]transformDef{
	"InsertField": {doc: "Insert a field with the record's topic, partition, offset, timestamp or a static value.", sides: true,
		keys: []ConfigKey{
			opt("topic.field", TypeString, "", "Field name for the topic."),
			opt("partition.field", TypeString, "", "Field name for the partition."),
			opt("offset.field", TypeString, "", "Field name for the offset (sink connectors only)."),
			opt("timestamp.field", TypeString, "", "Field name for the record timestamp (unix ms)."),
			opt("static.field", TypeString, "", "Field name for a static value."),
			opt("static.value", TypeString, "", "The static value."),
		}, make: newInsertField},
	"ReplaceField": {doc: "Filter or rename fields.", sides: true,
		keys: []ConfigKey{
			opt("exclude", TypeList, "", "Fields to exclude; takes precedence over include."),
			opt("include", TypeList, "", "Fields to include; when set, only these are kept."),
			opt("renames", TypeList, "", "Field rename mappings, old:new."),
			opt("blacklist", TypeList, "", "Deprecated: exclude."),
			opt("whitelist", TypeList, "", "Deprecated: include."),
		}, make: newReplaceField},
	"MaskField": {doc: "Mask fields with the empty value of their type, or a replacement.", sides: true,
		keys: []ConfigKey{req("fields", "Names of fields to mask."), opt("replacement", TypeString, "", "The replacement value.")},
		make: newMaskField},
	"ValueToKey": {doc: "Replace the key with a map of fields of the value.",
		keys: []ConfigKey{req("fields", "Field names of the value to put in the key.")},
		make: func(g getter, _ bool) (transform, error) { return valueToKey{fields: g.list("fields")}, nil }},
	"ExtractField": {doc: "Replace the key or value with one of its fields.", sides: true,
		keys: []ConfigKey{req("field", "Field name to extract.")},
		make: func(g getter, key bool) (transform, error) {
			return side(key, extractField{field: g.str("field")}), nil
		}},
	"HoistField": {doc: "Wrap the key or value in a map with one field.", sides: true,
		keys: []ConfigKey{req("field", "Field name for the map holding the original.")},
		make: func(g getter, key bool) (transform, error) { return side(key, hoistField{field: g.str("field")}), nil }},
	"Cast": {doc: "Cast fields, or the whole key or value, to another type.", sides: true,
		keys: []ConfigKey{req("spec", "field:type pairs, or one type for the whole key or value; types int8, int16, int32, int64, float32, float64, boolean, string.")},
		make: newCast},
	"RegexRouter": {doc: "Rewrite the topic with a regular expression and a replacement.",
		keys: []ConfigKey{req("regex", "Regular expression the whole topic must match."), req("replacement", "Replacement ($1 refers to a group).")},
		make: newRegexRouter},
	"TimestampRouter": {doc: "Rewrite the topic with the record's timestamp.",
		keys: []ConfigKey{opt("topic.format", TypeString, "${topic}-${timestamp}", "Format of the new topic."),
			opt("timestamp.format", TypeString, "yyyyMMdd", "Timestamp format (SimpleDateFormat: yyyy, yy, MM, dd, HH, mm, ss, SSS), UTC.")},
		make: func(g getter, _ bool) (transform, error) {
			return timestampRouter{format: g.str("topic.format"), layout: javaLayout(g.str("timestamp.format"))}, nil
		}},
	"Filter": {doc: "Drop records (with a predicate: those it matches).",
		make: func(getter, bool) (transform, error) { return filter{}, nil }},
}

var predicateDefs = map[string]predicateDef{
	"TopicNameMatches": {doc: "True for records whose topic matches a regular expression.",
		keys: []ConfigKey{req("pattern", "Regular expression the whole topic must match.")},
		make: func(g getter) (predicate, error) {
			re, err := fullRegexp(g.str("pattern"))
			if err != nil {
				return nil, err
			}
			return topicMatches{re: re}, nil
		}},
	"HasHeaderKey": {doc: "True for records with a header of a name.",
		keys: []ConfigKey{req("name", "The header name.")},
		make: func(g getter) (predicate, error) { return hasHeader{name: g.str("name")}, nil }},
	"RecordIsTombstone": {doc: "True for records whose value is null.",
		make: func(getter) (predicate, error) { return tombstone{}, nil }},
}

// transformName resolves a transform class to its definition and side.
func transformName(class string) (def transformDef, name string, key bool, err error) {
	name = strings.TrimPrefix(strings.TrimSpace(class), transformsPackage)
	base, variant, hasVariant := strings.Cut(name, "$")
	def, ok := transformDefs[base]
	switch {
	case !ok:
		return def, name, false, fmt.Errorf("Class %s could not be found", class)
	case def.sides && (!hasVariant || (variant != "Key" && variant != "Value")):
		return def, name, false, fmt.Errorf("%s works on the key or the value: use %s$Key or %s$Value", base, base, base)
	case !def.sides && hasVariant:
		return def, name, false, fmt.Errorf("Class %s could not be found (%s has no $Key or $Value variant)", class, base)
	}
	return def, name, variant == "Key", nil
}

func predicateName(class string) (predicateDef, error) {
	name := strings.TrimPrefix(strings.TrimSpace(class), transformsPackage+"predicates.")
	def, ok := predicateDefs[name]
	if !ok {
		return def, fmt.Errorf("Class %s could not be found", class)
	}
	return def, nil
}

// step is one transform of a chain, with its predicate.
type step struct {
	alias  string
	class  string
	t      transform
	pred   predicate
	negate bool
}

// chain is a connector's transforms in order.
type chain []step

func (c chain) apply(r Record) (*Record, error) {
	cur := &r
	for _, s := range c {
		if s.pred != nil && s.pred.test(*cur) == s.negate {
			continue
		}
		next, err := s.t.apply(*cur)
		if err != nil {
			return nil, &transformError{alias: s.alias, class: s.class, err: err}
		}
		if next == nil {
			return nil, nil
		}
		cur = next
	}
	return cur, nil
}

// transformError is a transform's failure on a record.
type transformError struct {
	alias, class string
	err          error
}

func (e *transformError) Error() string { return fmt.Sprintf("transform %s: %v", e.alias, e.err) }
func (e *transformError) Unwrap() error { return e.err }

// valueFn changes one side (key or value) of a record.
type valueFn interface {
	on(v any, r Record) (any, error)
}

type sideTransform struct {
	key bool
	fn  valueFn
}

func side(key bool, fn valueFn) transform { return sideTransform{key: key, fn: fn} }

func (s sideTransform) apply(r Record) (*Record, error) {
	if s.key {
		v, err := s.fn.on(r.Key, r)
		r.Key = v
		return &r, err
	}
	v, err := s.fn.on(r.Value, r)
	r.Value = v
	return &r, err
}

// asMap requires a map (Kafka Connect: "Only Map objects supported in absence of
// schema") and returns a copy to change.
func asMap(v any, purpose string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("Only Map objects supported in absence of schema for [%s], found: %s", purpose, typeName(v))
	}
	return maps.Clone(m), nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "java.lang.String"
	case json.Number:
		return "java.lang.Number"
	case bool:
		return "java.lang.Boolean"
	case []any:
		return "java.util.ArrayList"
	case []byte:
		return "[B"
	}
	return fmt.Sprintf("%T", v)
}

// fieldName drops the !/? suffix Kafka Connect's InsertField allows.
func fieldName(s string) string { return strings.TrimRight(s, "!?") }

type insertField struct {
	topic, partition, offset, timestamp, static, staticValue string
}

func newInsertField(g getter, key bool) (transform, error) {
	f := insertField{topic: fieldName(g.str("topic.field")), partition: fieldName(g.str("partition.field")), offset: fieldName(g.str("offset.field")),
		timestamp: fieldName(g.str("timestamp.field")), static: fieldName(g.str("static.field")), staticValue: g.str("static.value")}
	if f.topic == "" && f.partition == "" && f.offset == "" && f.timestamp == "" && f.static == "" {
		return nil, errors.New("set at least one of topic.field, partition.field, offset.field, timestamp.field, static.field")
	}
	return side(key, f), nil
}

func (f insertField) on(v any, r Record) (any, error) {
	if v == nil {
		return nil, nil // tombstones pass through
	}
	m, err := asMap(v, "field insertion")
	if err != nil {
		return nil, err
	}
	if f.topic != "" {
		m[f.topic] = r.Topic
	}
	if f.partition != "" {
		m[f.partition] = json.Number(strconv.Itoa(int(r.Partition)))
	}
	if f.offset != "" {
		if r.Offset < 0 {
			return nil, errors.New("offset.field can only be inserted for sink records")
		}
		m[f.offset] = json.Number(strconv.FormatInt(r.Offset, 10))
	}
	if f.timestamp != "" {
		if r.Timestamp < 0 {
			m[f.timestamp] = nil
		} else {
			m[f.timestamp] = json.Number(strconv.FormatInt(r.Timestamp, 10))
		}
	}
	if f.static != "" {
		m[f.static] = f.staticValue
	}
	return m, nil
}

type replaceField struct {
	exclude, include map[string]bool
	renames          map[string]string
}

func newReplaceField(g getter, key bool) (transform, error) {
	f := replaceField{exclude: map[string]bool{}, include: map[string]bool{}, renames: map[string]string{}}
	for _, x := range append(g.list("exclude"), g.list("blacklist")...) {
		f.exclude[x] = true
	}
	for _, x := range append(g.list("include"), g.list("whitelist")...) {
		f.include[x] = true
	}
	for _, rn := range g.list("renames") {
		from, to, ok := strings.Cut(rn, ":")
		if !ok || from == "" || to == "" {
			return nil, fmt.Errorf("renames: %q is not old:new", rn)
		}
		f.renames[from] = to
	}
	return side(key, f), nil
}

func (f replaceField) on(v any, _ Record) (any, error) {
	if v == nil {
		return nil, nil
	}
	m, err := asMap(v, "field replacement")
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		if f.exclude[k] || (len(f.include) > 0 && !f.include[k]) {
			continue
		}
		if to, ok := f.renames[k]; ok {
			k = to
		}
		out[k] = x
	}
	return out, nil
}

type maskField struct {
	fields      []string
	replacement string
}

func newMaskField(g getter, key bool) (transform, error) {
	return side(key, maskField{fields: g.list("fields"), replacement: g.str("replacement")}), nil
}

func (f maskField) on(v any, _ Record) (any, error) {
	if v == nil {
		return nil, nil
	}
	m, err := asMap(v, "masking fields")
	if err != nil {
		return nil, err
	}
	for _, name := range f.fields {
		x, ok := m[name]
		if !ok {
			continue
		}
		if m[name], err = f.mask(x); err != nil {
			return nil, fmt.Errorf("field %s: %w", name, err)
		}
	}
	return m, nil
}

func (f maskField) mask(x any) (any, error) {
	switch x.(type) {
	case nil:
		return nil, nil
	case string:
		return f.replacement, nil
	case json.Number:
		if f.replacement == "" {
			return json.Number("0"), nil
		}
		if _, err := strconv.ParseFloat(f.replacement, 64); err != nil {
			return nil, fmt.Errorf("replacement %q is not a number", f.replacement)
		}
		return json.Number(f.replacement), nil
	case bool:
		if f.replacement == "" {
			return false, nil
		}
		return strconv.ParseBool(f.replacement)
	case map[string]any:
		return map[string]any{}, nil
	case []any:
		return []any{}, nil
	}
	return nil, fmt.Errorf("cannot mask a %s", typeName(x))
}

type valueToKey struct{ fields []string }

func (f valueToKey) apply(r Record) (*Record, error) {
	m, ok := r.Value.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("Only Map objects supported in absence of schema for [copying fields from value to key], found: %s", typeName(r.Value))
	}
	k := make(map[string]any, len(f.fields))
	for _, name := range f.fields {
		k[name] = m[name]
	}
	r.Key = k
	return &r, nil
}

type extractField struct{ field string }

func (f extractField) on(v any, _ Record) (any, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("Only Map objects supported in absence of schema for [field extraction], found: %s", typeName(v))
	}
	return m[f.field], nil
}

type hoistField struct{ field string }

func (f hoistField) on(v any, _ Record) (any, error) { return map[string]any{f.field: v}, nil }

type filter struct{}

func (filter) apply(Record) (*Record, error) { return nil, nil }

var castTypes = []string{"int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string"}

type cast struct {
	whole  string            // the whole key or value's type
	fields map[string]string // or per field
}

func newCast(g getter, key bool) (transform, error) {
	c := cast{fields: map[string]string{}}
	for _, part := range g.list("spec") {
		field, typ, ok := strings.Cut(part, ":")
		if !ok {
			field, typ = "", part
		}
		if !slices.Contains(castTypes, typ) {
			return nil, fmt.Errorf("spec: unknown type %q: use %s", typ, strings.Join(castTypes, ", "))
		}
		if field == "" {
			c.whole = typ
			continue
		}
		c.fields[field] = typ
	}
	if c.whole != "" && len(c.fields) > 0 {
		return nil, errors.New("spec: give one type for the whole value, or field:type pairs, not both")
	}
	if c.whole == "" && len(c.fields) == 0 {
		return nil, errors.New("spec: empty")
	}
	return side(key, c), nil
}

func (c cast) on(v any, _ Record) (any, error) {
	if v == nil {
		return nil, nil
	}
	if c.whole != "" {
		return castTo(v, c.whole)
	}
	m, err := asMap(v, "cast types")
	if err != nil {
		return nil, err
	}
	for name, typ := range c.fields {
		if x, ok := m[name]; ok && x != nil {
			if m[name], err = castTo(x, typ); err != nil {
				return nil, fmt.Errorf("field %s: %w", name, err)
			}
		}
	}
	return m, nil
}

// castTo casts a primitive, as Kafka Connect's Cast does on schemaless values.
func castTo(v any, typ string) (any, error) {
	var f float64
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
		f, _ = x.Float64()
	case string:
		s = x
		if typ != "string" && typ != "boolean" {
			var err error
			if f, err = strconv.ParseFloat(strings.TrimSpace(x), 64); err != nil {
				// The value is the record's: a status trace must not quote it.
				return nil, fmt.Errorf("cannot cast a string that is not a number to %s", typ)
			}
		}
	case bool:
		s = strconv.FormatBool(x)
		if x {
			f = 1
		}
	default:
		return nil, fmt.Errorf("Cast transformation does not support casting a %s", typeName(v))
	}
	bits := map[string]int{"int8": 8, "int16": 16, "int32": 32, "int64": 64}
	switch typ {
	case "string":
		return s, nil
	case "boolean":
		if b, err := strconv.ParseBool(s); err == nil {
			return b, nil
		}
		return f != 0, nil
	case "float32":
		return json.Number(strconv.FormatFloat(float64(float32(f)), 'g', -1, 32)), nil
	case "float64":
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64) // exact when it is an integer
	if err != nil {
		if math.IsNaN(f) || f >= math.MaxInt64 || f < math.MinInt64 {
			return nil, fmt.Errorf("the value is out of range for %s", typ)
		}
		n = int64(f)
	}
	if _, isBool := v.(bool); isBool {
		n = int64(f)
	}
	if b := bits[typ]; b < 64 {
		n = int64(int64(n<<(64-b)) >> (64 - b)) // wraps as a Java narrowing cast does
	}
	return json.Number(strconv.FormatInt(n, 10)), nil
}

type regexRouter struct {
	re   *regexp.Regexp
	repl string
}

func fullRegexp(p string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + p + `)$`)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression %q: %v", p, err)
	}
	return re, nil
}

var javaGroupRef = regexp.MustCompile(`\$(\d+)`)

func newRegexRouter(g getter, _ bool) (transform, error) {
	re, err := fullRegexp(g.str("regex"))
	if err != nil {
		return nil, err
	}
	return regexRouter{re: re, repl: javaGroupRef.ReplaceAllString(g.str("replacement"), "$${$1}")}, nil
}

func (t regexRouter) apply(r Record) (*Record, error) {
	if t.re.MatchString(r.Topic) {
		r.Topic = t.re.ReplaceAllString(r.Topic, t.repl)
	}
	return &r, nil
}

type timestampRouter struct{ format, layout string }

func (t timestampRouter) apply(r Record) (*Record, error) {
	if r.Timestamp < 0 {
		return nil, fmt.Errorf("Timestamp missing on record: %s", r.Topic)
	}
	ts := time.UnixMilli(r.Timestamp).UTC().Format(t.layout)
	r.Topic = strings.ReplaceAll(strings.ReplaceAll(t.format, "${topic}", r.Topic), "${timestamp}", ts)
	return &r, nil
}

// javaLayout turns a SimpleDateFormat pattern of the common letters into a Go layout.
func javaLayout(p string) string {
	for _, r := range []struct{ java, goLayout string }{
		{"yyyy", "2006"}, {"yy", "06"}, {"MM", "01"}, {"dd", "02"}, {"HH", "15"}, {"mm", "04"}, {"ss", "05"}, {"SSS", "000"},
	} {
		p = strings.ReplaceAll(p, r.java, r.goLayout)
	}
	return p
}

type topicMatches struct{ re *regexp.Regexp }

func (p topicMatches) test(r Record) bool { return p.re.MatchString(r.Topic) }

type hasHeader struct{ name string }

func (p hasHeader) test(r Record) bool {
	return slices.ContainsFunc(r.Headers, func(h Header) bool { return h.Key == p.name })
}

type tombstone struct{}

func (tombstone) test(r Record) bool { return r.Value == nil }
