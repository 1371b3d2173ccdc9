package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Protobuf: bufbuild/protocompile parses and links a schema with its references, which
// are its imports by the reference's name (the standard google/protobuf/*.proto files
// resolve too; nothing is read from the file system). Values are checked by decoding
// them with google.golang.org/protobuf's dynamicpb against the linked descriptor of
// the message that Confluent's message-index framing names. The canonical form is the
// schema's text (trimmed): the same text under two subjects has one id, but two
// spellings of one schema are two schemas. Compatibility is written here: Confluent's
// rules, comparing a writer's file (Confluent's "original") with a reader's
// ("update"): messages by name, fields by number; what breaks is a changed package, a
// removed message, a field whose kind (scalar, message, map) or scalar group (the
// wire-compatible groups: int32/int64/uint32/uint64/bool/enums; sint32/sint64;
// string/bytes; fixed32/sfixed32; fixed64/sfixed64; float; double) changes, a field
// whose message type is another, a number whose label (optional, required, repeated)
// changes, a required field added or removed, a oneof field removed, and a oneof
// gathering fields from more than one place of the old schema.

// protoRoot is the name the schema itself is compiled under (its references are
// imported by their own names).
const protoRoot = "strata-registry-schema.proto"

type protoSchema struct {
	fd   protoreflect.FileDescriptor
	text string
	pool sync.Pool
}

func (p *protoSchema) pooled(md protoreflect.MessageDescriptor) *dynamicpb.Message {
	if m, ok := p.pool.Get().(*dynamicpb.Message); ok {
		if m.Descriptor() == md {
			return m
		}
	}
	return dynamicpb.NewMessage(md)
}

func parseProtobuf(text string, refs []Resolved) (*protoSchema, error) {
	srcs := map[string]string{protoRoot: text}
	if err := addProtoRefs(srcs, refs, 0); err != nil {
		return nil, err
	}
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(srcs)}),
		MaxParallelism: 1,
	}
	files, err := c.Compile(context.Background(), protoRoot)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidSchema, oneLine(strings.ReplaceAll(err.Error(), protoRoot+":", "")))
	}
	return &protoSchema{fd: files[0], text: strings.TrimSpace(text)}, nil
}

