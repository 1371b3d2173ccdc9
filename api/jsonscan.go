package api

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"unicode/utf8"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/segment"
)

// The produce body's fast path. decodeStrict (encoding/json with unknown fields
// refused) reads a produce body at about 50 MB/s on this machine's cores: it scans the
// body twice and copies every raw value. Produce bodies are nearly always the same
// simple shape — an object with "records" (an array of objects with the five record
// fields, each once, spelled exactly) and maybe "producer" — and for that shape one
// validating pass that hands out the raw values where they lie is several times
// faster.
//
// The fast path decides nothing on its own: whenever a body is not that shape, or not
// valid, it declines and decodeStrict decides, errors included. So its only duty is
// that what it accepts, decodeStrict accepts with the same result; a differential fuzz
// test holds it to that (FuzzFastProduce).

// fastDecodeProduce parses body if it has the common shape; ok false means "not
// handled here", never "refused".
func fastDecodeProduce(body []byte) (req v1.ProduceRequest, ok bool) {
	if !utf8.Valid(body) {
		return req, false
	}
	s := jscan{b: body}
	s.ws()
	if !s.eat('{') {
		return req, false
	}
	var seenRecords, seenProducer bool
	for {
		s.ws()
		key, ok := s.plainString()
		if !ok {
			return req, false // an empty object, an escaped key, broken JSON
		}
		s.ws()
		if !s.eat(':') {
			return req, false
		}
		s.ws()
		switch string(key) {
		case "records":
			if seenRecords {
				return req, false
			}
			seenRecords = true
			if req.Records, ok = s.records(); !ok {
				return req, false
			}
		case "producer":
			if seenProducer {
				return req, false
			}
			seenProducer = true
			start := s.i
			if !s.value() {
				return req, false
			}
			raw := body[start:s.i]
			if !bytes.Equal(raw, nullJSON) {
				// Small and rare beside the records: encoding/json's strict decode, so
				// its rules (and errors, by declining) are decodeStrict's exactly.
				var pj v1.Producer
				dec := json.NewDecoder(bytes.NewReader(raw))
				dec.DisallowUnknownFields()
				if dec.Decode(&pj) != nil {
					return req, false
				}
				req.Producer = &pj
			}
		default:
			return req, false
		}
		s.ws()
		if s.eat('}') {
			break
		}
		if !s.eat(',') {
			return req, false
		}
	}
	s.ws()
	return req, s.i == len(body)
}

// records reads the records array: objects whose members are the record fields, each
// at most once. Values are validated and kept where they lie.
func (s *jscan) records() ([]v1.ProduceRecord, bool) {
	if !s.eat('[') {
		return nil, false
	}
	out := make([]v1.ProduceRecord, 0, 64)
	s.ws()
	if s.eat(']') {
		return out, true
	}
	for {
		s.ws()
		if !s.eat('{') {
			return nil, false
		}
		var r v1.ProduceRecord
		var seen uint8
		s.ws()
		if !s.eat('}') {
			for {
				s.ws()
				key, ok := s.plainString()
				if !ok {
					return nil, false
				}
				s.ws()
				if !s.eat(':') {
					return nil, false
				}
				s.ws()
				start := s.i
				if !s.value() {
					return nil, false
				}
				raw := json.RawMessage(s.b[start:s.i:s.i])
				var bit uint8
				switch string(key) {
				case "key":
					r.Key, bit = raw, 1
				case "value":
					r.Value, bit = raw, 2
				case "headers":
					r.Headers, bit = raw, 4
				case "partition":
					r.Partition, bit = raw, 8
				case "timestamp":
					r.Timestamp, bit = raw, 16
				default:
					return nil, false
				}
				if seen&bit != 0 {
					return nil, false
				}
				seen |= bit
				s.ws()
				if s.eat('}') {
					break
				}
				if !s.eat(',') {
					return nil, false
				}
			}
		}
		out = append(out, r)
		s.ws()
		if s.eat(']') {
			return out, true
		}
		if !s.eat(',') {
			return nil, false
		}
	}
}

