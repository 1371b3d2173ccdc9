package registry

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/hamba/avro/v2"
)

// Decoding a value into Go values, for what lays records out by their schema's fields
// (the tables role's typed columns): Avro in one strict pass that checks what Validate
// checks (avrodecode.go); JSON validated, then encoding/json with numbers kept as
// json.Number.

// Avro is the schema's parsed Avro form; nil when s is not Avro.
func (s *Schema) Avro() avro.Schema {
	if s.avro == nil {
		return nil
	}
	return s.avro.s
}

// JSONDocument is the JSON schema's document (the schema itself, parsed); nil when s
// is not a JSON schema.
func (s *Schema) JSONDocument() any {
	if s.json == nil {
		return nil
	}
	return s.json.doc
}

// Decode decodes payload (a record's value after the framing) as one value of s:
// Avro as hamba decodes into any (records and maps as map[string]any, arrays as
// []any, int as int and long as int64, a union as its branch's value, enum as its
// symbol, bytes and fixed as []byte, logical types as time.Time (UTC), time.Duration
// and *big.Rat); JSON as its JSON value with numbers as json.Number. Protobuf values are
// not decoded here.
func (s *Schema) Decode(payload []byte) (any, error) {
	switch {
	case s.avro != nil:
		return decodeAvro(s.avro.s, payload)
	case s.json != nil:
		if err := s.json.validate(payload); err != nil {
			return nil, err
		}
		d := json.NewDecoder(bytes.NewReader(payload))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("not JSON: %v", err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("%s values are not decoded", s.typ)
}
