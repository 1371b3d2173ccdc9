package streams

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/serde"
)

// queryTopology counts records per key (a key-value store) and reads a table from a
// topic (a store that keeps timestamps), in two subtopologies of 6 and 3 tasks.
func queryTopology() *streams.Builder {
	b := streams.NewBuilder("iq")
	streams.Count(streams.GroupByKey(streams.From(b, "iq-in", serde.String, serde.String)), "counts")
	streams.FromTable(b, "iq-tab", "tab", serde.String, serde.String)
	return b
}

// iqInstance is an application instance serving its QueryHandler over HTTP.
type iqInstance struct {
	name string
	srv  *httptest.Server
	app  *streams.App
	stop func() error
}

type handlerBox struct{ h atomic.Pointer[http.Handler] }

func (b *handlerBox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := b.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	http.Error(w, "not started", http.StatusServiceUnavailable)
}

func startIQ(t *testing.T, c *client.Client, name string) *iqInstance {
	t.Helper()
	box := &handlerBox{}
	srv := httptest.NewServer(box)
	t.Cleanup(srv.Close)
	app, stop := runBg(t, queryTopology(), streams.Config{Client: c, StateDir: t.TempDir(), InstanceID: name, SessionTimeout: 3 * time.Second,
		ApplicationServer: srv.URL})
	h := app.QueryHandler()
	box.h.Store(&h)
	return &iqInstance{name: name, srv: srv, app: app, stop: stop}
}

// iqData writes the inputs and returns the oracle: each store's encoded value per key.
func iqData(t *testing.T, c *client.Client) (counts, tab map[string][]byte) {
	t.Helper()
	stringTopics(t, c, 6, "iq-in")
	stringTopics(t, c, 3, "iq-tab")
	rng := rand.New(rand.NewPCG(38, 3))
	recs := map[string][]client.Record{}
	n := map[string]int64{}
	tab = map[string][]byte{}
	for i := range 3000 {
		k := fmt.Sprintf("k%03d", rng.IntN(400))
		n[k]++
		recs["iq-in"] = append(recs["iq-in"], client.Record{Key: client.String(k), Value: client.String(fmt.Sprint(i))})
		if i%5 == 0 {
			tk, v := fmt.Sprintf("t%03d", rng.IntN(200)), fmt.Sprintf("v%d", i)
			tab[tk] = []byte(v)
			recs["iq-tab"] = append(recs["iq-tab"], client.Record{Key: client.String(tk), Value: client.String(v)})
		}
	}
	produceAll(t, c, recs)
	counts = map[string][]byte{}
	for k, v := range n {
		counts[k], _ = serde.Int64.Encode(v)
	}
	return counts, tab
}

type keyAnswer struct {
	Value    []byte `json:"value"`
	Instance string `json:"instance"`
	Code     string `json:"code"`
}

var iqHTTP = &http.Client{Timeout: 10 * time.Second}

// getKey asks srv for a key; it returns the HTTP status and the answer.
func getKey(srv, store, key string) (int, keyAnswer, error) {
	resp, err := iqHTTP.Get(srv + "/stores/" + store + "/keys/" + key)
	if err != nil {
		return 0, keyAnswer{}, err
	}
	defer resp.Body.Close()
	var a keyAnswer
	err = json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a, err
}

// allAnswered says every instance answers every key of both stores with its value.
func allAnswered(ins []*iqInstance, counts, tab map[string][]byte) bool {
	for _, in := range ins {
		for store, want := range map[string]map[string][]byte{"counts": counts, "tab": tab} {
			for k, v := range want {
				st, a, err := getKey(in.srv.URL, store, k)
				if err != nil || st != 200 || string(a.Value) != string(v) {
					return false
				}
			}
		}
	}
	return true
}

