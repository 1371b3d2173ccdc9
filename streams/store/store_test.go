package store_test

import (
	"testing"

	"github.com/strata-io/strata/streams/store"
	"github.com/strata-io/strata/streams/store/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) store.DB { return store.NewMemory() }, false)
}

func TestPebble(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) store.DB {
		db, err := store.OpenPebble(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}, true)
}

// A second opener of the same directory is refused, never handed a shared store.
func TestPebbleLocked(t *testing.T) {
	dir := t.TempDir()
	db, err := store.OpenPebble(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db2, err := store.OpenPebble(dir, nil); err == nil {
		db2.Close()
		t.Fatal("second open of a locked directory succeeded")
	}
}

func directOpener(open func(t *testing.T) store.DB) storetest.OpenKV {
	return func(t *testing.T) (store.KV, func()) {
		db := open(t)
		t.Cleanup(func() { db.Close() })
		return store.Direct(db, "s"), nil
	}
}

func openMemory(*testing.T) store.DB { return store.NewMemory() }

func openPebble(t *testing.T) store.DB {
	db, err := store.OpenPebble(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// The window and session layout on both DBs, written directly.
func TestTimedLayout(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		storetest.RunKV(t, directOpener(openMemory))
		storetest.RunTimed(t, directOpener(openMemory))
	})
	t.Run("pebble", func(t *testing.T) {
		storetest.RunKV(t, directOpener(openPebble))
		storetest.RunTimed(t, directOpener(openPebble))
	})
}
