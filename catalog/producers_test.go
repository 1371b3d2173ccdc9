package catalog

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateTransactionalID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"orders-copier-3", true},
		{"ünïcode id with spaces", true},
		{"", false},
		{strings.Repeat("x", 255), true},
		{strings.Repeat("x", 256), false},
		{"tab\there", false},
		{"bad\xffutf8", false},
		{"del\x7f", false},
	} {
		err := ValidateTransactionalID(tc.id)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidTransactionalID)) {
			t.Errorf("ValidateTransactionalID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
	}
}
