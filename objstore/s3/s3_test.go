package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/objstoretest"
)

// minioConfig returns the configuration of the test MinIO (scripts/services.sh) with a
// bucket of its own, removed with everything in it when the test ends. Without MinIO the
// test is skipped, or fails under CI.
func minioConfig(tb testing.TB) Config {
	tb.Helper()
	m := testsvc.MinIO(tb)
	cfg := Config{
		Bucket:    testsvc.BucketName(),
		Endpoint:  m.Endpoint,
		Region:    m.Region,
		PathStyle: true,
		AccessKey: m.AccessKey,
		SecretKey: m.SecretKey,
	}
	s := newStore(tb, cfg)
	if err := s.EnsureBucket(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { removeBucket(tb, s) })
	return cfg
}

func newStore(tb testing.TB, cfg Config) *Store {
	tb.Helper()
	log := slog.New(slog.NewTextHandler(tWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := New(context.Background(), cfg, log)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

type tWriter struct{ tb testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func removeBucket(tb testing.TB, s *Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{Bucket: &s.bucket})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			tb.Errorf("cleaning up bucket %s: %v", s.bucket, err)
			return
		}
		if len(page.Contents) == 0 {
			break
		}
		var ids []types.ObjectIdentifier
		for _, o := range page.Contents {
			ids = append(ids, types.ObjectIdentifier{Key: o.Key})
		}
		if _, err := s.client.DeleteObjects(ctx, &awss3.DeleteObjectsInput{
			Bucket: &s.bucket,
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		}); err != nil {
			tb.Errorf("cleaning up bucket %s: %v", s.bucket, err)
			return
		}
	}
	if _, err := s.client.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: &s.bucket}); err != nil {
		tb.Errorf("removing bucket %s: %v", s.bucket, err)
	}
}

func TestConformance(t *testing.T) {
	cfg := minioConfig(t)
	var n atomic.Int32
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		// One bucket, a prefix per subtest: this also checks keys stay relative to it.
		c := cfg
		c.Prefix = fmt.Sprintf("conformance/%d", n.Add(1))
		return newStore(t, c)
	}, objstoretest.WithReadBack(readBack(cfg)))
}

// TestSmallPages lists with three keys a page, so pages end inside prefixes and every
// continuation token is exercised.
func TestSmallPages(t *testing.T) {
	cfg := minioConfig(t)
	cfg.Prefix = "p"
	s := newStore(t, cfg)
	s.pageSize = 3
	var want []string
	for i := range 20 {
		k := fmt.Sprintf("k/%02d", i)
		want = append(want, k)
		if err := s.Put(t.Context(), k, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	if err := s.List(t.Context(), "k/", func(i objstore.Info) error { got = append(got, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("List = %q, want %q", got, want)
	}
}

// TestPutSettlesPreconditionFailed: the 412 path, with and without our checksum.
func TestPutSettlesPreconditionFailed(t *testing.T) {
	cfg := minioConfig(t)
	s := newStore(t, cfg)
	ctx := t.Context()
	body := []byte("segment bytes")
	if err := s.Put(ctx, "a", body); err != nil {
		t.Fatal(err)
	}
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String("a"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	// CRC-32C("segment bytes"), computed here with the standard library: the
	// store verified and kept the checksum we sent, and the metadata copy agrees.
	want := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli))))
	if got := out.Metadata[metaCRC32C]; got != want {
		t.Errorf("stored checksum metadata %q, want %q", got, want)
	}
	if got := aws.ToString(out.ChecksumCRC32C); got != want {
		t.Errorf("the store's own CRC-32C %q, want %q", got, want)
	}
	if err := s.Put(ctx, "a", body); err != nil {
		t.Errorf("identical re-put: %v, want nil", err)
	}
	if err := s.Put(ctx, "a", []byte("segment byteS")); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("re-put with other bytes of the same size: %v, want ErrExists", err)
	}

	// An object written by someone else, without the checksum: compared byte for byte.
	if _, err := s.client.PutObject(ctx, &awss3.PutObjectInput{
		Bucket: &s.bucket, Key: aws.String("foreign"), Body: bytes.NewReader(body),
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "foreign", body); err != nil {
		t.Errorf("put over identical foreign object: %v, want nil", err)
	}
	if err := s.Put(ctx, "foreign", []byte("segment byteS")); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("put over different foreign object: %v, want ErrExists", err)
	}
}