func percentile(d []time.Duration, p float64) time.Duration {
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// TestInteractiveQueries: three instances; every key of both stores is answered, with
// the oracle's value, by whichever instance is asked (the others forward to the one
// running its task, found through <app>-instances); a range over the whole store
// gathers every partition; an absent key is 404 key_not_found; the typed Go lookup
// agrees. Reports the lookup latency.
func TestInteractiveQueries(t *testing.T) {
	nd := startNode(t)
	c := client.New(nd.url)
	counts, tab := iqData(t, c)
	var ins []*iqInstance
	for i := range 3 {
		ins = append(ins, startIQ(t, c, fmt.Sprintf("iq-%d", i)))
	}
	waitAllDrained(t, c, "iq", 2*time.Minute)
	testwait.Until(t, time.Minute, "every instance answering every key", func() bool { return allAnswered(ins, counts, tab) })

	var local, forwarded []time.Duration
	for _, in := range ins {
		for store, want := range map[string]map[string][]byte{"counts": counts, "tab": tab} {
			for k, v := range want {
				start := time.Now()
				st, a, err := getKey(in.srv.URL, store, k)
				took := time.Since(start)
				if err != nil || st != 200 || string(a.Value) != string(v) {
					t.Fatalf("%s: %s/%s = %d %q (%v), want %q", in.name, store, k, st, a.Value, err, v)
				}
				if a.Instance == in.name {
					local = append(local, took)
				} else {
					forwarded = append(forwarded, took)
				}
			}
		}
	}
	all := slices.Concat(local, forwarded)
	t.Logf("lookup latency over HTTP, %d lookups: p50 %v p99 %v; answered locally (%d) p50 %v p99 %v; forwarded (%d) p50 %v p99 %v",
		len(all), percentile(all, 0.5), percentile(all, 0.99), len(local), percentile(local, 0.5), percentile(local, 0.99),
		len(forwarded), percentile(forwarded, 0.5), percentile(forwarded, 0.99))
	if len(local) == 0 || len(forwarded) == 0 {
		t.Errorf("%d lookups answered locally and %d forwarded: want both", len(local), len(forwarded))
	}

	st, a, err := getKey(ins[0].srv.URL, "counts", "absent")
	if err != nil || st != 404 || a.Code != "key_not_found" {
		t.Errorf("absent key: %d %+v %v, want 404 key_not_found", st, a, err)
	}
	if st, a, _ := getKey(ins[0].srv.URL, "nope", "k"); st != 404 || a.Code != "store_not_found" {
		t.Errorf("unknown store: %d %+v, want 404 store_not_found", st, a)
	}
	for _, in := range ins {
		resp, err := iqHTTP.Get(in.srv.URL + "/stores/counts/range?limit=10000")
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Entries []struct{ Key, Value []byte }
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: range: %d %v", in.name, resp.StatusCode, err)
		}
		if len(r.Entries) != len(counts) {
			t.Errorf("%s: range gave %d entries, want %d", in.name, len(r.Entries), len(counts))
		}
		for i, e := range r.Entries {
			if string(counts[string(e.Key)]) != string(e.Value) {
				t.Errorf("%s: range: %s = %x, want %x", in.name, e.Key, e.Value, counts[string(e.Key)])
			}
			if i > 0 && string(r.Entries[i-1].Key) >= string(e.Key) {
				t.Errorf("%s: range not in key order at %d", in.name, i)
			}
		}
	}
	for k, v := range counts {
		n, ok, err := streams.Lookup(t.Context(), ins[1].app, "counts", serde.String, serde.Int64, k)
		want, _ := serde.Int64.Decode(v)
		if err != nil || !ok || n != want {
			t.Fatalf("Lookup(%s) = %d %v %v, want %d", k, n, ok, err, want)
		}
	}
}

// TestInteractiveQueriesRebalance: while clients query every key without pause, a
// third instance joins and then one of the first two stops (two rebalances, tasks
// restoring on their new instances): every answer is the oracle's value or 503
// not_available — never a wrong value and never "not found" — and afterwards every
// key is answered again.
func TestInteractiveQueriesRebalance(t *testing.T) {
	nd := startNode(t)
	c := client.New(nd.url)
	counts, tab := iqData(t, c)
	ins := []*iqInstance{startIQ(t, c, "iq-0"), startIQ(t, c, "iq-1")}
	waitAllDrained(t, c, "iq", 2*time.Minute)
	testwait.Until(t, time.Minute, "every instance answering every key", func() bool { return allAnswered(ins, counts, tab) })

	var (
		mu      sync.Mutex
		servers = []string{ins[0].srv.URL, ins[1].srv.URL}
		ok, na  atomic.Int64
		bad     []string
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	keys := slices.Collect(func(yield func(string) bool) {
		for k := range counts {
			if !yield(k) {
				return
			}
		}
	})
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				srv := servers[rng.IntN(len(servers))]
				mu.Unlock()
				k := keys[rng.IntN(len(keys))]
				st, a, err := getKey(srv, "counts", k)
				switch {
				case err != nil:
					// the instance asked is stopping: its server closes connections
				case st == 200 && string(a.Value) == string(counts[k]):
					ok.Add(1)
				case st == 503 && a.Code == "not_available":
					na.Add(1)
				default:
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s: %d %+v (want %x)", k, st, a, counts[k]))
					mu.Unlock()
				}
			}
		}()
	}
	before := ok.Load()
	testwait.Until(t, 30*time.Second, "queries answered before the rebalance", func() bool { return ok.Load() > before+100 })
	third := startIQ(t, c, "iq-2")
	mu.Lock()
	servers = append(servers, third.srv.URL)
	mu.Unlock()
	testwait.Until(t, 2*time.Minute, "the third instance running tasks", func() bool { return len(third.app.Instances()["iq-2"]) > 0 })
	mu.Lock()
	servers = []string{ins[1].srv.URL, third.srv.URL}
	mu.Unlock()
	if err := ins[0].stop(); err != nil {
		t.Errorf("stopping iq-0: %v", err)
	}
	live := []*iqInstance{ins[1], third}
	testwait.Until(t, 2*time.Minute, "every key answered after the rebalances", func() bool { return allAnswered(live, counts, tab) })
	after := ok.Load()
	testwait.Until(t, 30*time.Second, "queries answered after the rebalance", func() bool { return ok.Load() > after+100 })
	close(stop)
	wg.Wait()
	t.Logf("during the rebalances: %d correct answers, %d not_available, %d wrong or missing", ok.Load(), na.Load(), len(bad))
	if len(bad) > 0 {
		t.Fatalf("%d answers were neither the value nor not_available, e.g. %v", len(bad), bad[:min(5, len(bad))])
	}
}
