// Package objstoretest is the conformance suite every objstore.Store implementation
// runs, so the filesystem store of the embedded mode and S3 behave alike.
package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/strata-io/strata/internal/crc32c"
	"github.com/strata-io/strata/objstore"
)

// ListObjects is how many objects the listing test creates: more than the 1,000 keys an
// S3 ListObjectsV2 page holds, so an implementation that forgets to page fails.
const ListObjects = 1100

// Run runs the suite. newStore must return an empty store of its own (a fresh directory,
// bucket or prefix) on every call: subtests run in parallel and list what they put.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store, opts ...Option) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.readBack != nil {
		t.Run("ReadBack", func(t *testing.T) {
			t.Parallel()
			testReadBack(t, newStore(t), *o.readBack)
		})
	}
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"PutGet", testPutGet},
		{"CreateOnly", testCreateOnly},
		{"PutParts", testPutParts},
		{"PutPartsCRC32C", testPutPartsCRC32C},
		{"GetRange", testGetRange},
		{"Missing", testMissing},
		{"Delete", testDelete},
		{"InvalidKeys", testInvalidKeys},
		{"List", testList},
		{"ListOrder", testListOrder},
		{"ConcurrentPuts", testConcurrentPuts},
		{"Cancelled", testCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// pattern returns n bytes covering every byte value, different for each seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + byte(i>>8) + seed
	}
	return b
}

func mustPut(t *testing.T, s objstore.Store, key string, body []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, body); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", key, len(body), err)
	}
}

func testPutGet(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	for _, tc := range []struct {
		key  string
		body []byte
	}{
		{"plain", []byte("hello, strata")},
		{"nested/dir/object.seg", pattern(4096, 1)},
		{"empty", []byte{}},
		{"big/3MiB", pattern(3<<20+17, 2)},
	} {
		mustPut(t, s, tc.key, tc.body)
		got, err := s.Get(ctx, tc.key)
		if err != nil {
			t.Fatalf("Get(%q): %v", tc.key, err)
		}
		if !bytes.Equal(got, tc.body) {
			t.Errorf("Get(%q) = %d bytes, want the %d put", tc.key, len(got), len(tc.body))
		}
		info, err := s.Head(ctx, tc.key)
		if err != nil {
			t.Fatalf("Head(%q): %v", tc.key, err)
		}
		if info.Key != tc.key || info.Size != int64(len(tc.body)) {
			t.Errorf("Head(%q) = key %q size %d, want size %d", tc.key, info.Key, info.Size, len(tc.body))
		}
		if info.Modified.IsZero() {
			t.Errorf("Head(%q): zero modification time", tc.key)
		}
	}
}

func testCreateOnly(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	first := []byte("first content")
	mustPut(t, s, "k", first)
	// An identical re-put is what an SDK retry of a put that succeeded looks like.
	if err := s.Put(ctx, "k", first); err != nil {
		t.Errorf("identical re-put: %v, want nil", err)
	}
	for _, other := range [][]byte{
		[]byte("other content"), // same size, different bytes
		[]byte("first content, longer"),
		[]byte("first"),
		{},
	} {
		err := s.Put(ctx, "k", other)
		if !errors.Is(err, objstore.ErrExists) {
			t.Errorf("put of %q over existing key: %v, want ErrExists", other, err)
		}
	}
	got, err := s.Get(ctx, "k")
	if err != nil || !bytes.Equal(got, first) {
		t.Errorf("after refused puts Get = %q, %v; want %q", got, err, first)
	}
	// An empty object is create-only too.
	mustPut(t, s, "e", nil)
	if err := s.Put(ctx, "e", []byte{}); err != nil {
		t.Errorf("identical re-put of empty object: %v", err)
	}
	if err := s.Put(ctx, "e", []byte("x")); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("put over empty object: %v, want ErrExists", err)
	}
}

// testPutParts: an object put as parts is the parts laid end to end, create-only like
// any put (a re-put of the same bytes, in parts cut elsewhere or whole, is a retry).
func testPutParts(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	body := pattern(3<<20+5, 4)
	parts := [][]byte{body[:16], body[16 : 1<<20], {}, body[1<<20 : 1<<20+1], body[1<<20+1:]}
	if err := s.PutParts(ctx, "p", parts); err != nil {
		t.Fatalf("PutParts: %v", err)
	}
	got, err := s.Get(ctx, "p")
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("Get after PutParts = %d bytes, %v; want the %d put", len(got), err, len(body))
	}
	if err := s.PutParts(ctx, "p", [][]byte{body[:100], body[100:]}); err != nil {
		t.Errorf("identical re-put in other parts: %v, want nil", err)
	}
	if err := s.Put(ctx, "p", body); err != nil {
		t.Errorf("identical re-put whole: %v, want nil", err)
	}
	other := bytes.Clone(body)
	other[len(other)-1] ^= 1
	if err := s.PutParts(ctx, "p", [][]byte{other[:10], other[10:]}); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("parts of other content over the key: %v, want ErrExists", err)
	}
	if err := s.PutParts(ctx, "none", nil); err != nil {
		t.Errorf("PutParts of no parts (an empty object): %v", err)
	}
	if got, err := s.Get(ctx, "none"); err != nil || len(got) != 0 {
		t.Errorf("the empty object: %d bytes, %v", len(got), err)
	}
}