// TestPutLegacySHA256: an object written by an earlier version, with the SHA-256 in its
// metadata, is still recognised as the same content on a 412.
func TestPutLegacySHA256(t *testing.T) {
	s := newStore(t, minioConfig(t))
	ctx := t.Context()
	body := []byte("segment bytes")
	if _, err := s.client.PutObject(ctx, &awss3.PutObjectInput{
		Bucket: &s.bucket, Key: aws.String("old"), Body: bytes.NewReader(body),
		// sha256("segment bytes"), computed with sha256sum.
		Metadata: map[string]string{metaSHA256: "560e67b96c49975a2cf9adba2682e00cc6b74a879f2b6897e03b63d7434098e8"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "old", body); err != nil {
		t.Errorf("re-put over an old-style object with the same bytes: %v, want nil", err)
	}
	if err := s.Put(ctx, "old", []byte("segment byteS")); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("re-put with other bytes: %v, want ErrExists", err)
	}
}

// TestPutCorruptedInTransit: the body is signed as UNSIGNED-PAYLOAD, so the CRC-32C
// header is what protects it: a body changed on the way is refused by the store, and
// nothing is stored.
func TestPutCorruptedInTransit(t *testing.T) {
	cfg := minioConfig(t)
	target, err := url.Parse(cfg.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	flip := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPut && len(body) > 0 {
			body[len(body)/2] ^= 1
		}
		out, _ := http.NewRequestWithContext(r.Context(), r.Method, target.String()+r.URL.RequestURI(), bytes.NewReader(body))
		out.Header = r.Header.Clone()
		out.Host = target.Host
		out.ContentLength = int64(len(body))
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	defer flip.Close()
	good := newStore(t, cfg)
	bad := cfg
	bad.Endpoint = flip.URL
	s := newStore(t, bad)
	if err := s.Put(t.Context(), "flipped", []byte("segment bytes, to be flipped in transit")); err == nil {
		t.Fatal("a body corrupted in transit was accepted")
	}
	if _, err := good.Head(t.Context(), "flipped"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("after a refused corrupt put, head: %v, want ErrNotExist", err)
	}
}

// proxy stands between the SDK and MinIO and misbehaves on the PUTs it is told to.
type proxy struct {
	target *url.URL
	// onPut decides what happens to the nth (from 1) PUT: forward it, drop the response
	// after forwarding, or answer 409 without forwarding.
	onPut func(n int) action
	puts  atomic.Int32
}

type action int

const (
	forward action = iota
	dropResponse
	conflict
)

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	act := forward
	if r.Method == http.MethodPut {
		act = p.onPut(int(p.puts.Add(1)))
	}
	if act == conflict {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>ConditionalRequestConflict</Code><Message>A conflicting conditional operation is currently in progress against this resource.</Message></Error>`)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme = p.target.Scheme
	out.URL.Host = p.target.Host
	out.Host = r.Host // the SDK signed the proxy's host
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if act == dropResponse {
		io.Copy(io.Discard, resp.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func proxied(t *testing.T, cfg Config, onPut func(n int) action) (*Store, *proxy) {
	target, err := url.Parse(cfg.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{target: target, onPut: onPut}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	cfg.Endpoint = srv.URL
	return newStore(t, cfg), p
}

// TestPutLostResponse: MinIO stores the first PUT but its response never arrives; the
// SDK retries, gets 412, and the put is recognised as already done.
func TestPutLostResponse(t *testing.T) {
	cfg := minioConfig(t)
	s, p := proxied(t, cfg, func(n int) action {
		if n == 1 {
			return dropResponse
		}
		return forward
	})
	body := bytes.Repeat([]byte("lost response "), 1000)
	if err := s.Put(t.Context(), "lost", body); err != nil {
		t.Fatalf("Put whose first response was lost: %v, want nil", err)
	}
	if n := p.puts.Load(); n != 2 {
		t.Errorf("proxy saw %d PUTs, want 2 (the lost one and the SDK's retry)", n)
	}
	got, err := s.Get(t.Context(), "lost")
	if err != nil || !bytes.Equal(got, body) {
		t.Errorf("Get = %d bytes, %v; want the %d put", len(got), err, len(body))
	}

	// The same loss when another writer holds the key must still end in ErrExists.
	p.puts.Store(0)
	if err := s.Put(t.Context(), "lost", []byte("other")); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("Put of other content, response lost: %v, want ErrExists", err)
	}
}

// TestPutConflictRetried: a 409 ConditionalRequestConflict (a put of the key still in
// flight) is retried until the store settles.
func TestPutConflictRetried(t *testing.T) {
	cfg := minioConfig(t)
	s, p := proxied(t, cfg, func(n int) action {
		if n <= 2 {
			return conflict
		}
		return forward
	})
	if err := s.Put(t.Context(), "c", []byte("conflicted")); err != nil {
		t.Fatalf("Put after two 409s: %v, want nil", err)
	}
	if n := p.puts.Load(); n != 3 {
		t.Errorf("proxy saw %d PUTs, want 3", n)
	}

	// A conflict that never settles ends with the context.
	s, _ = proxied(t, cfg, func(int) action { return conflict })
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := s.Put(ctx, "never", []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Put with endless 409s: %v, want context.DeadlineExceeded", err)
	}
}

// TestMissingBucket: a missing bucket is a configuration error, never a missing object.
func TestMissingBucket(t *testing.T) {
	cfg := minioConfig(t)
	cfg.Bucket += "-absent"
	s := newStore(t, cfg)
	if _, err := s.Get(t.Context(), "k"); err == nil || errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("Get from a missing bucket: %v, want an error other than ErrNotExist", err)
	}
	// EnsureBucket creates it, and a second call finds it.
	for range 2 {
		if err := s.EnsureBucket(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { removeBucket(t, s) })
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("Get from the created bucket: %v, want ErrNotExist", err)
	}
}

func TestParseContentRange(t *testing.T) {
	for _, tc := range []struct {
		in                string
		start, end, total int64
		ok                bool
	}{
		{"bytes 0-0/1", 0, 0, 1, true},
		{"bytes 990-999/1000", 990, 999, 1000, true},
		{"bytes 5-9/*", 5, 9, -1, true},
		{"", 0, 0, 0, false},
		{"bytes 9-5/10", 0, 0, 0, false},
		{"items 0-1/2", 0, 0, 0, false},
		{"bytes 0-1", 0, 0, 0, false},
	} {
		start, end, total, ok := parseContentRange(tc.in)
		if ok != tc.ok || (ok && (start != tc.start || end != tc.end || total != tc.total)) {
			t.Errorf("parseContentRange(%q) = %d, %d, %d, %v; want %d, %d, %d, %v", tc.in, start, end, total, ok, tc.start, tc.end, tc.total, tc.ok)
		}
	}
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Bucket: "b", AccessKey: "only-the-key", Endpoint: "http://127.0.0.1:1"},
	} {
		if _, err := New(t.Context(), cfg, nil); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

func benchStore(b *testing.B) *Store {
	return newStore(b, minioConfig(b))
}

func BenchmarkPut8MiB(b *testing.B) {
	s := benchStore(b)
	body := make([]byte, 8<<20)
	rand.Read(body)
	b.SetBytes(int64(len(body)))
	i := 0
	for b.Loop() {
		i++
		if err := s.Put(b.Context(), fmt.Sprintf("put8/%d", i), body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPut8MiBParallel4(b *testing.B) {
	s := benchStore(b)
	body := make([]byte, 8<<20)
	rand.Read(body)
	b.SetBytes(int64(len(body)))
	var n atomic.Int64
	b.SetParallelism(2) // 2 × GOMAXPROCS(2) = 4 streams on the development machine
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Put(context.Background(), fmt.Sprintf("put8p/%d", n.Add(1)), body); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkPut64KiB(b *testing.B) {
	s := benchStore(b)
	body := make([]byte, 64<<10)
	rand.Read(body)
	b.SetBytes(int64(len(body)))
	var lat []time.Duration
	i := 0
	for b.Loop() {
		i++
		start := time.Now()
		if err := s.Put(b.Context(), fmt.Sprintf("put64/%d", i), body); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportPercentiles(b, lat)
}

func BenchmarkGet8MiB(b *testing.B) {
	s := benchStore(b)
	body := make([]byte, 8<<20)
	rand.Read(body)
	if err := s.Put(b.Context(), "get8", body); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		got, err := s.Get(b.Context(), "get8")
		if err != nil || len(got) != len(body) {
			b.Fatal(len(got), err)
		}
	}
}

func BenchmarkGetRange64KiB(b *testing.B) {
	s := benchStore(b)
	body := make([]byte, 8<<20)
	rand.Read(body)
	if err := s.Put(b.Context(), "range", body); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(64 << 10)
	var lat []time.Duration
	i := int64(0)
	for b.Loop() {
		i++
		start := time.Now()
		if _, err := s.GetRange(b.Context(), "range", (i*(64<<10))%(8<<20), 64<<10); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

// TestPartsBody: a put's request reaches the HTTP client with a PartsReader of its own
// over the put's parts as its body (which sendbody's connections, installed by New,
// write uncopied), and GetBody gives another from the start; other requests keep the
// body they were given.
func TestPartsBody(t *testing.T) {
	s, err := New(t.Context(), Config{Bucket: "b", Endpoint: "http://127.0.0.1:1", AccessKey: "a", SecretKey: "s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.client.Options().HTTPClient.(partsBodyClient); !ok {
		t.Fatalf("the store's HTTP client is a %T, want partsBodyClient", s.client.Options().HTTPClient)
	}
	parts := [][]byte{[]byte("segment "), []byte("bytes")}
	var got *http.Request
	c := partsBodyClient{doFunc(func(r *http.Request) (*http.Response, error) {
		got = r
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	})}
	do := func(ctx context.Context, method string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, "http://store/b/k", io.NopCloser(strings.NewReader("sdk's own body")))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = objstore.PartsLen(parts)
		if _, err := c.Do(req); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(got.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	put := context.WithValue(t.Context(), partsKey{}, parts)
	if b := do(put, http.MethodPut); b != "segment bytes" {
		t.Errorf("put's body %q, want the parts", b)
	}
	if _, ok := got.Body.(*objstore.PartsReader); !ok {
		t.Errorf("put's body is a %T, want *objstore.PartsReader", got.Body)
	}
	again, err := got.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(again); string(b) != "segment bytes" {
		t.Errorf("GetBody read %q, want the parts from the start", b)
	}
	if b := do(put, http.MethodGet); b != "sdk's own body" {
		t.Errorf("a GET's body became %q", b)
	}
	if b := do(t.Context(), http.MethodPut); b != "sdk's own body" {
		t.Errorf("a PUT without parts got body %q", b)
	}
}
