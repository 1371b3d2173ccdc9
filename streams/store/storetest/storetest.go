// Package storetest is the conformance suite every store.DB implementation passes.
package storetest

import (
	"bytes"
	"fmt"
	"maps"
	"testing"

	"github.com/strata-io/strata/streams/store"
)

// Open opens the DB kept in dir (the same dir again after Close reopens it).
type Open func(t *testing.T, dir string) store.DB

// Run runs the suite. persistent says the DB keeps its state across Close and Open.
func Run(t *testing.T, open Open, persistent bool) {
	t.Run("GetAndRange", func(t *testing.T) { testGetRange(t, open(t, t.TempDir())) })
	t.Run("StoresIsolated", func(t *testing.T) { testIsolated(t, open(t, t.TempDir())) })
	t.Run("ApplyInOrder", func(t *testing.T) { testApplyOrder(t, open(t, t.TempDir())) })
	t.Run("Checkpoints", func(t *testing.T) { testCheckpoints(t, open(t, t.TempDir())) })
	t.Run("Wipe", func(t *testing.T) { testWipe(t, open(t, t.TempDir())) })
	t.Run("Closed", func(t *testing.T) { testClosed(t, open(t, t.TempDir())) })
	t.Run("LargeRange", func(t *testing.T) { testLargeRange(t, open(t, t.TempDir())) })
	if persistent {
		t.Run("Reopen", func(t *testing.T) { testReopen(t, open) })
	}
}

func put(s, k, v string) store.Write { return store.Write{Store: s, Key: []byte(k), Value: []byte(v)} }
func del(s, k string) store.Write    { return store.Write{Store: s, Key: []byte(k), Delete: true} }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, db store.DB, s, k string) (string, bool) {
	t.Helper()
	v, ok, err := db.Get(s, []byte(k))
	must(t, err)
	return string(v), ok
}

func rangeOf(t *testing.T, db store.DB, s string, lo, hi []byte) string {
	t.Helper()
	var b bytes.Buffer
	must(t, db.Range(s, lo, hi, func(k, v []byte) bool {
		fmt.Fprintf(&b, "%s=%s;", k, v)
		return true
	}))
	return b.String()
}

