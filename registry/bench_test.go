package registry

import (
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/encoding/protowire"
)

// BenchmarkValidate is each format's check of one value of about 1 KiB (the payload
// after the framing), without the broker around it:
//
//	go test ./registry -run '^$' -bench Validate
func BenchmarkValidate(b *testing.B) {
	body := strings.Repeat("x", 1000)
	avroS, _ := Parse(TypeAvro, `{"type":"record","name":"Event","fields":[{"name":"id","type":"long"},{"name":"kind","type":"string"},{"name":"body","type":"string"}]}`, nil)
	avroP, _ := avro.Marshal(avroS.avro.s, map[string]any{"id": int64(1), "kind": "order", "body": body})
	jsonS, _ := Parse(TypeJSON, `{"type":"object","properties":{"id":{"type":"integer"},"kind":{"type":"string","maxLength":32},"body":{"type":"string"}},"required":["id","kind","body"],"additionalProperties":false}`, nil)
	jsonP := []byte(`{"id":1,"kind":"order","body":"` + body + `"}`)
	protoS, _ := Parse(TypeProtobuf, "syntax = \"proto3\";\nmessage Event { int64 id = 1; string kind = 2; string body = 3; }", nil)
	protoP := []byte{0}
	protoP = protowire.AppendTag(protoP, 1, protowire.VarintType)
	protoP = protowire.AppendVarint(protoP, 1)
	protoP = protowire.AppendTag(protoP, 2, protowire.BytesType)
	protoP = protowire.AppendString(protoP, "order")
	protoP = protowire.AppendTag(protoP, 3, protowire.BytesType)
	protoP = protowire.AppendString(protoP, body)
	for _, f := range []struct {
		name string
		s    *Schema
		p    []byte
	}{{"avro", avroS, avroP}, {"json", jsonS, jsonP}, {"protobuf", protoS, protoP}} {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(f.p)))
			b.ReportAllocs()
			for b.Loop() {
				if err := f.s.Validate(f.p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
