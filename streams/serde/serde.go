// Package serde turns typed keys and values into the bytes Strata stores and back. A
// Serde's bytes are exactly the stored bytes: a string serde's output is what a topic
// with key.format or value.format "string" stores, a JSON serde's what a "json" topic
// stores, and any of them fits a "binary" topic.
package serde

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Serde encodes and decodes values of one type. Decode must reject bytes Encode could
// not have produced with an error (a poison record), never guess.
type Serde[T any] interface {
	Encode(v T) ([]byte, error)
	Decode(b []byte) (T, error)
}

// Funcs makes a Serde of two functions.
type Funcs[T any] struct {
	Enc func(T) ([]byte, error)
	Dec func([]byte) (T, error)
}

func (f Funcs[T]) Encode(v T) ([]byte, error) { return f.Enc(v) }
func (f Funcs[T]) Decode(b []byte) (T, error) { return f.Dec(b) }

// String is UTF-8 text. Invalid UTF-8 is refused both ways: the JSON API carries
// string fields as JSON strings.
var String Serde[string] = stringSerde{}

type stringSerde struct{}

func (stringSerde) Encode(v string) ([]byte, error) {
	if !utf8.ValidString(v) {
		return nil, fmt.Errorf("serde: string is not valid UTF-8")
	}
	return []byte(v), nil
}

func (stringSerde) Decode(b []byte) (string, error) {
	if !utf8.Valid(b) {
		return "", fmt.Errorf("serde: %d bytes are not valid UTF-8", len(b))
	}
	return string(b), nil
}

// Bytes passes bytes through unchanged.
var Bytes Serde[[]byte] = bytesSerde{}

type bytesSerde struct{}

func (bytesSerde) Encode(v []byte) ([]byte, error) { return v, nil }
func (bytesSerde) Decode(b []byte) ([]byte, error) { return b, nil }

// Int64 is 8 bytes big-endian, as Kafka's LongSerializer writes it.
var Int64 Serde[int64] = int64Serde{}

type int64Serde struct{}

func (int64Serde) Encode(v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(v)), nil
}

func (int64Serde) Decode(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("serde: int64 needs 8 bytes, got %d", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// JSON encodes T with encoding/json. Decoding refuses anything but exactly one JSON
// value of T's shape (trailing data, a wrong type), so a poison record is reported.
func JSON[T any]() Serde[T] { return jsonSerde[T]{} }

type jsonSerde[T any] struct{}

func (jsonSerde[T]) Encode(v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("serde: encode %T as JSON: %w", v, err)
	}
	return b, nil
}

func (jsonSerde[T]) Decode(b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("serde: decode %T from JSON: %w", v, err)
	}
	return v, nil
}
