package usage

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/catalog"
)

// memStore is an in-memory catalog.Usage, for the recorder's own logic; the backends
// have their conformance suite (catalogtest) and the nodes test/usage.
type memStore struct {
	rows []catalog.UsageDelta
	fail error
}

func (m *memStore) AddUsage(_ context.Context, ds []catalog.UsageDelta) error {
	if m.fail != nil {
		return m.fail
	}
	m.rows = append(m.rows, catalog.MergeUsage(ds)...)
	return nil
}

func (m *memStore) TopicUsage(_ context.Context, topic int64, since time.Time) ([]catalog.PrincipalUsage, error) {
	var out []catalog.PrincipalUsage
	for _, d := range m.rows {
		if d.TopicID != topic || d.Minute.Before(catalog.UsageMinute(since)) {
			continue
		}
		i := slices.IndexFunc(out, func(u catalog.PrincipalUsage) bool { return u.Principal == d.Principal })
		if i < 0 {
			i = len(out)
			out = append(out, catalog.PrincipalUsage{Principal: d.Principal})
		}
		out[i].Add(d.UsageCounts)
	}
	return out, nil
}

func (m *memStore) PruneUsage(context.Context, time.Time) (int64, error) { return 0, nil }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestAnswerCountsEachOnce: an answer holds written and unwritten counts, each once,
// across a write, a failed write and counts added in between.
func TestAnswerCountsEachOnce(t *testing.T) {
	st := &memStore{}
	r := New(st, Config{}, quiet())
	now := time.Now()
	r.Add(now, 1, "User:a", catalog.UsageCounts{BytesIn: 10, RecordsIn: 1, PutRequests: 0.5})
	r.Add(now, 2, "User:a", catalog.UsageCounts{BytesIn: 99})
	want := func(bytes int64) {
		t.Helper()
		got, err := r.TopicUsage(t.Context(), 1, now.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].BytesIn != bytes {
			t.Fatalf("TopicUsage = %+v, want User:a with %d bytes in", got, bytes)
		}
	}
	want(10)
	if err := r.Write(t.Context()); err != nil {
		t.Fatal(err)
	}
	want(10)
	r.Add(now, 1, "User:a", catalog.UsageCounts{BytesIn: 5})
	want(15)
	st.fail = fmt.Errorf("catalog down")
	if err := r.Write(t.Context()); err == nil {
		t.Fatal("Write with the catalog down: nil error")
	}
	want(15) // kept pending
	st.fail = nil
	if err := r.Write(t.Context()); err != nil {
		t.Fatal(err)
	}
	want(15)
	if len(r.pending) != 0 {
		t.Errorf("%d buckets pending after a write", len(r.pending))
	}
}

// TestTopicLabelCap: the first TopicLabels topics keep their names as labels, later
// ones sum under "other", and a topic's label never changes.
func TestTopicLabelCap(t *testing.T) {
	r := New(&memStore{}, Config{TopicLabels: 2, Name: func(_ context.Context, id int64) (string, error) {
		return fmt.Sprintf("t%d", id), nil
	}}, quiet())
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.Collector())
	now := time.Now()
	bytesIn := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() == "strata_topic_bytes_in_total" {
				for _, m := range mf.GetMetric() {
					out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
		return out
	}
	r.Add(now, 1, "", catalog.UsageCounts{BytesIn: 1})
	r.Add(now, 2, "", catalog.UsageCounts{BytesIn: 2})
	if got := bytesIn(); len(got) != 2 || got["t1"] != 1 || got["t2"] != 2 {
		t.Fatalf("two topics: %v", got)
	}
	for id := int64(3); id <= 50; id++ {
		r.Add(now, id, "User:x", catalog.UsageCounts{BytesIn: 10})
	}
	r.Add(now, 1, "", catalog.UsageCounts{BytesIn: 1})
	got := bytesIn()
	if len(got) != 3 || got["t1"] != 2 || got["t2"] != 2 || got[OtherTopic] != 480 {
		t.Fatalf("50 topics under a cap of 2: %v, want t1 2, t2 2, other 480", got)
	}
}
