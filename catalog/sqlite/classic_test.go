package sqlite

import (
	"testing"

	"github.com/strata-io/strata/catalog/catalogtest"
)

func TestClassic(t *testing.T) {
	open := openShared()
	catalogtest.RunClassic(t, func(t *testing.T) catalogtest.ClassicCatalog { return open(t).(*Catalog) })
}
