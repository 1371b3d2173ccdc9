package streams

import (
	"testing"

	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/store"
	"github.com/strata-io/strata/streams/store/storetest"
)

// A task's store — uncommitted writes over the committed state — passes the KV and
// the window/session layout suites, with commits confirmed between their steps (on
// both local DBs).
func TestTaskStoreConformance(t *testing.T) {
	for _, db := range []struct {
		name string
		open func(t *testing.T) store.DB
	}{
		{"memory", func(*testing.T) store.DB { return store.NewMemory() }},
		{"pebble", func(t *testing.T) store.DB {
			p, err := store.OpenPebble(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
	} {
		open := func(t *testing.T) (store.KV, func()) {
			b := NewBuilder("app")
			From(b, "in", serde.String, serde.String).To("out", serde.String, serde.String)
			tk := testTask(t, b, 10_000)
			tk.db = db.open(t)
			t.Cleanup(func() { tk.db.Close() })
			off := int64(0)
			return taskKV{tk, "s"}, func() {
				for u := tk.nextUnit(); u != nil; u = tk.nextUnit() {
					off += int64(len(u.changelog))
					if err := tk.confirmed(u, map[string]int64{"s": off}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		t.Run(db.name, func(t *testing.T) {
			storetest.RunKV(t, open)
			storetest.RunTimed(t, open)
		})
	}
}
