package connect

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestScrubRecord: a record's failure keeps its words but none of the record's: quoted
// runs go, and so do words the record holds.
func TestScrubRecord(t *testing.T) {
	rec := []byte(`{"card":"4111-1111-1111-1111","name":"Mallory"}`)
	for _, tc := range []struct{ in, want string }{
		{`invalid character 'M' looking for beginning of value`, `invalid character "…" looking for beginning of value`},
		{`cannot cast "Mallory" to int32`, `cannot cast "…" to int32`},
		{`refused the card 4111-1111-1111-1111 of Mallory`, `refused the … … of …`}, // "card" is the record's too,
		{`the line is not JSON`, `the line is not JSON`},
		{"quoted `raw` too", "quoted \"…\" too"},
	} {
		if got := scrubRecord(tc.in, rec); got != tc.want {
			t.Errorf("scrubRecord(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestTraceOfRecordFailure: the trace of a task failed by a record names the record by
// where it is, and no cause in the chain quotes it.
func TestTraceOfRecordFailure(t *testing.T) {
	cause := fmt.Errorf("put: %w", errors.New("sink refused Mallory's record"))
	err := fmt.Errorf("task: %w", &failedError{f: failure{stage: stagePut, class: "X", err: cause, topic: "people", partition: 2, offset: 41,
		value: []byte("Mallory")}})
	tr := traceOf(err)
	if strings.Contains(tr, "Mallory") || !strings.Contains(tr, "topic people partition 2 offset 41") {
		t.Fatalf("trace %q", tr)
	}
}

// TestSecretsRedact: every resolved value of minSecret bytes or more is replaced, the
// longest first.
func TestSecretsRedact(t *testing.T) {
	var s secrets
	for _, v := range []string{"ab", "token-1", "token-12", "token-1"} {
		s = s.add(v)
	}
	if len(s) != 2 {
		t.Fatalf("secrets %q", s)
	}
	if got := s.redact("a token-12 and a token-1 and ab"); got != "a [hidden] and a [hidden] and ab" {
		t.Fatalf("redact = %q", got)
	}
}