func testGetRange(t *testing.T, db store.DB) {
	defer db.Close()
	must(t, db.Apply([]store.Write{put("s", "b", "2"), put("s", "a", "1"), put("s", "c", "3"), put("s", "\xff", "x"), put("s", "", "empty")}, nil))
	if v, ok := get(t, db, "s", "a"); !ok || v != "1" {
		t.Errorf("get a = %q %v", v, ok)
	}
	if _, ok := get(t, db, "s", "z"); ok {
		t.Error("get z found")
	}
	if v, ok := get(t, db, "s", ""); !ok || v != "empty" {
		t.Errorf("empty key = %q %v", v, ok)
	}
	for _, tc := range []struct {
		lo, hi []byte
		want   string
	}{
		{nil, nil, "=empty;a=1;b=2;c=3;\xff=x;"},
		{[]byte("b"), nil, "b=2;c=3;\xff=x;"},
		{[]byte("a"), []byte("c"), "a=1;b=2;"},
		{[]byte("c"), []byte("c"), ""},
	} {
		if got := rangeOf(t, db, "s", tc.lo, tc.hi); got != tc.want {
			t.Errorf("range [%q,%q) = %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
	n := 0
	must(t, db.Range("s", nil, nil, func(k, v []byte) bool { n++; return n < 2 }))
	if n != 2 {
		t.Errorf("range went on after fn returned false: %d calls", n)
	}
}

// Store "a" with key "bc" and store "ab" with key "c" must not meet.
func testIsolated(t *testing.T, db store.DB) {
	defer db.Close()
	must(t, db.Apply([]store.Write{put("a", "bc", "1"), put("ab", "c", "2")}, map[string]int64{"a": 1, "ab": 2}))
	if got := rangeOf(t, db, "a", nil, nil); got != "bc=1;" {
		t.Errorf("store a = %q", got)
	}
	if got := rangeOf(t, db, "ab", nil, nil); got != "c=2;" {
		t.Errorf("store ab = %q", got)
	}
	if _, ok := get(t, db, "a", "b"); ok {
		t.Error("a/b found")
	}
}

func testApplyOrder(t *testing.T, db store.DB) {
	defer db.Close()
	must(t, db.Apply([]store.Write{put("s", "k", "1"), put("s", "k", "2"), put("s", "gone", "x"), del("s", "gone"), del("s", "never")}, nil))
	if v, _ := get(t, db, "s", "k"); v != "2" {
		t.Errorf("k = %q, want the later write", v)
	}
	if _, ok := get(t, db, "s", "gone"); ok {
		t.Error("deleted key found")
	}
	must(t, db.Apply([]store.Write{del("s", "k"), put("s", "k", "3")}, nil))
	if v, _ := get(t, db, "s", "k"); v != "3" {
		t.Errorf("k = %q after delete then put", v)
	}
}

func testCheckpoints(t *testing.T, db store.DB) {
	defer db.Close()
	cp, err := db.Checkpoints()
	must(t, err)
	if len(cp) != 0 {
		t.Errorf("fresh checkpoints %v", cp)
	}
	must(t, db.Apply([]store.Write{put("s", "k", "v")}, map[string]int64{"s": 41, "w": 0}))
	must(t, db.Apply(nil, map[string]int64{"s": 42}))
	cp, err = db.Checkpoints()
	must(t, err)
	if want := map[string]int64{"s": 42, "w": 0}; !maps.Equal(cp, want) {
		t.Errorf("checkpoints %v, want %v", cp, want)
	}
}

func testWipe(t *testing.T, db store.DB) {
	defer db.Close()
	must(t, db.Apply([]store.Write{put("s", "a", "1"), put("s", "b", "2"), put("t", "a", "3")}, map[string]int64{"s": 5, "t": 6}))
	must(t, db.Wipe("s"))
	if got := rangeOf(t, db, "s", nil, nil); got != "" {
		t.Errorf("wiped store holds %q", got)
	}
	if got := rangeOf(t, db, "t", nil, nil); got != "a=3;" {
		t.Errorf("other store = %q", got)
	}
	cp, err := db.Checkpoints()
	must(t, err)
	if want := map[string]int64{"t": 6}; !maps.Equal(cp, want) {
		t.Errorf("checkpoints after wipe %v", cp)
	}
}

func testClosed(t *testing.T, db store.DB) {
	must(t, db.Close())
	if _, _, err := db.Get("s", []byte("k")); err == nil {
		t.Error("get after close")
	}
	if err := db.Apply([]store.Write{put("s", "k", "v")}, nil); err == nil {
		t.Error("apply after close")
	}
}

func testReopen(t *testing.T, open Open) {
	dir := t.TempDir()
	db := open(t, dir)
	must(t, db.Apply([]store.Write{put("s", "k", "v"), put("s", "x", "y"), del("s", "x")}, map[string]int64{"s": 7}))
	must(t, db.Close())
	db = open(t, dir)
	defer db.Close()
	if v, ok := get(t, db, "s", "k"); !ok || v != "v" {
		t.Errorf("after reopen k = %q %v", v, ok)
	}
	if _, ok := get(t, db, "s", "x"); ok {
		t.Error("deleted key back after reopen")
	}
	cp, err := db.Checkpoints()
	must(t, err)
	if cp["s"] != 7 {
		t.Errorf("checkpoint after reopen %v", cp)
	}
}

// A range over more entries than any internal chunk sees them all, in order, and may
// read the DB from fn.
func testLargeRange(t *testing.T, db store.DB) {
	defer db.Close()
	var ws []store.Write
	for i := range 1000 {
		ws = append(ws, put("s", fmt.Sprintf("k%04d", i), fmt.Sprint(i)))
	}
	must(t, db.Apply(ws, nil))
	n := 0
	must(t, db.Range("s", []byte("k0100"), nil, func(k, v []byte) bool {
		if want := fmt.Sprintf("k%04d", 100+n); string(k) != want {
			t.Fatalf("entry %d is %s, want %s", n, k, want)
		}
		if _, ok, err := db.Get("s", k); err != nil || !ok {
			t.Fatalf("get inside range: %v %v", ok, err)
		}
		n++
		return true
	}))
	if n != 900 {
		t.Errorf("range saw %d entries, want 900", n)
	}
}