// fastHeaders reads a record's headers in either form when every key and value is a
// plain string (no escapes) or a null value; ok false leaves it to decodeHeaders's
// encoding/json path, which also explains any error.
func fastHeaders(raw []byte) ([]segment.Header, bool) {
	if !utf8.Valid(raw) { // encoding/json would replace the bad bytes: leave it to it
		return nil, false
	}
	s := jscan{b: raw}
	switch {
	case s.eat('{'):
		var out []segment.Header
		s.ws()
		if s.eat('}') {
			return out, s.i == len(raw)
		}
		for {
			s.ws()
			k, ok := s.plainString()
			if !ok {
				return nil, false
			}
			s.ws()
			if !s.eat(':') {
				return nil, false
			}
			s.ws()
			v, isNull, ok := s.plainStringOrNull()
			if !ok {
				return nil, false
			}
			h := segment.Header{Key: string(k)}
			if !isNull {
				h.Value = v
			}
			out = append(out, h)
			s.ws()
			if s.eat('}') {
				return out, s.i == len(raw)
			}
			if !s.eat(',') {
				return nil, false
			}
		}
	case s.eat('['):
		out := make([]segment.Header, 0, 4)
		s.ws()
		if s.eat(']') {
			return out, s.i == len(raw)
		}
		for {
			s.ws()
			if !s.eat('{') {
				return nil, false
			}
			var h segment.Header
			var haveKey, haveValue bool
			for {
				s.ws()
				name, ok := s.plainString()
				if !ok {
					return nil, false
				}
				s.ws()
				if !s.eat(':') {
					return nil, false
				}
				s.ws()
				switch string(name) {
				case "key":
					k, ok := s.plainString()
					if !ok || haveKey {
						return nil, false
					}
					h.Key, haveKey = string(k), true
				case "value":
					v, isNull, ok := s.plainStringOrNull()
					if !ok || haveValue {
						return nil, false
					}
					if !isNull {
						h.Value = v
					}
					haveValue = true
				default:
					return nil, false
				}
				s.ws()
				if s.eat('}') {
					break
				}
				if !s.eat(',') {
					return nil, false
				}
			}
			if !haveKey {
				return nil, false
			}
			out = append(out, h)
			s.ws()
			if s.eat(']') {
				return out, s.i == len(raw)
			}
			if !s.eat(',') {
				return nil, false
			}
		}
	}
	return nil, false
}

// jscan is a validating scanner over JSON text, following encoding/json's grammar
// (RFC 8259; any \u escape; bytes above 0x7f taken as they are, UTF-8 being checked
// separately). Every method reports failure instead of guessing.
type jscan struct {
	b     []byte
	i     int
	depth int
}

// maxDepth bounds nesting; deeper values are declined (encoding/json allows 10,000).
const maxDepth = 256

func (s *jscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jscan) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// plainString reads a string without escapes and returns its contents.
func (s *jscan) plainString() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	end, escaped, ok := scanString(s.b, start)
	if !ok || escaped {
		return nil, false
	}
	s.i = end + 1
	return s.b[start:end:end], true
}

func (s *jscan) plainStringOrNull() (v []byte, isNull, ok bool) {
	if bytes.HasPrefix(s.b[s.i:], nullJSON) {
		s.i += len(nullJSON)
		return nil, true, true
	}
	v, ok = s.plainString()
	return v, false, ok
}

// value validates one JSON value at s.i (no leading whitespace) and moves past it.
func (s *jscan) value() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		end, _, ok := scanString(s.b, s.i+1)
		s.i = end + 1
		return ok
	case c == '{':
		return s.object()
	case c == '[':
		return s.array()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

func (s *jscan) literal(w string) bool {
	if len(s.b)-s.i < len(w) || string(s.b[s.i:s.i+len(w)]) != w {
		return false
	}
	s.i += len(w)
	return true
}

// number: -? (0 | [1-9][0-9]*) (\.[0-9]+)? ([eE][+-]?[0-9]+)?
func (s *jscan) number() bool {
	b := s.b
	i := s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	s.i = i
	return true
}

func (s *jscan) object() bool {
	if s.depth++; s.depth > maxDepth {
		return false
	}
	defer func() { s.depth-- }()
	s.i++ // '{'
	s.ws()
	if s.eat('}') {
		return true
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		end, _, ok := scanString(s.b, s.i+1)
		if !ok {
			return false
		}
		s.i = end + 1
		s.ws()
		if !s.eat(':') {
			return false
		}
		s.ws()
		if !s.value() {
			return false
		}
		s.ws()
		if s.eat('}') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

func (s *jscan) array() bool {
	if s.depth++; s.depth > maxDepth {
		return false
	}
	defer func() { s.depth-- }()
	s.i++ // '['
	s.ws()
	if s.eat(']') {
		return true
	}
	for {
		s.ws()
		if !s.value() {
			return false
		}
		s.ws()
		if s.eat(']') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// scanString validates a string's contents from i (just past the opening quote) and
// returns the index of the closing quote and whether an escape occurs. Eight bytes at
// a time while none of them is a quote, a backslash or a control character: record
// values are mostly long plain runs.
func scanString(b []byte, i int) (end int, escaped, ok bool) {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for {
		for len(b)-i >= 8 {
			x := binary.LittleEndian.Uint64(b[i:])
			q := x ^ (ones * '"')
			bs := x ^ (ones * '\\')
			// A byte is special if it is zero after the xor (quote, backslash) or below
			// 0x20 (control); these tests set a byte's high bit for every special one and
			// possibly, by a borrow, for bytes after it, which the byte loop re-checks.
			special := ((q - ones) &^ q) | ((bs - ones) &^ bs) | ((x - ones*0x20) &^ x)
			if special&highs == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(special&highs) / 8
			break
		}
		if i >= len(b) {
			return i, escaped, false
		}
		switch c := b[i]; {
		case c == '"':
			return i, escaped, true
		case c < 0x20:
			return i, escaped, false
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return i, escaped, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, escaped, false
				}
				i += 6
			default:
				return i, escaped, false
			}
		default:
			i++
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