func addProtoRefs(srcs map[string]string, refs []Resolved, depth int) error {
	if depth > maxRefDepth {
		return fmt.Errorf("%w: references nest deeper than %d", ErrInvalidSchema, maxRefDepth)
	}
	for _, r := range refs {
		if r.Type != TypeProtobuf {
			return fmt.Errorf("%w: reference %q is a %s schema; a Protobuf schema references Protobuf schemas", ErrInvalidSchema, r.Name, r.Type)
		}
		if r.Name == protoRoot {
			return fmt.Errorf("%w: a reference may not be named %q", ErrInvalidSchema, protoRoot)
		}
		srcs[r.Name] = r.Text
		if err := addProtoRefs(srcs, r.Refs, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (p *protoSchema) canonical() string { return p.text }

// recordName is the first message's full name, as Confluent's strategies take it.
func (p *protoSchema) recordName() string {
	if p.fd.Messages().Len() == 0 {
		return ""
	}
	return string(p.fd.Messages().Get(0).FullName())
}

var errProto = errors.New("does not decode")

// MessageIndexes reads Confluent's message indexes at the start of a Protobuf payload
// (after the id): a zigzag varint count, then that many zigzag varint indexes, the
// path to the message from the file's top-level messages; a single 0 is [0], the
// first message. It answers the path and the message's bytes.
func MessageIndexes(b []byte) ([]int, []byte, error) {
	n, off, err := zigzag(b, 0)
	if err != nil {
		return nil, nil, err
	}
	if n == 0 {
		return []int{0}, b[off:], nil
	}
	if n < 0 || n > 64 {
		return nil, nil, fmt.Errorf("%w: %d message indexes", errProto, n)
	}
	path := make([]int, n)
	for i := range path {
		var v int64
		if v, off, err = zigzag(b, off); err != nil {
			return nil, nil, err
		}
		if v < 0 || v > 1<<20 {
			return nil, nil, fmt.Errorf("%w: message index %d", errProto, v)
		}
		path[i] = int(v)
	}
	return path, b[off:], nil
}

// AppendMessageIndexes frames path as MessageIndexes reads it.
func AppendMessageIndexes(dst []byte, path []int) []byte {
	if len(path) == 1 && path[0] == 0 {
		return append(dst, 0)
	}
	dst = protowire.AppendVarint(dst, protowire.EncodeZigZag(int64(len(path))))
	for _, i := range path {
		dst = protowire.AppendVarint(dst, protowire.EncodeZigZag(int64(i)))
	}
	return dst
}

func zigzag(b []byte, off int) (int64, int, error) {
	v, n := protowire.ConsumeVarint(b[off:])
	if n < 0 {
		return 0, off, fmt.Errorf("%w: the message indexes are truncated", errProto)
	}
	return protowire.DecodeZigZag(v), off + n, nil
}

// message finds the message a path of indexes names.
func (p *protoSchema) message(path []int) (protoreflect.MessageDescriptor, error) {
	msgs := p.fd.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range path {
		if i >= msgs.Len() {
			return nil, fmt.Errorf("%w: message index %v names no message of the schema", errProto, path)
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	if md == nil {
		return nil, fmt.Errorf("%w: no message index", errProto)
	}
	return md, nil
}

func (p *protoSchema) validate(payload []byte) error {
	path, body, err := MessageIndexes(payload)
	if err != nil {
		return err
	}
	md, err := p.message(path)
	if err != nil {
		return err
	}
	// Required fields must be set and strings valid UTF-8 (proto3); unknown fields
	// pass, as protobuf readers keep them.
	m := p.pooled(md)
	defer p.pool.Put(m)
	if err := proto.Unmarshal(body, m); err != nil {
		return fmt.Errorf("%w as %s: %v", errProto, md.FullName(), err)
	}
	return nil
}

// reads compares writer (Confluent's original) with p (the update).
func (p *protoSchema) reads(w *protoSchema) []string {
	cx := &protoCompat{seen: map[[2]protoreflect.FullName]bool{}}
	if w.fd.Package() != p.fd.Package() {
		cx.bad("#", fmt.Sprintf("package changed from %q to %q", w.fd.Package(), p.fd.Package()))
	}
	cx.messages("#", w.fd.Messages(), p.fd.Messages())
	return cx.problems
}

type protoCompat struct {
	problems []string
	seen     map[[2]protoreflect.FullName]bool
}

func (cx *protoCompat) bad(path, what string) {
	cx.problems = append(cx.problems, path+": "+what)
}

// messages compares two scopes' messages by name: a removed message breaks (fields of
// its type lose their meaning); an added one, or enums coming and going, do not.
func (cx *protoCompat) messages(path string, orig, upd protoreflect.MessageDescriptors) {
	for i := range orig.Len() {
		om := orig.Get(i)
		if om.IsMapEntry() {
			continue
		}
		um := upd.ByName(om.Name())
		if um == nil {
			cx.bad(path+"/"+string(om.Name()), "message "+string(om.Name())+" removed")
			continue
		}
		cx.message(path+"/"+string(om.Name()), om, um)
	}
}

// realOneof is the field's oneof, not counting proto3 optional's synthetic ones.
func realOneof(f protoreflect.FieldDescriptor) protoreflect.OneofDescriptor {
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return o
	}
	return nil
}

func (cx *protoCompat) message(path string, om, um protoreflect.MessageDescriptor) {
	key := [2]protoreflect.FullName{om.FullName(), um.FullName()}
	if cx.seen[key] {
		return
	}
	cx.seen[key] = true
	of, uf := om.Fields(), um.Fields()
	// Fields moved into a oneof: a oneof of the new schema whose members come from
	// more than one place of the old (top-level fields, or another oneof) makes values
	// exclusive that a writer could set together.
	for i := range um.Oneofs().Len() {
		uo := um.Oneofs().Get(i)
		if uo.IsSynthetic() {
			continue
		}
		origins := map[string]bool{}
		topLevel := 0
		for j := range uo.Fields().Len() {
			o := of.ByNumber(uo.Fields().Get(j).Number())
			switch {
			case o == nil: // a new field
			case realOneof(o) != nil:
				origins["oneof "+string(realOneof(o).Name())] = true
			default:
				origins[fmt.Sprint("field ", o.Number())] = true
				topLevel++
			}
		}
		p := path + "/" + string(uo.Name())
		if len(origins) > 1 {
			if topLevel > 1 {
				cx.bad(p, "several fields moved into oneof "+string(uo.Name()))
			} else {
				cx.bad(p, "a field moved into oneof "+string(uo.Name())+" beside fields of another")
			}
		}
	}
	for i := range of.Len() {
		o := of.Get(i)
		p := fmt.Sprintf("%s/%d", path, o.Number())
		u := uf.ByNumber(o.Number())
		switch {
		case u == nil && realOneof(o) != nil:
			cx.bad(p, "field "+string(o.Name())+" removed from oneof "+string(realOneof(o).Name()))
		case u == nil && o.Cardinality() == protoreflect.Required:
			cx.bad(p, "required field "+string(o.Name())+" removed")
		case u != nil:
			cx.field(p, o, u)
		}
	}
	for i := range uf.Len() {
		u := uf.Get(i)
		if of.ByNumber(u.Number()) == nil && u.Cardinality() == protoreflect.Required {
			cx.bad(fmt.Sprintf("%s/%d", path, u.Number()), "required field "+string(u.Name())+" added")
		}
	}
	cx.messages(path, om.Messages(), um.Messages())
}

// The kinds a field's type falls in, and the wire-compatible groups of scalars.
func fieldKind(f protoreflect.FieldDescriptor) string {
	switch {
	case f.IsMap():
		return "map"
	case f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind:
		return "message"
	}
	return "scalar"
}

func scalarGroup(k protoreflect.Kind) string {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.BoolKind, protoreflect.EnumKind:
		return "general number"
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return "signed number"
	case protoreflect.StringKind, protoreflect.BytesKind:
		return "string or bytes"
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return "fixed32"
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return "fixed64"
	}
	return k.String()
}

// field compares one field number's two fields: a rename is fine; the type must stay
// readable.
func (cx *protoCompat) field(path string, o, u protoreflect.FieldDescriptor) {
	ok, uk := fieldKind(o), fieldKind(u)
	if ok != uk {
		cx.bad(path, fmt.Sprintf("field %s changed kind from %s to %s", o.Name(), ok, uk))
		return
	}
	switch ok {
	case "scalar":
		g, h := scalarGroup(o.Kind()), scalarGroup(u.Kind())
		if g != h {
			cx.bad(path, fmt.Sprintf("field %s changed type from %s to %s", o.Name(), o.Kind(), u.Kind()))
			return
		}
		// A number's label (optional, required, repeated, where both spell one) may
		// not change: packed and unpacked encodings differ. Strings and bytes may.
		if ol, ul := label(o), label(u); ol != "" && ul != "" && ol != ul && g != "string or bytes" {
			cx.bad(path, fmt.Sprintf("field %s changed label from %s to %s", o.Name(), ol, ul))
		}
	case "map":
		cx.field(path+"/key", o.MapKey(), u.MapKey())
		cx.field(path+"/value", o.MapValue(), u.MapValue())
	case "message":
		om, um := o.Message(), u.Message()
		if localName(om) != localName(um) {
			cx.bad(path, fmt.Sprintf("field %s changed type from %s to %s", o.Name(), localName(om), localName(um)))
			return
		}
		before := len(cx.problems)
		cx.message(path, om, um)
		if len(cx.problems) > before {
			cx.bad(path, fmt.Sprintf("field %s's type %s changed incompatibly", o.Name(), localName(om)))
		}
	}
}

// label is the label a field's declaration spells: repeated, required, optional (an
// explicit proto3 optional, or proto2's), or "" (proto3's implicit presence, a oneof
// member, a map field's key and value).
func label(f protoreflect.FieldDescriptor) string {
	switch {
	case f.Cardinality() == protoreflect.Repeated:
		return "repeated"
	case f.Cardinality() == protoreflect.Required:
		return "required"
	case realOneof(f) != nil || f.ContainingMessage().IsMapEntry():
		return ""
	case f.HasOptionalKeyword() || f.ParentFile().Syntax() == protoreflect.Proto2:
		return "optional"
	}
	return ""
}

// localName is a message's full name without its file's package.
func localName(m protoreflect.MessageDescriptor) string {
	full, pkg := string(m.FullName()), string(m.ParentFile().Package())
	if pkg != "" {
		return strings.TrimPrefix(full, pkg+".")
	}
	return full
}