// testPutPartsCRC32C: parts put with their CRC-32C are stored; parts whose bytes do not
// match the CRC given (changed since it was made) are refused with ErrChecksum and leave
// nothing under the key — checked by the store itself when it takes the checksum (S3
// verifies it against the bytes it receives), by objstore.PutPartsCRC32C otherwise.
func testPutPartsCRC32C(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	body := pattern(1<<20+7, 5)
	parts := [][]byte{body[:21], body[21:]}
	crc := crc32c.Checksum(body)
	if err := objstore.PutPartsCRC32C(ctx, s, "good", parts, crc); err != nil {
		t.Fatalf("PutPartsCRC32C with the parts' CRC: %v", err)
	}
	if got, err := s.Get(ctx, "good"); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("Get = %d bytes, %v; want the %d put", len(got), err, len(body))
	}
	changed := bytes.Clone(body)
	changed[len(changed)/2] ^= 1
	err := objstore.PutPartsCRC32C(ctx, s, "changed", [][]byte{changed[:21], changed[21:]}, crc)
	if !errors.Is(err, objstore.ErrChecksum) {
		t.Fatalf("PutPartsCRC32C of changed bytes: %v, want ErrChecksum", err)
	}
	if _, err := s.Get(ctx, "changed"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("after the refused put, Get = %v, want ErrNotExist", err)
	}
}

func testGetRange(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	body := pattern(1000, 3)
	mustPut(t, s, "r", body)
	mustPut(t, s, "empty", nil)
	for _, tc := range []struct {
		name    string
		key     string
		off, n  int64
		wantErr error // nil: want body[off:off+n]
	}{
		{"first byte", "r", 0, 1, nil},
		{"last byte", "r", 999, 1, nil},
		{"middle", "r", 300, 200, nil},
		{"whole", "r", 0, 1000, nil},
		{"tail", "r", 990, 10, nil},
		{"zero length at start", "r", 0, 0, nil},
		{"zero length inside", "r", 500, 0, nil},
		{"zero length at end", "r", 1000, 0, nil},
		{"zero length of empty object", "empty", 0, 0, nil},
		{"past the end", "r", 999, 2, objstore.ErrRange},
		{"starts at the end", "r", 1000, 1, objstore.ErrRange},
		{"starts past the end", "r", 1500, 10, objstore.ErrRange},
		{"zero length past the end", "r", 1001, 0, objstore.ErrRange},
		{"longer than object", "r", 0, 1001, objstore.ErrRange},
		{"negative offset", "r", -1, 10, objstore.ErrRange},
		{"negative length", "r", 10, -1, objstore.ErrRange},
		{"byte of empty object", "empty", 0, 1, objstore.ErrRange},
	} {
		got, err := s.GetRange(ctx, tc.key, tc.off, tc.n)
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s: GetRange(%q, %d, %d) = %d bytes, %v; want %v", tc.name, tc.key, tc.off, tc.n, len(got), err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: GetRange(%q, %d, %d): %v", tc.name, tc.key, tc.off, tc.n, err)
			continue
		}
		want := body[tc.off : tc.off+tc.n]
		if tc.key == "empty" {
			want = nil
		}
		if int64(len(got)) != tc.n || !bytes.Equal(got, want) {
			t.Errorf("%s: GetRange(%q, %d, %d) = %d bytes %x…, want %d bytes", tc.name, tc.key, tc.off, tc.n, len(got), got[:min(len(got), 8)], tc.n)
		}
	}
}

