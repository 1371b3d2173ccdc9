package connect

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/strata-io/strata/catalog"
)

// Converter turns a record's key or value into the bytes stored and back, as Kafka
// Connect's converters do. Values are schemaless (see Record).
type Converter interface {
	FromConnect(v any) ([]byte, error)
	ToConnect(b []byte) (any, error)
}

// The converters, by Kafka Connect's class names, with short aliases.
var converterClasses = map[string]string{
	"org.apache.kafka.connect.json.JsonConverter": "json",
	"JsonConverter": "json",
	"json":          "json",
	"org.apache.kafka.connect.storage.StringConverter": "string",
	"StringConverter": "string",
	"string":          "string",
	"org.apache.kafka.connect.converters.ByteArrayConverter": "bytes",
	"ByteArrayConverter": "bytes",
	"bytes":              "bytes",
}

func converterNames() []string {
	return []string{"org.apache.kafka.connect.json.JsonConverter", "org.apache.kafka.connect.storage.StringConverter", "org.apache.kafka.connect.converters.ByteArrayConverter"}
}

func checkConverter(v string) error {
	if _, ok := converterClasses[strings.TrimSpace(v)]; !ok {
		return fmt.Errorf("Class %s could not be found: use %s", v, strings.Join(converterNames(), ", "))
	}
	return nil
}

// converterKeys are the keys a converter named in prefix (key.converter or
// value.converter) adds: the JSON converter's schemas.enable.
func converterKeys(prefix, class string) []ConfigKey {
	if converterClasses[strings.TrimSpace(class)] != "json" {
		return nil
	}
	return []ConfigKey{{Name: prefix + ".schemas.enable", Type: TypeBoolean, Default: "false", Importance: "LOW", Group: groupCommon,
		DisplayName: "Schemas enable", Doc: "Wrap each value as {\"schema\":...,\"payload\":...}, as Kafka Connect's JsonConverter does (schemaless records carry \"schema\":null)."}}
}

// newConverter builds the converter prefix names in cfg.
func newConverter(cfg getter, prefix string) Converter {
	switch converterClasses[strings.TrimSpace(cfg.str(prefix))] {
	case "string":
		return stringConverter{}
	case "bytes":
		return bytesConverter{}
	}
	return jsonConverter{schemas: strings.EqualFold(cfg.cfg[prefix+".schemas.enable"], "true")}
}

// jsonConverter is Kafka Connect's JsonConverter on schemaless values: canonical JSON
// (keys sorted, numbers as written); with schemas, the {"schema","payload"} envelope,
// whose schema is null for schemaless records. Bytes become base64 strings, as there.
type jsonConverter struct{ schemas bool }

func (c jsonConverter) FromConnect(v any) ([]byte, error) {
	if v == nil && !c.schemas {
		return nil, nil
	}
	if b, ok := v.([]byte); ok {
		v = base64.StdEncoding.EncodeToString(b)
	}
	if c.schemas {
		v = map[string]any{"schema": nil, "payload": v}
	}
	if !jsonable(v) {
		return nil, fmt.Errorf("JsonConverter: cannot encode a %T", v)
	}
	return []byte(catalog.MarshalCanonical(v)), nil
}

func (c jsonConverter) ToConnect(b []byte) (any, error) {
	if b == nil {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		// encoding/json's words quote the byte it stopped at: the record's, which a
		// status trace must not show. Where it stopped is enough.
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("Converting byte[] to Kafka Connect data failed due to serialization error: not valid JSON at byte %d", se.Offset)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errors.New("Converting byte[] to Kafka Connect data failed due to serialization error: the JSON ends early")
		}
		return nil, errors.New("Converting byte[] to Kafka Connect data failed due to serialization error: not valid JSON")
	}
	if d.More() {
		return nil, errors.New("Converting byte[] to Kafka Connect data failed due to serialization error: more than one JSON value")
	}
	if !c.schemas {
		return v, nil
	}
	env, ok := v.(map[string]any)
	_, hasSchema := env["schema"]
	payload, hasPayload := env["payload"]
	if !ok || len(env) != 2 || !hasSchema || !hasPayload {
		return nil, errors.New("JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields and may not contain additional fields. If you are trying to deserialize plain JSON data, set schemas.enable=false in your converter configuration.")
	}
	return payload, nil
}

// jsonable reports whether v holds only what JSON decodes to (and strings of bytes).
func jsonable(v any) bool {
	switch x := v.(type) {
	case nil, string, bool, json.Number, float64, float32, int, int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		return true
	case map[string]any:
		for _, e := range x {
			if !jsonable(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !jsonable(e) {
				return false
			}
		}
		return true
	}
	return false
}

// stringConverter is Kafka Connect's StringConverter: UTF-8 text; other values as their
// JSON text.
type stringConverter struct{}

func (stringConverter) FromConnect(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(x), nil
	case []byte:
		return x, nil
	case json.Number:
		return []byte(x.String()), nil
	}
	if !jsonable(v) {
		return nil, fmt.Errorf("StringConverter: cannot encode a %T", v)
	}
	return []byte(catalog.MarshalCanonical(v)), nil
}

func (stringConverter) ToConnect(b []byte) (any, error) {
	if b == nil {
		return nil, nil
	}
	return string(b), nil
}

// bytesConverter is Kafka Connect's ByteArrayConverter: bytes pass through.
type bytesConverter struct{}

func (bytesConverter) FromConnect(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []byte:
		return x, nil
	}
	return nil, fmt.Errorf("ByteArrayConverter is not compatible with objects of type %T", v)
}

func (bytesConverter) ToConnect(b []byte) (any, error) {
	if b == nil {
		return nil, nil
	}
	return b, nil
}
