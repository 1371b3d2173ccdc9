package storetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/strata-io/strata/streams/store"
)

// OpenKV opens one empty store as a KV. flush (nil: nothing to do) makes what was
// written so far committed the way its runtime does — for a task, a confirmed commit
// applied to the local store — so that the suite reads across both sides of it.
type OpenKV func(t *testing.T) (kv store.KV, flush func())

// RunKV is the conformance suite of a KV: what the window and session layouts rely
// on, run with a flush between every step and without any.
func RunKV(t *testing.T, open OpenKV) {
	for _, flushing := range []bool{false, true} {
		t.Run(fmt.Sprintf("flush=%v", flushing), func(t *testing.T) {
			kv, flush := open(t)
			step := func() {
				if flushing && flush != nil {
					flush()
				}
			}
			must(t, kv.Put([]byte("b"), []byte("1")))
			must(t, kv.Put([]byte("a"), []byte("0")))
			step()
			must(t, kv.Put([]byte("c"), []byte("2")))
			must(t, kv.Put([]byte("b"), []byte("1b"))) // overwrite, maybe of a committed value
			must(t, kv.Delete([]byte("a")))
			must(t, kv.Delete([]byte("never")))
			if got := kvRange(t, kv, nil, nil); got != "b=1b;c=2;" {
				t.Errorf("range = %q", got)
			}
			step()
			must(t, kv.Put([]byte("a"), []byte("back")))
			must(t, kv.Put([]byte("bb"), []byte("3")))
			for _, tc := range []struct {
				lo, hi string
				want   string
			}{
				{"", "", "a=back;b=1b;bb=3;c=2;"},
				{"b", "c", "b=1b;bb=3;"},
				{"b\x00", "", "bb=3;c=2;"},
				{"d", "", ""},
			} {
				var lo, hi []byte
				if tc.lo != "" {
					lo = []byte(tc.lo)
				}
				if tc.hi != "" {
					hi = []byte(tc.hi)
				}
				if got := kvRange(t, kv, lo, hi); got != tc.want {
					t.Errorf("range [%q,%q) = %q, want %q", tc.lo, tc.hi, got, tc.want)
				}
			}
			n := 0
			must(t, kv.Range(nil, nil, func(k, v []byte) bool { n++; return n < 3 }))
			if n != 3 {
				t.Errorf("range went on after fn returned false: %d calls", n)
			}
			step()
			if v, ok, err := kv.Get([]byte("a")); err != nil || !ok || string(v) != "back" {
				t.Errorf("get a = %q %v %v", v, ok, err)
			}
			if _, ok, _ := kv.Get([]byte("never")); ok {
				t.Error("a key never written was found")
			}
		})
	}
}

func kvRange(t *testing.T, kv store.KV, lo, hi []byte) string {
	t.Helper()
	var b strings.Builder
	must(t, kv.Range(lo, hi, func(k, v []byte) bool {
		fmt.Fprintf(&b, "%s=%s;", k, v)
		return true
	}))
	return b.String()
}

// RunTimed is the conformance suite of the window and session layout over a KV.
func RunTimed(t *testing.T, open OpenKV) {
	t.Run("FetchByKeyAndTime", func(t *testing.T) { testTimedFetch(t, open) })
	t.Run("AppendKeepsDuplicates", func(t *testing.T) { testTimedAppend(t, open) })
	t.Run("IndexByTime", func(t *testing.T) { testTimedIndex(t, open) })
	t.Run("DeleteBoth", func(t *testing.T) { testTimedDelete(t, open) })
	t.Run("Meta", func(t *testing.T) { testTimedMeta(t, open) })
}

func fetched(t *testing.T, s store.Timed, key string, from, to int64) string {
	t.Helper()
	var b strings.Builder
	must(t, s.Fetch([]byte(key), from, to, func(tm, n int64, v []byte) bool {
		fmt.Fprintf(&b, "%d/%d=%s;", tm, n, v)
		return true
	}))
	return b.String()
}

func indexed(t *testing.T, s store.Timed, from, to int64) string {
	t.Helper()
	var b strings.Builder
	must(t, s.Indexed(from, to, func(key []byte, tm, n int64) bool {
		fmt.Fprintf(&b, "%s@%d/%d;", key, tm, n)
		return true
	}))
	return b.String()
}

// Keys that are prefixes of each other ("a", "a\x00", "ab") never see each other's
// entries; negative times sort before positive ones; both bounds are inclusive.
func testTimedFetch(t *testing.T, open OpenKV) {
	kv, flush := open(t)
	s := store.NewTimed(kv)
	for _, e := range []struct {
		key string
		tm  int64
	}{{"a", 10}, {"a", -5}, {"a", 20}, {"a\x00", 10}, {"ab", 15}, {"", 10}} {
		must(t, s.Put([]byte(e.key), e.tm, 0, []byte(fmt.Sprintf("%s%d", e.key, e.tm))))
	}
	if flush != nil {
		flush()
	}
	must(t, s.Put([]byte("a"), 30, 0, []byte("a30")))
	must(t, s.Put([]byte("a"), 10, 0, []byte("a10'"))) // replaces
	for _, tc := range []struct {
		key      string
		from, to int64
		want     string
	}{
		{"a", -1 << 63, 1<<63 - 1, "-5/0=a-5;10/0=a10';20/0=a20;30/0=a30;"},
		{"a", 10, 20, "10/0=a10';20/0=a20;"},
		{"a", 11, 19, ""},
		{"a", 20, 10, ""},
		{"a\x00", -1 << 63, 1<<63 - 1, "10/0=a\x0010;"},
		{"ab", 0, 100, "15/0=ab15;"},
		{"", 0, 100, "10/0=10;"},
	} {
		if got := fetched(t, s, tc.key, tc.from, tc.to); got != tc.want {
			t.Errorf("fetch %q [%d,%d] = %q, want %q", tc.key, tc.from, tc.to, got, tc.want)
		}
	}
	if v, ok, err := s.Get([]byte("ab"), 15, 0); err != nil || !ok || string(v) != "ab15" {
		t.Errorf("get ab@15 = %q %v %v", v, ok, err)
	}
	if _, ok, _ := s.Get([]byte("ab"), 15, 1); ok {
		t.Error("get ab@15/1 found")
	}
}