func testMissing(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	mustPut(t, s, "present/x", []byte("x"))
	for _, key := range []string{"absent", "present/absent", "present", "absent/deeper/key"} {
		if _, err := s.Get(ctx, key); !errors.Is(err, objstore.ErrNotExist) {
			t.Errorf("Get(%q) = %v, want ErrNotExist", key, err)
		}
		if _, err := s.GetRange(ctx, key, 0, 1); !errors.Is(err, objstore.ErrNotExist) {
			t.Errorf("GetRange(%q, 0, 1) = %v, want ErrNotExist", key, err)
		}
		if _, err := s.GetRange(ctx, key, 0, 0); !errors.Is(err, objstore.ErrNotExist) {
			t.Errorf("GetRange(%q, 0, 0) = %v, want ErrNotExist", key, err)
		}
		if _, err := s.Head(ctx, key); !errors.Is(err, objstore.ErrNotExist) {
			t.Errorf("Head(%q) = %v, want ErrNotExist", key, err)
		}
		if err := s.Delete(ctx, key); err != nil {
			t.Errorf("Delete(%q) of a missing key = %v, want nil", key, err)
		}
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	mustPut(t, s, "d/1", []byte("one"))
	mustPut(t, s, "d/2", []byte("two"))
	for range 2 { // idempotent
		if err := s.Delete(ctx, "d/1"); err != nil {
			t.Fatalf("Delete(d/1): %v", err)
		}
	}
	if _, err := s.Head(ctx, "d/1"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("Head after Delete = %v, want ErrNotExist", err)
	}
	if got, err := s.Get(ctx, "d/2"); err != nil || string(got) != "two" {
		t.Errorf("neighbour after Delete: %q, %v", got, err)
	}
	// A deleted key can be created again, with any content.
	mustPut(t, s, "d/1", []byte("new"))
	if got, err := s.Get(ctx, "d/1"); err != nil || string(got) != "new" {
		t.Errorf("re-created key: %q, %v", got, err)
	}
	mustPut(t, s, "solo/deep/key", []byte("s"))
	if err := s.Delete(ctx, "solo/deep/key"); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "solo/deep/key", []byte("s2"))
	var keys []string
	if err := s.List(ctx, "", func(i objstore.Info) error { keys = append(keys, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"d/1", "d/2", "solo/deep/key"}; !slices.Equal(keys, want) {
		t.Errorf("List after deletes = %q, want %q", keys, want)
	}
}

func testInvalidKeys(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	for _, key := range []string{"", "/abs", "a//b", "trailing/", "../up", "a/../b", "./a", "a/.", `back\slash`, "nul\x00byte"} {
		if err := s.Put(ctx, key, []byte("x")); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := s.Get(ctx, key); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	var n int
	if err := s.List(ctx, "", func(objstore.Info) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("after refused puts List found %d objects, %v; want none", n, err)
	}
}

// putAll puts keys with a few workers: the listing test needs more than a page of
// objects and one at a time would be slow against a real store.
func putAll(t *testing.T, s objstore.Store, keys []string, body func(i int) []byte) {
	t.Helper()
	const workers = 16
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan int)
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := s.Put(t.Context(), keys[i], body(i)); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("putting %d keys: %v", len(keys), err)
	}
}

func list(t *testing.T, s objstore.Store, prefix string) []objstore.Info {
	t.Helper()
	var got []objstore.Info
	if err := s.List(t.Context(), prefix, func(i objstore.Info) error {
		got = append(got, i)
		return nil
	}); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return got
}

func testList(t *testing.T, s objstore.Store) {
	keys := make([]string, ListObjects)
	for i := range keys {
		keys[i] = fmt.Sprintf("seg/%05d", i)
	}
	// Neighbours that share the string prefix "seg" but not "seg/".
	keys = append(keys, "seg-other", "segment", "sef", "seh/1")
	size := func(i int) []byte { return pattern(i%13, byte(i)) }
	putAll(t, s, keys, size)

	got := list(t, s, "seg/")
	if len(got) != ListObjects {
		t.Fatalf("List(seg/) found %d objects, want %d", len(got), ListObjects)
	}
	for i, info := range got {
		if want := fmt.Sprintf("seg/%05d", i); info.Key != want || info.Size != int64(i%13) {
			t.Fatalf("List(seg/)[%d] = %q size %d, want %q size %d", i, info.Key, info.Size, want, i%13)
		}
		if info.Modified.IsZero() {
			t.Fatalf("List(seg/)[%d]: zero modification time", i)
		}
	}

	for _, tc := range []struct {
		prefix string
		want   int
		first  string
		last   string
	}{
		{"seg/010", 100, "seg/01000", "seg/01099"},
		{"seg/0000", 10, "seg/00000", "seg/00009"},
		{"seg/01099", 1, "seg/01099", "seg/01099"},
		{"seg", ListObjects + 2, "seg-other", "segment"},
		{"", ListObjects + 4, "sef", "seh/1"},
		{"se", ListObjects + 4, "sef", "seh/1"},
		{"seg/1", 0, "", ""},
		{"nothing", 0, "", ""},
		{"seg/01099/", 0, "", ""},
	} {
		got := list(t, s, tc.prefix)
		if len(got) != tc.want {
			t.Errorf("List(%q) found %d objects, want %d", tc.prefix, len(got), tc.want)
			continue
		}
		if tc.want > 0 && (got[0].Key != tc.first || got[len(got)-1].Key != tc.last) {
			t.Errorf("List(%q) runs %q … %q, want %q … %q", tc.prefix, got[0].Key, got[len(got)-1].Key, tc.first, tc.last)
		}
		if !slices.IsSortedFunc(got, func(a, b objstore.Info) int { return compare(a.Key, b.Key) }) {
			t.Errorf("List(%q) is not in lexical order", tc.prefix)
		}
	}

	// An error from fn stops the listing and comes back.
	stop := errors.New("stop here")
	calls := 0
	err := s.List(t.Context(), "seg/", func(objstore.Info) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 3 {
		t.Errorf("List with fn failing on call 3: %d calls, %v; want 3 calls and the error", calls, err)
	}
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// testListOrder checks byte-wise order where a directory walk would go wrong: '-' (0x2d)
// sorts before '/' (0x2f) and '0' (0x30) after it.
func testListOrder(t *testing.T, s objstore.Store) {
	want := []string{"a-c", "a.b", "a/b", "a/c/d", "a/c0", "a0", "ab", "b"}
	for i, j := range []int{5, 2, 7, 0, 3, 6, 1, 4} {
		mustPut(t, s, want[j], []byte{byte(i)})
	}
	var got []string
	for _, i := range list(t, s, "") {
		got = append(got, i.Key)
	}
	if !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
	got = got[:0]
	for _, i := range list(t, s, "a/c") {
		got = append(got, i.Key)
	}
	if want := []string{"a/c/d", "a/c0"}; !slices.Equal(got, want) {
		t.Errorf("List(a/c) = %q, want %q", got, want)
	}
}

// testConcurrentPuts races puts of one key with three different bodies: exactly one body
// wins, every put of that body succeeds and every other put gets ErrExists.
func testConcurrentPuts(t *testing.T, s objstore.Store) {
	const racers = 12
	for round := range 3 {
		key := fmt.Sprintf("race/%d", round)
		bodies := [][]byte{pattern(1000, 10), pattern(1000, 11), pattern(999, 10)}
		errs := make([]error, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				<-start
				errs[i] = s.Put(t.Context(), key, bodies[i%len(bodies)])
			})
		}
		close(start)
		wg.Wait()
		got, err := s.Get(t.Context(), key)
		if err != nil {
			t.Fatalf("Get(%q) after race: %v", key, err)
		}
		winner := slices.IndexFunc(bodies, func(b []byte) bool { return bytes.Equal(b, got) })
		if winner < 0 {
			t.Fatalf("after race %q holds %d bytes matching no body put", key, len(got))
		}
		for i, err := range errs {
			switch {
			case i%len(bodies) == winner && err != nil:
				t.Errorf("round %d racer %d put the winning body and got %v, want nil", round, i, err)
			case i%len(bodies) != winner && !errors.Is(err, objstore.ErrExists):
				t.Errorf("round %d racer %d put a losing body and got %v, want ErrExists", round, i, err)
			}
		}
	}
}

func testCancelled(t *testing.T, s objstore.Store) {
	mustPut(t, s, "present", []byte("here"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context = %v, want context.Canceled", op, err)
		}
	}
	check("Put", s.Put(ctx, "new", []byte("never")))
	check("PutParts", s.PutParts(ctx, "new", [][]byte{[]byte("ne"), []byte("ver")}))
	_, err := s.Get(ctx, "present")
	check("Get", err)
	_, err = s.GetRange(ctx, "present", 0, 1)
	check("GetRange", err)
	_, err = s.Head(ctx, "present")
	check("Head", err)
	check("Delete", s.Delete(ctx, "present"))
	called := false
	check("List", s.List(ctx, "", func(objstore.Info) error { called = true; return nil }))
	if called {
		t.Errorf("List with a cancelled context called fn")
	}
	// Nothing happened.
	if _, err := s.Head(t.Context(), "new"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("Put with a cancelled context left an object: Head = %v", err)
	}
	if _, err := s.Head(t.Context(), "present"); err != nil {
		t.Errorf("Delete with a cancelled context removed the object: Head = %v", err)
	}

	// Cancelling while a listing is running stops it.
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	for i := range 5 {
		mustPut(t, s, fmt.Sprintf("l/%d", i), nil)
	}
	calls := 0
	err = s.List(ctx, "l/", func(objstore.Info) error {
		calls++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("List cancelled in fn: %d calls, %v; want 1 call and context.Canceled", calls, err)
	}
}
