package streams

import (
	"errors"
	"testing"

	"github.com/strata-io/strata/client"
)

// The outcome rules of a commit: which answers drop the task, which send the same
// request again.
func TestCommitOutcomeRules(t *testing.T) {
	for _, tc := range []struct {
		err              error
		refused, unknown bool
	}{
		{&client.Error{Status: 409, Code: client.CodeNotOwner}, true, false},
		{&client.Error{Status: 409, Code: client.CodeUnknownMember}, true, false},
		{&client.Error{Status: 404, Code: client.CodeGroupNotFound}, true, false},
		{&client.Error{Status: 409, Code: client.CodeProducerFenced}, true, false},
		{&client.Error{Status: 409, Code: client.CodeOutOfOrderSequence}, true, false},
		{&client.Error{Status: 409, Code: client.CodeUnknownProducer}, true, false},
		{errors.New("connection reset"), false, true},
		{&client.Error{Status: 503, Code: "commit_outcome_unknown"}, false, true},
		{&client.Error{Status: 503, Code: "store_unavailable"}, false, true},
		{&client.Error{Status: 429, Code: "buffer_full"}, false, true},
		{&client.Error{Status: 400, Code: "invalid_request"}, false, false},
		{&client.Error{Status: 413, Code: "request_too_large"}, false, false},
	} {
		if got := refusal(tc.err); got != tc.refused {
			t.Errorf("refusal(%v) = %v", tc.err, got)
		}
		if got := unknownOutcome(tc.err); got != tc.unknown {
			t.Errorf("unknownOutcome(%v) = %v", tc.err, got)
		}
	}
}
