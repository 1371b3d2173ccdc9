package api

import (
	"testing"

	"github.com/strata-io/strata/broker"
)

// TestCoreCodes: every code the core answers with has its row in the error table (a
// problem with an unknown code would panic), and the table's retry column says what the
// core says.
func TestCoreCodes(t *testing.T) {
	for _, c := range broker.Codes() {
		info, ok := codeIndex[Code(c)]
		if !ok {
			t.Errorf("the core's code %s has no row in the error table", c)
			continue
		}
		if info.Retry != c.Retriable() {
			t.Errorf("%s: the table says retry %v, the core %v", c, info.Retry, c.Retriable())
		}
	}
}
