package broker

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-io/strata/catalog"
)

// TestErrorMessagesInTheCallersTerms: however a backend wraps a refusal, the message
// names what the caller named, once, and the chain stays in Err for the log.
func TestErrorMessagesInTheCallersTerms(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    *Error
		code Code
		msg  string
		hint string
	}{
		{"topic missing, wrapped by a backend",
			catalogError("delete topic", fmt.Errorf("sqlite: delete topic %q: %w", "orders", catalog.ErrTopicNotFound), onTopic("orders")),
			CodeTopicNotFound, `topic "orders" does not exist`, ""},
		{"topic exists",
			catalogError("create topic", fmt.Errorf("postgres: create topic %q: %w", "orders", catalog.ErrTopicExists), onTopic("orders")),
			CodeTopicExists, `topic "orders" already exists`, ""},
		{"the rule's own words, without the backend's",
			catalogError("update topic", fmt.Errorf("postgres: update topic %q: %w", "orders", catalog.PartitionsOnlyGrow("orders", 3, 1)), onTopic("orders")),
			CodeInvalidPartitionCount, `invalid partition count: topic "orders" has 3 partitions, not 1: partitions only grow, so ask for more than 3`, ""},
		{"a partition the catalog knows by topic id",
			catalogError("read", fmt.Errorf("sqlite: topic id 7 partition 9 (topic has 3): %w", catalog.ErrPartitionOutOfRange), onPartition("orders", 9)),
			CodePartitionOutOfRange, `topic "orders" has no partition 9`, ""},
		{"an offset range from the catalog",
			catalogError("read", fmt.Errorf("sqlite: chunks: %w", &catalog.OffsetRangeError{Offset: 9, LogStartOffset: 0, HighWatermark: 2}), onPartition("orders", 0)),
			CodeOffsetOutOfRange, `offset 9 is beyond the high watermark 2 of partition 0 of topic "orders": use an offset from 0 to 2`, ""},
		{"group missing, with a cause of its own",
			groupError("describe group", fmt.Errorf("sqlite: describe group g: %w: %w", catalog.ErrGroupNotFound, errors.New("sql: no rows in result set")), onGroup("g", "")),
			CodeGroupNotFound, `group "g" does not exist`, ""},
		{"unknown member: the API's advice in the hint",
			groupError("heartbeat", fmt.Errorf("postgres: heartbeat g/m: %w", fmt.Errorf("%w: m is not a member of group g (its lease may have expired): join again with epoch 0", catalog.ErrUnknownMember)), onGroup("g", "m")),
			CodeUnknownMember, `"m" is not a live member of group "g" (its session may have expired)`, "join again with member_epoch 0"},
		{"a group rule's words kept",
			groupError("heartbeat", fmt.Errorf("sqlite: heartbeat: %w", fmt.Errorf("%w: epoch 5 of member m is ahead of its epoch 3", catalog.ErrStaleMemberEpoch)), onGroup("g", "m")),
			CodeStaleMemberEpoch, `stale member epoch: epoch 5 of member m is ahead of its epoch 3`, ""},
		{"group not empty, for the CLI's reset",
			groupError("reset offsets", fmt.Errorf("postgres: reset g: %w", fmt.Errorf("%w: 2 live members", catalog.ErrGroupNotEmpty)), onGroup("g", "")),
			CodeGroupNotEmpty, `group "g" has live members: stop its consumers first`, ""},
	} {
		if tc.e.Code != tc.code || tc.e.Message != tc.msg || tc.e.Hint != tc.hint {
			t.Errorf("%s: %s %q hint %q; want %s %q hint %q", tc.name, tc.e.Code, tc.e.Message, tc.e.Hint, tc.code, tc.msg, tc.hint)
		}
		if tc.e.Err == nil || !strings.Contains(tc.e.Err.Error(), ":") {
			t.Errorf("%s: the chain is lost (Err %v)", tc.name, tc.e.Err)
		}
		if strings.Contains(tc.e.Message, "sqlite") || strings.Contains(tc.e.Message, "postgres") || strings.Contains(tc.e.Message, "topic id") {
			t.Errorf("%s: %q names the backend or an id", tc.name, tc.e.Message)
		}
	}
}

func TestRuleText(t *testing.T) {
	rule := fmt.Errorf("%w: topic %q has 3 partitions", catalog.ErrInvalidPartitions, "o")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("sqlite: update: %w", rule), `invalid partition count: topic "o" has 3 partitions`},
		{rule, `invalid partition count: topic "o" has 3 partitions`},
		{fmt.Errorf("postgres: update %q: %w", "o", catalog.ErrInvalidPartitions), ""}, // no words of its own
		{fmt.Errorf("%w: %w", catalog.ErrInvalidPartitions, errors.New("driver")), ""}, // two causes
		{errors.New("unrelated"), ""},
	} {
		if got := ruleText(tc.err, catalog.ErrInvalidPartitions); got != tc.want {
			t.Errorf("ruleText(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
