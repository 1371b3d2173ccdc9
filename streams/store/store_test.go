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
