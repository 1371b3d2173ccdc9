package quota

import (
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// clock is a settable clock for the meters.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestMeterDelay(t *testing.T) {
	c := &clock{t: time.Unix(1000, 700e6)} // inside a slot: the window starts at the first Add
	m := NewMeter(Window{Slots: 11, Slot: time.Second})
	// 3 MiB at once against 1 MiB/s: the caller owes 3 s (nothing elapsed yet).
	m.Add(c.now(), 3<<20)
	if d := m.Delay(c.now(), 1<<20); d != 3*time.Second {
		t.Errorf("delay after 3 MiB at once = %v, want 3s", d)
	}
	// 2.5 s later it owes 0.5 s.
	c.t = c.t.Add(2500 * time.Millisecond)
	if d := m.Delay(c.now(), 1<<20); d != 500*time.Millisecond {
		t.Errorf("delay 2.5 s later = %v, want 500ms", d)
	}
	c.t = c.t.Add(time.Second)
	if d := m.Delay(c.now(), 1<<20); d != 0 {
		t.Errorf("delay within the quota = %v, want 0", d)
	}
	// After the window slid past the burst, the meter is empty.
	c.t = c.t.Add(20 * time.Second)
	if sum, _ := m.Sum(c.now()); sum != 0 {
		t.Errorf("sum after the window passed = %d, want 0", sum)
	}
	if m.Total() != 3<<20 {
		t.Errorf("total = %d, want %d", m.Total(), 3<<20)
	}
}

// TestMeterSteadyRate drives a meter as a throttled client does — send, pause for the
// delay answered, send again — and checks that the rate it gets is its quota.
func TestMeterSteadyRate(t *testing.T) {
	c := &clock{t: time.Unix(5000, 300e6)}
	m := NewMeter(DefaultWindow)
	const quota = 1 << 20
	start, sent := c.t, int64(0)
	for c.t.Sub(start) < 60*time.Second {
		m.Add(c.now(), 256<<10)
		sent += 256 << 10
		c.t = c.t.Add(time.Millisecond + m.Delay(c.now(), quota))
	}
	rate := float64(sent) / c.t.Sub(start).Seconds()
	if rate < 0.97*quota || rate > 1.03*quota {
		t.Errorf("rate under the quota = %.0f B/s, want %d ± 3%%", rate, quota)
	}
}

func TestResolvePrecedence(t *testing.T) {
	d := catalog.DefaultEntity
	all := map[catalog.QuotaEntity]map[string]float64{
		{User: "User:a", ClientID: "c"}: {"k": 1},
		{User: "User:a", ClientID: d}:   {"k": 2},
		{User: "User:a"}:                {"k": 3},
		{User: d, ClientID: "c"}:        {"k": 4},
		{User: d, ClientID: d}:          {"k": 5},
		{User: d}:                       {"k": 6},
		{ClientID: "c"}:                 {"k": 7},
		{ClientID: d}:                   {"k": 8},
	}
	// Removing the most specific entity each time shows the next in Kafka's order.
	order := catalog.ResolveOrder("User:a", "c")
	for i, en := range order {
		v, got, ok := Resolve(all, "User:a", "c", "k")
		if !ok || v != float64(i+1) || got != en {
			t.Fatalf("step %d: Resolve = %v from %v (%v), want %d from %v", i, v, got, ok, i+1, en)
		}
		delete(all, en)
	}
	if _, _, ok := Resolve(all, "User:a", "c", "k"); ok {
		t.Error("Resolve found a value with no entities left")
	}
	// Known answers for other callers.
	vals := map[catalog.QuotaEntity]map[string]float64{
		{User: "User:a"}:         {"k": 10},
		{User: d, ClientID: "x"}: {"k": 20},
		{ClientID: d}:            {"k": 30},
	}
	for _, tc := range []struct {
		user, client string
		want         float64
	}{
		{"User:a", "x", 10}, {"User:b", "x", 20}, {"User:b", "y", 30}, {"User:a", "", 10},
	} {
		if v, _, _ := Resolve(vals, tc.user, tc.client, "k"); v != tc.want {
			t.Errorf("Resolve(%s, %s) = %v, want %v", tc.user, tc.client, v, tc.want)
		}
	}
}

