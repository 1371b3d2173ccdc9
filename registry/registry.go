// Package registry owns the schema registry's formats and rules, which the broker core
// calls: parsing a schema with its references into its canonical form and fingerprint
// (the identity under which the catalog gives it one id), the compatibility levels and
// what each checks, the modes, the subject rules and name strategies, Confluent's wire
// framing, and validating a record's bytes against its schema. It knows no HTTP and
// no catalog backend: Confluent's REST API over the core is registry/rest; the state is
// the catalog's (catalog.Registry).
//
// Formats, one implementation of the format interface each: Avro (avro.go, hamba/avro),
// JSON Schema (jsonschema.go, santhosh-tekuri/jsonschema for validation, compatibility
// written here) and Protobuf (protobuf.go, bufbuild/protocompile for parsing and
// linking, google.golang.org/protobuf's dynamicpb for validation, compatibility written
// here).
package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The schema types, as Confluent's API names them ("schemaType"; absent means Avro).
const (
	TypeAvro     = "AVRO"
	TypeProtobuf = "PROTOBUF"
	TypeJSON     = "JSON"
)

// Types lists the schema types this registry parses (GET /schemas/types).
func Types() []string { return []string{TypeAvro, TypeJSON, TypeProtobuf} }

// ErrInvalidSchema: a schema that does not parse, or names what cannot be resolved.
var ErrInvalidSchema = errors.New("invalid schema")

// maxRefDepth bounds how deep references may nest.
const maxRefDepth = 32

// MaxSchemaBytes bounds a schema's text.
const MaxSchemaBytes = 1 << 20

// Resolved is a reference with the schema it resolves to (and that schema's own).
type Resolved struct {
	Name string
	Type string
	Text string
	Refs []Resolved
}

// format is what each schema type implements.
type format interface {
	// canonical is the schema's canonical text: what GET answers and what identifies it.
	canonical() string
	// recordName is the full name of the schema's top-level record (message, title),
	// which the record name strategies put in the subject; "" when it has none.
	recordName() string
	// validate checks that payload (a record's bytes after the id) is one value.
	validate(payload []byte) error
}

// Schema is a parsed schema: the one parsed form of its type (exactly one is set), so
// what compares or converts within a type (compatibility, JSON) takes it as it is and
// no code asks an interface for its dynamic type.
type Schema struct {
	typ   string
	avro  *avroSchema
	json  *jsonSchemaFormat
	proto *protoSchema
}

// f is the schema's parsed form as a format, for what every format does.
func (s *Schema) f() format {
	switch {
	case s.avro != nil:
		return s.avro
	case s.json != nil:
		return s.json
	default:
		return s.proto
	}
}

// reads answers why data written with w (a schema of s's type) cannot be read with s:
// nil when it can.
func (s *Schema) reads(w *Schema) []string {
	switch {
	case s.avro != nil:
		return s.avro.reads(w.avro)
	case s.json != nil:
		return s.json.reads(w.json)
	default:
		return s.proto.reads(w.proto)
	}
}

