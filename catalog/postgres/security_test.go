package postgres

import (
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// TestSecurity runs the security conformance suite, a fresh database per subtest (the
// suite counts ACLs and audit records whole).
func TestSecurity(t *testing.T) {
	t.Parallel()
	catalogtest.RunSecurity(t, func(t *testing.T) catalog.Backend {
		return openDSN(t, newDatabase(t), catalog.Options{})
	})
}

// TestRegistry runs the schema registry's conformance suite, a fresh database per
// subtest (ids are counted from 1).
func TestRegistry(t *testing.T) {
	t.Parallel()
	catalogtest.RunRegistry(t, func(t *testing.T) catalog.Backend {
		return openDSN(t, newDatabase(t), catalog.Options{})
	})
}