func TestEnforcerSharesAndDivides(t *testing.T) {
	c := &clock{t: time.Unix(100, 0)}
	e := New(Config{Now: c.now}, nil, nil)
	e.Set(1, []catalog.QuotaEntry{
		{Entity: catalog.QuotaEntity{User: "User:a"}, Values: map[string]float64{catalog.QuotaProducerByteRate: 1000}},
		{Entity: catalog.QuotaEntity{User: catalog.DefaultEntity}, Values: map[string]float64{catalog.QuotaProducerByteRate: 500, catalog.QuotaTopicCount: 3}},
	})
	// One user's quota is shared by its client ids.
	e.Record(Produce, "User:a", "c1", 1000)
	if d := e.Record(Produce, "User:a", "c2", 1000); d != 2*time.Second {
		t.Errorf("second client of User:a owes %v, want 2s (1000 B/s shared)", d)
	}
	// The default applies to each user apart.
	if d := e.Record(Produce, "User:b", "", 500); d != time.Second {
		t.Errorf("User:b owes %v, want 1s", d)
	}
	if d := e.Record(Produce, "User:c", "", 500); d != time.Second {
		t.Errorf("User:c owes %v, want 1s (a meter of its own)", d)
	}
	// No quota for fetch: nothing owed.
	if d := e.Record(Fetch, "User:a", "", 1<<30); d != 0 {
		t.Errorf("fetch without a quota owes %v", d)
	}
	// With two live nodes each enforces half.
	e.SetLiveNodes(2)
	if d := e.Record(Produce, "User:d", "", 250); d != time.Second {
		t.Errorf("User:d on one of two nodes owes %v, want 1s (250 B/s here)", d)
	}
	// request_percentage 50: half a second of handler time per second, per node.
	e.SetLiveNodes(1)
	e.Set(2, []catalog.QuotaEntry{{Entity: catalog.QuotaEntity{ClientID: "busy"}, Values: map[string]float64{catalog.QuotaRequestPercentage: 50}}})
	if d := e.Record(Request, "User:q", "busy", int64(time.Second)); d != 2*time.Second {
		t.Errorf("1 s of handler time under request_percentage 50 owes %v, want 2s", d)
	}
	e.Set(3, []catalog.QuotaEntry{{Entity: catalog.QuotaEntity{User: catalog.DefaultEntity}, Values: map[string]float64{catalog.QuotaTopicCount: 3}}})
	if o := e.Caps("User:z"); o.TopicCap != 3 || o.ConnectCap != -1 {
		t.Errorf("caps of User:z = %+v, want topic 3 (the default), connector none", o)
	}
	if o := e.Caps(""); o.Principal != Anonymous {
		t.Errorf("caps of the anonymous caller are %s's, want %s", o.Principal, Anonymous)
	}
}

func TestEnforcerMutations(t *testing.T) {
	c := &clock{t: time.Unix(100, 0)}
	e := New(Config{Now: c.now}, nil, nil)
	e.Set(1, []catalog.QuotaEntry{{Entity: catalog.QuotaEntity{User: "User:a"}, Values: map[string]float64{catalog.QuotaControllerMutationRate: 2}}})
	// One request may take the rate over; the next is refused until it is back.
	if thr, ok := e.Mutate("User:a", "", 5); !ok || thr != 2500*time.Millisecond {
		t.Fatalf("first mutation of 5 = %v, %v; want allowed with 2.5s throttle", thr, ok)
	}
	if thr, ok := e.Mutate("User:a", "", 1); ok || thr != 2500*time.Millisecond {
		t.Fatalf("mutation over the rate = %v, %v; want refused for 2.5s", thr, ok)
	}
	c.t = c.t.Add(2500 * time.Millisecond)
	if _, ok := e.Mutate("User:a", "", 1); !ok {
		t.Fatal("mutation once back under the rate refused")
	}
	if _, ok := e.Mutate("User:b", "", 100); !ok {
		t.Fatal("mutation by a user without a quota refused")
	}
}

// BenchmarkRecord is the CPU of one quota check on the produce path: a caller with a
// quota it is within, and a caller with none.
func BenchmarkRecord(b *testing.B) {
	e := New(Config{}, nil, nil)
	e.Set(1, []catalog.QuotaEntry{{Entity: catalog.QuotaEntity{User: "User:a"}, Values: map[string]float64{catalog.QuotaProducerByteRate: 1 << 40}}})
	b.Run("with_quota", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				e.Record(Produce, "User:a", "client", 1<<20)
			}
		})
	})
	b.Run("without_quota", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				e.Record(Produce, "User:b", "client", 1<<20)
			}
		})
	})
}
