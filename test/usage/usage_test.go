// Package usage_test proves per-topic usage end to end: nodes on Postgres and MinIO,
// produced to and fetched from over HTTP by two principals, answering
// GET /v1/topics/{topic}/usage.
package usage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
)

const bootKey = "bootstrap-0123456789abcdef0123456789"

// alice and bob are superusers (ACLs stay out of the way); carol has no ACL at all.
var superusers = []string{"User:alice", "User:bob"}

func do(t *testing.T, url, key, method, path string, body []byte) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func must(t *testing.T, url, key, method, path string, body []byte, want int) []byte {
	t.Helper()
	status, b := do(t, url, key, method, path, body)
	if status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, status, b, want)
	}
	return b
}

func newKey(t *testing.T, url, principal string) string {
	t.Helper()
	var m struct {
		Secret string `json:"secret"`
	}
	b := must(t, url, bootKey, "POST", "/v1/keys", fmt.Appendf(nil, `{"principal":%q}`, principal), http.StatusCreated)
	if err := json.Unmarshal(b, &m); err != nil || m.Secret == "" {
		t.Fatalf("create key: %s", b)
	}
	return m.Secret
}

func usageOf(t *testing.T, url, key, topic, query string) v1.TopicUsage {
	t.Helper()
	var u v1.TopicUsage
	if err := json.Unmarshal(must(t, url, key, "GET", "/v1/topics/"+topic+"/usage"+query, nil, http.StatusOK), &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// counter sums a counter's series in reg whose labels include match.
func counter(t *testing.T, reg prometheus.Gatherer, name string, match map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for k, v := range match {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == k && l.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func principalOf(u v1.TopicUsage, who string) v1.PrincipalUsage {
	for _, p := range u.Principals {
		if p.Principal == who {
			return p
		}
	}
	return v1.PrincipalUsage{Principal: who}
}

func storedBytes(t *testing.T, cat catalog.Backend, topic string) int64 {
	t.Helper()
	tp, err := cat.Topic(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := cat.Partitions(t.Context(), tp.ID)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range ps {
		n += p.Bytes
	}
	return n
}

// TestTopicUsage: alice produces to two topics 3:1 in the same requests (so the same
// flushes), bob to the first alone, alice fetches the first; the answers are exact for
// bytes and records, split PUTs 3:1 and sum them to the PUTs the store saw, include the
// node's unwritten counts at once, reach a second node through the catalog, survive the
// first node's restart, honour ?since, and are refused to a principal without describe.
func TestTopicUsage(t *testing.T) {
	super := nodetest.Mutate(func(c *node.Config) {
		c.Security.Superusers = superusers
		// Long enough that the answers right after producing come from the node's
		// unwritten counts (the catalog holds none yet); the restart writes them.
		c.Usage.Interval = time.Hour
	})
	a := nodetest.Start(t, nodetest.OnServices(), nodetest.Keys(bootKey), super)
	alice, bob, carol := newKey(t, a.URL, "User:alice"), newKey(t, a.URL, "User:bob"), newKey(t, a.URL, "User:carol")
	for _, name := range []string{"big", "small"} {
		must(t, a.URL, bootKey, "POST", "/v1/topics", fmt.Appendf(nil, `{"name":%q,"partitions":1}`, name), http.StatusCreated)
	}

	// 10 requests of 30 records to big and 10 to small, 4 KiB values; then bob's 5
	// requests of 8 records to big.
	value := `"` + strings.Repeat("v", 4096) + `"` // a JSON string: stored as its JSON text
	const reqs, bigPer, smallPer, bobReqs, bobPer = 10, 30, 10, 5, 8
	for range reqs {
		var recs []string
		for range bigPer {
			recs = append(recs, `{"topic":"big","value":`+value+`}`)
		}
		for range smallPer {
			recs = append(recs, `{"topic":"small","value":`+value+`}`)
		}
		must(t, a.URL, alice, "POST", "/v1/records", []byte(`{"records":[`+strings.Join(recs, ",")+`]}`), http.StatusOK)
	}
	for range bobReqs {
		recs := strings.TrimSuffix(strings.Repeat(`{"value":`+value+`},`, bobPer), ",")
		must(t, a.URL, bob, "POST", "/v1/topics/big/records", []byte(`{"records":[`+recs+`]}`), http.StatusOK)
	}
	// alice reads big back whole, as JSON: bytes out are keys, values and headers.
	var fetched int
	for offset := 0; fetched < reqs*bigPer+bobReqs*bobPer; {
		var res v1.FetchResponse
		b := must(t, a.URL, alice, "GET", fmt.Sprintf("/v1/topics/big/partitions/0/records?offset=%d&max_records=1000&max_bytes=67108864", offset), nil, http.StatusOK)
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Records) == 0 {
			t.Fatalf("fetch at %d answered nothing", offset)
		}
		fetched += len(res.Records)
		offset = int(res.NextOffset)
	}

	puts := counter(t, a.Registry, "strata_objstore_requests_total", map[string]string{"op": "put", "result": "ok"})
	check := func(where string, big, small v1.TopicUsage) {
		t.Helper()
		bigRecs, smallRecs := int64(reqs*bigPer+bobReqs*bobPer), int64(reqs*smallPer)
		if big.RecordsIn != bigRecs || small.RecordsIn != smallRecs {
			t.Errorf("%s: records in %d and %d, want %d and %d", where, big.RecordsIn, small.RecordsIn, bigRecs, smallRecs)
		}
		if al, bo := principalOf(big, "User:alice"), principalOf(big, "User:bob"); al.RecordsIn != reqs*bigPer || bo.RecordsIn != bobReqs*bobPer {
			t.Errorf("%s: big's records in by alice %d and bob %d, want %d and %d", where, al.RecordsIn, bo.RecordsIn, reqs*bigPer, bobReqs*bobPer)
		}
		// Every byte in is a stored batch byte: nothing was compacted or deleted.
		if sb := storedBytes(t, a.Catalog, "big"); big.BytesIn != sb || big.StoredBytes != sb {
			t.Errorf("%s: big's bytes in %d, stored %d; its chunks hold %d", where, big.BytesIn, big.StoredBytes, sb)
		}
		if sb := storedBytes(t, a.Catalog, "small"); small.BytesIn != sb || small.StoredBytes != sb {
			t.Errorf("%s: small's bytes in %d, stored %d; its chunks hold %d", where, small.BytesIn, small.StoredBytes, sb)
		}
		if want := bigRecs * int64(len(value)); big.BytesOut != want || big.RecordsOut != bigRecs {
			t.Errorf("%s: big's out %d bytes, %d records; want %d and %d", where, big.BytesOut, big.RecordsOut, want, bigRecs)
		}
		if small.BytesOut != 0 || small.RecordsOut != 0 {
			t.Errorf("%s: small's out %d bytes, %d records; nothing read it", where, small.BytesOut, small.RecordsOut)
		}
		if got := big.PutRequests + small.PutRequests; math.Abs(got-puts) > 1e-6 {
			t.Errorf("%s: attributed PUTs sum to %.6f; the store saw %v", where, got, puts)
		}
		if got := big.CatalogCommits + small.CatalogCommits; math.Abs(got-puts) > 1e-6 {
			t.Errorf("%s: attributed commits sum to %.6f; there were %v flushes", where, got, puts)
		}
		// alice's share: 3:1 in bytes and in PUTs (within 10%).
		al := principalOf(big, "User:alice")
		for _, r := range []struct {
			what     string
			big, sml float64
		}{{"bytes in", float64(al.BytesIn), float64(small.BytesIn)}, {"PUTs", al.PutRequests, small.PutRequests}} {
			if ratio := r.big / r.sml; math.Abs(ratio-3) > 0.3 {
				t.Errorf("%s: alice's %s big:small = %.3f, want 3 ± 10%%", where, r.what, ratio)
			}
		}
		if big.EstimatedCostUSD <= 0 || big.EstimatedCostUSD < big.Cost.PutUSD+big.Cost.StorageUSD-1e-12 {
			t.Errorf("%s: big's estimated cost $%g, its parts %+v", where, big.EstimatedCostUSD, big.Cost)
		}
	}
	// At once, from the node's unwritten counts (the catalog has none: Interval is an hour).
	bigA, smallA := usageOf(t, a.URL, alice, "big", ""), usageOf(t, a.URL, alice, "small", "")
	check("node a, unwritten", bigA, smallA)
	t.Logf("big: %+v", bigA)

	// The metrics: the same counts, labelled by topic.
	if got := counter(t, a.Registry, "strata_topic_records_in_total", map[string]string{"topic": "big"}); got != float64(bigA.RecordsIn) {
		t.Errorf("strata_topic_records_in_total{topic=big} = %v, want %d", got, bigA.RecordsIn)
	}

	// A principal without describe on the topic is refused, whether or not it exists.
	for _, topic := range []string{"big", "nosuch"} {
		status, body := do(t, a.URL, carol, "GET", "/v1/topics/"+topic+"/usage", nil)
		if status != http.StatusForbidden || !bytes.Contains(body, []byte(`"forbidden"`)) {
			t.Errorf("carol's usage of %s: %d %s, want 403 forbidden", topic, status, body)
		}
	}
	// Bad windows: 400 with a stable code, and the field named.
	for _, since := range []string{"yesterday", "-5m", "0s", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)} {
		status, body := do(t, a.URL, alice, "GET", "/v1/topics/big/usage?since="+since, nil)
		if status != http.StatusBadRequest || !bytes.Contains(body, []byte(`"invalid_request"`)) || !bytes.Contains(body, []byte(`"since"`)) {
			t.Errorf("since=%s: %d %s, want 400 invalid_request on since", since, status, body)
		}
	}

	// A second node on the same catalog sees nothing until the first writes; the first
	// writes at its shutdown (a restart), and then the second answers the same counts.
	b := nodetest.Start(t, nodetest.On(a.Catalog, a.Store), nodetest.Keys(bootKey), super)
	if u := usageOf(t, b.URL, alice, "big", ""); u.RecordsIn != 0 {
		t.Fatalf("node b sees %d records in before node a wrote any", u.RecordsIn)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	bigB, smallB := usageOf(t, b.URL, alice, "big", ""), usageOf(t, b.URL, alice, "small", "")
	check("node b, after node a's restart", bigB, smallB)

	// ?since: a bucket three hours old counts only in a window that reaches it.
	tp, err := a.Catalog.Topic(t.Context(), "small")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Catalog.AddUsage(t.Context(), []catalog.UsageDelta{{TopicID: tp.ID, Principal: "User:old", Minute: time.Now().Add(-3 * time.Hour),
		UsageCounts: catalog.UsageCounts{RecordsIn: 1000}}}); err != nil {
		t.Fatal(err)
	}
	if u := usageOf(t, b.URL, alice, "small", ""); u.RecordsIn != smallB.RecordsIn {
		t.Errorf("default window: %d records in, want %d (the old bucket is outside the last hour)", u.RecordsIn, smallB.RecordsIn)
	}
	if u := usageOf(t, b.URL, alice, "small", "?since=4h"); u.RecordsIn != smallB.RecordsIn+1000 {
		t.Errorf("since=4h: %d records in, want %d", u.RecordsIn, smallB.RecordsIn+1000)
	}
	from := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	if u := usageOf(t, b.URL, alice, "small", "?since="+from); u.RecordsIn != smallB.RecordsIn {
		t.Errorf("since=%s: %d records in, want %d", from, u.RecordsIn, smallB.RecordsIn)
	}

	// Node b's reads are its own GETs, in its answer at once, split between the topics
	// by their bytes in the objects read: small's first records lie in an object that
	// holds three times as many of big's bytes.
	bigBefore, smallBefore := usageOf(t, b.URL, alice, "big", ""), usageOf(t, b.URL, alice, "small", "")
	must(t, b.URL, bob, "GET", "/v1/topics/small/partitions/0/records?offset=0&max_records=5", nil, http.StatusOK)
	gets := counter(t, b.Registry, "strata_objstore_requests_total", map[string]string{"op": "get_range", "result": "ok"}) +
		counter(t, b.Registry, "strata_objstore_requests_total", map[string]string{"op": "get", "result": "ok"})
	bigAfter, smallAfter := usageOf(t, b.URL, alice, "big", ""), usageOf(t, b.URL, alice, "small", "")
	dBig, dSmall := bigAfter.GetRequests-bigBefore.GetRequests, smallAfter.GetRequests-smallBefore.GetRequests
	sum := dBig + dSmall
	if sum < 1-1e-9 || sum > gets+1e-9 || math.Abs(sum-math.Round(sum)) > 1e-6 {
		t.Errorf("node b's fetch: GETs attributed %.6f to big and %.6f to small; want whole GETs in all, at most the %v the store saw", dBig, dSmall, gets)
	}
	if dBig <= dSmall {
		t.Errorf("node b's fetch of small: GETs attributed %.4f to big and %.4f to small; big has most of the bytes in those objects", dBig, dSmall)
	}
	if got := principalOf(smallAfter, "User:bob").RecordsOut; got != 5 {
		t.Errorf("bob's records out of small: %d, want 5", got)
	}
}
