package serde

import (
	"bytes"
	"testing"
)

type sale struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

func TestKnownEncodings(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  func() ([]byte, error)
		want []byte
	}{
		{"string", func() ([]byte, error) { return String.Encode("sku-1") }, []byte("sku-1")},
		{"int64 1", func() ([]byte, error) { return Int64.Encode(1) }, []byte{0, 0, 0, 0, 0, 0, 0, 1}},
		{"int64 -1", func() ([]byte, error) { return Int64.Encode(-1) }, bytes.Repeat([]byte{0xff}, 8)},
		{"json", func() ([]byte, error) { return JSON[sale]().Encode(sale{"a", 2}) }, []byte(`{"sku":"a","qty":2}`)},
		{"bytes", func() ([]byte, error) { return Bytes.Encode([]byte{0, 1}) }, []byte{0, 1}},
	} {
		got, err := tc.got()
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestDecodeRefusesPoison(t *testing.T) {
	if _, err := String.Decode([]byte{0xff, 0xfe}); err == nil {
		t.Error("string: invalid UTF-8 decoded")
	}
	if _, err := String.Encode("\xff"); err == nil {
		t.Error("string: invalid UTF-8 encoded")
	}
	if _, err := Int64.Decode([]byte{1, 2, 3}); err == nil {
		t.Error("int64: 3 bytes decoded")
	}
	for _, b := range []string{`{"sku":1}`, `{"sku":"a"} x`, `[`, ``} {
		if _, err := JSON[sale]().Decode([]byte(b)); err == nil {
			t.Errorf("json: %q decoded", b)
		}
	}
	if v, err := JSON[sale]().Decode([]byte(`{"sku":"a","qty":3}`)); err != nil || v != (sale{"a", 3}) {
		t.Errorf("json: %v %v", v, err)
	}
}

// Every decoder either refuses its input or decodes a value that encodes back to
// bytes that decode to the same value.
func FuzzDecoders(f *testing.F) {
	for _, s := range [][]byte{nil, []byte("x"), {0, 0, 0, 0, 0, 0, 0, 9}, []byte(`{"sku":"a","qty":1}`), {0xff}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := String.Decode(b); err == nil {
			if e, err := String.Encode(s); err != nil || !bytes.Equal(e, b) {
				t.Fatalf("string round trip of %q: %q %v", b, e, err)
			}
		}
		if n, err := Int64.Decode(b); err == nil {
			if e, _ := Int64.Encode(n); !bytes.Equal(e, b) {
				t.Fatalf("int64 round trip of %x: %x", b, e)
			}
		}
		if v, err := JSON[sale]().Decode(b); err == nil {
			e, err := JSON[sale]().Encode(v)
			if err != nil {
				t.Fatal(err)
			}
			if v2, err := JSON[sale]().Decode(e); err != nil || v2 != v {
				t.Fatalf("json round trip of %q: %v %v", b, v2, err)
			}
		}
	})
}