// Parse parses text as a schema of typ ("" is Avro) with its references resolved.
func Parse(typ, text string, refs []Resolved) (*Schema, error) {
	if typ == "" {
		typ = TypeAvro
	}
	if len(text) > MaxSchemaBytes {
		return nil, fmt.Errorf("%w: the schema is %d bytes; at most %d", ErrInvalidSchema, len(text), MaxSchemaBytes)
	}
	s := &Schema{typ: typ}
	var err error
	switch typ {
	case TypeAvro:
		s.avro, err = parseAvro(text, refs)
	case TypeJSON:
		s.json, err = parseJSONSchema(text, refs)
	case TypeProtobuf:
		s.proto, err = parseProtobuf(text, refs)
	default:
		return nil, fmt.Errorf("%w: unknown schema type %q (supported: %s)", ErrInvalidSchema, typ, strings.Join(Types(), ", "))
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Type is the schema's type.
func (s *Schema) Type() string { return s.typ }

// Canonical is the schema's canonical text: what GET answers and what identifies it.
func (s *Schema) Canonical() string { return s.f().canonical() }

// RecordName is the full name of the schema's top-level record (or other named type),
// which the record name strategies put in the subject; "" when it has none.
func (s *Schema) RecordName() string { return s.f().recordName() }

// Validate checks that payload (a record's value after the framing) is one value of s.
func (s *Schema) Validate(payload []byte) error {
	return s.f().validate(payload)
}

// Fingerprint identifies a schema with its references: equal fingerprints, one id.
func Fingerprint(s *Schema, refs any) string {
	h := sha256.New()
	h.Write([]byte(s.typ))
	h.Write([]byte{0})
	h.Write([]byte(s.Canonical()))
	h.Write([]byte{0})
	r, _ := json.Marshal(refs)
	h.Write(r)
	return hex.EncodeToString(h.Sum(nil))
}

// Level is a compatibility level.
type Level string

// The levels. BACKWARD is the default: a new schema must read what the latest wrote.
const (
	None               Level = "NONE"
	Backward           Level = "BACKWARD"
	BackwardTransitive Level = "BACKWARD_TRANSITIVE"
	Forward            Level = "FORWARD"
	ForwardTransitive  Level = "FORWARD_TRANSITIVE"
	Full               Level = "FULL"
	FullTransitive     Level = "FULL_TRANSITIVE"
	DefaultLevel             = Backward
)

// Levels lists the levels.
func Levels() []Level {
	return []Level{None, Backward, BackwardTransitive, Forward, ForwardTransitive, Full, FullTransitive}
}

// ParseLevel reads a level (case-insensitive).
func ParseLevel(s string) (Level, bool) {
	for _, l := range Levels() {
		if strings.EqualFold(s, string(l)) {
			return l, true
		}
	}
	return "", false
}

// Prior is an earlier version a candidate is checked against.
type Prior struct {
	Version int32
	Schema  *Schema
}

// Check answers why candidate may not follow prior (a subject's live versions, oldest
// first) under level: nil when it may. Non-transitive levels check the latest version
// only; the transitive ones every version. BACKWARD: the candidate reads what the
// earlier wrote; FORWARD: the earlier reads what the candidate writes; FULL: both. A
// schema of another type than the latest is never compatible (Confluent's rule), unless
// the level is NONE.
func Check(level Level, candidate *Schema, prior []Prior) []string {
	if level == None || len(prior) == 0 {
		return nil
	}
	against := prior
	if !strings.HasSuffix(string(level), "_TRANSITIVE") {
		against = prior[len(prior)-1:]
	}
	base := Level(strings.TrimSuffix(string(level), "_TRANSITIVE"))
	var msgs []string
	for i := len(against) - 1; i >= 0; i-- {
		p := against[i]
		var problems []string
		if p.Schema.typ != candidate.typ {
			problems = append(problems, fmt.Sprintf("the new schema is %s, version %d is %s", candidate.typ, p.Version, p.Schema.typ))
		} else {
			if base == Backward || base == Full {
				for _, why := range candidate.reads(p.Schema) {
					problems = append(problems, "backward: the new schema cannot read data written with version "+fmt.Sprint(p.Version)+": "+why)
				}
			}
			if base == Forward || base == Full {
				for _, why := range p.Schema.reads(candidate) {
					problems = append(problems, "forward: version "+fmt.Sprint(p.Version)+" cannot read data written with the new schema: "+why)
				}
			}
		}
		if len(problems) > 0 {
			for _, pr := range problems {
				msgs = append(msgs, fmt.Sprintf("{description:'%s'}", strings.ReplaceAll(pr, "'", "\\'")))
			}
			msgs = append(msgs, fmt.Sprintf("{oldSchemaVersion: %d}", p.Version), fmt.Sprintf("{oldSchema: '%s'}", p.Schema.Canonical()),
				fmt.Sprintf("{compatibility: '%s'}", level))
		}
	}
	return msgs
}

// Mode is the registry's (or a subject's) mode.
type Mode string

// The modes.
const (
	ReadWrite        Mode = "READWRITE"
	ReadOnly         Mode = "READONLY"
	ReadOnlyOverride Mode = "READONLY_OVERRIDE"
	Import           Mode = "IMPORT"
	DefaultMode           = ReadWrite
)

// ParseMode reads a mode (case-insensitive).
func ParseMode(s string) (Mode, bool) {
	for _, m := range []Mode{ReadWrite, ReadOnly, ReadOnlyOverride, Import} {
		if strings.EqualFold(s, string(m)) {
			return m, true
		}
	}
	return "", false
}

// MaxSubjectLength bounds a subject's name, in bytes: room for a topic name (249) and
// a fully qualified record name under the record strategies.
const MaxSubjectLength = 1024

// ValidateSubject checks a subject's name: not empty, at most MaxSubjectLength bytes,
// UTF-8 without control characters.
func ValidateSubject(s string) error {
	switch {
	case s == "":
		return errors.New("the subject is empty")
	case len(s) > MaxSubjectLength:
		return fmt.Errorf("the subject is %d bytes; at most %d", len(s), MaxSubjectLength)
	case !utf8.ValidString(s):
		return errors.New("the subject is not UTF-8")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return errors.New("the subject holds a control character")
		}
	}
	return nil
}

// Strategy is a subject name strategy: how a topic's records name their subject.
type Strategy string

// The strategies, by the short names the topic configs store (catalog.Config).
const (
	TopicName       Strategy = "topic"        // {topic}-key / {topic}-value
	RecordName      Strategy = "record"       // {record full name}
	TopicRecordName Strategy = "topic-record" // {topic}-{record full name}
)

// Subject is the subject a record of topic (its key when key) with a schema whose
// record name is recordName falls under; ok false when the strategy needs a record
// name and the schema has none.
func (st Strategy) Subject(topic string, key bool, recordName string) (string, bool) {
	switch st {
	case RecordName:
		return recordName, recordName != ""
	case TopicRecordName:
		return topic + "-" + recordName, recordName != ""
	}
	if key {
		return topic + "-key", true
	}
	return topic + "-value", true
}