func testTimedAppend(t *testing.T, open OpenKV) {
	kv, flush := open(t)
	s := store.NewTimed(kv)
	for i, v := range []string{"x", "y"} {
		n, err := s.Append([]byte("k"), 7, []byte(v))
		must(t, err)
		if n != int64(i) {
			t.Errorf("append %s got n=%d, want %d", v, n, i)
		}
	}
	if flush != nil {
		flush()
	}
	if n, err := s.Append([]byte("k"), 7, []byte("z")); err != nil || n != 2 {
		t.Errorf("append after a commit got n=%d %v, want 2 (the next free one)", n, err)
	}
	if n, err := s.Append([]byte("k"), 8, []byte("w")); err != nil || n != 0 {
		t.Errorf("append at another time got n=%d %v, want 0", n, err)
	}
	must(t, s.Delete([]byte("k"), 7, 0))
	if got := fetched(t, s, "k", 0, 10); got != "7/1=y;7/2=z;8/0=w;" {
		t.Errorf("fetch = %q", got)
	}
	if n, _ := s.Append([]byte("k"), 7, []byte("v")); n != 3 {
		t.Errorf("append after deleting n=0 got n=%d, want 3 (after the largest)", n)
	}
}

func testTimedIndex(t *testing.T, open OpenKV) {
	kv, flush := open(t)
	s := store.NewTimed(kv)
	must(t, s.Put([]byte("b"), 5, 0, []byte("1")))
	must(t, s.Put([]byte("a"), 5, 1, []byte("2")))
	must(t, s.Put([]byte("a"), -3, 0, []byte("3")))
	if flush != nil {
		flush()
	}
	must(t, s.Put([]byte("c"), 9, 0, []byte("4")))
	must(t, s.Put([]byte("b"), 5, 0, []byte("1'"))) // an update is not indexed twice
	if got := indexed(t, s, -1<<63, 1<<63-1); got != "a@-3/0;a@5/1;b@5/0;c@9/0;" {
		t.Errorf("index = %q", got)
	}
	if got := indexed(t, s, 5, 9); got != "a@5/1;b@5/0;" {
		t.Errorf("index [5,9) = %q", got)
	}
	refs, err := s.Before(6, 2)
	must(t, err)
	if len(refs) != 2 || string(refs[0].Key) != "a" || refs[0].Time != -3 || refs[1].N != 1 {
		t.Errorf("before 6, at most 2 = %+v", refs)
	}
	all, err := s.Before(6, 0)
	must(t, err)
	if len(all) != 3 {
		t.Errorf("before 6 = %+v, want 3", all)
	}
	// Metadata and entries never show up in the index.
	must(t, s.SetMeta("time", []byte("x")))
	if got := indexed(t, s, -1<<63, 1<<63-1); strings.Count(got, ";") != 4 {
		t.Errorf("index with metadata = %q", got)
	}
}

func testTimedDelete(t *testing.T, open OpenKV) {
	kv, flush := open(t)
	s := store.NewTimed(kv)
	must(t, s.Put([]byte("k"), 1, 0, []byte("a")))
	must(t, s.Put([]byte("k"), 2, 0, []byte("b")))
	if flush != nil {
		flush()
	}
	must(t, s.Delete([]byte("k"), 1, 0))
	must(t, s.Delete([]byte("k"), 3, 0)) // absent: nothing
	if got := fetched(t, s, "k", 0, 10); got != "2/0=b;" {
		t.Errorf("fetch after delete = %q", got)
	}
	if got := indexed(t, s, 0, 10); got != "k@2/0;" {
		t.Errorf("index after delete = %q", got)
	}
	if flush != nil {
		flush()
	}
	if got := kvRange(t, kv, nil, nil); strings.Count(got, ";") != 2 {
		t.Errorf("store holds %q: want one entry and its index entry", got)
	}
}

func testTimedMeta(t *testing.T, open OpenKV) {
	kv, flush := open(t)
	s := store.NewTimed(kv)
	if _, ok, err := s.Meta("time"); err != nil || ok {
		t.Errorf("fresh meta found %v %v", ok, err)
	}
	must(t, s.SetMeta("time", []byte{1}))
	if flush != nil {
		flush()
	}
	must(t, s.SetMeta("time", []byte{2}))
	if v, ok, err := s.Meta("time"); err != nil || !ok || v[0] != 2 {
		t.Errorf("meta = %v %v %v", v, ok, err)
	}
	if got := fetched(t, s, "time", -1<<63, 1<<63-1); got != "" {
		t.Errorf("metadata seen as entries: %q", got)
	}
}
