package catalog

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// Per-topic usage (issue 32): what each topic — and each principal on it — moved, the
// object-store requests and catalog commits it caused (attributed by its byte share of
// the objects and flushes it took part in), counted on each node and added to per-minute
// buckets in transactions of their own, never inside a flush commit.

// UsageCounts is one bucket's (or one answer's) counts. Requests and commits are
// fractional: a PUT carrying three topics is split among them by byte share.
type UsageCounts struct {
	BytesIn     int64
	BytesOut    int64
	RecordsIn   int64
	RecordsOut  int64
	PutRequests float64
	GetRequests float64
	Commits     float64
}

// Add adds o to c.
func (c *UsageCounts) Add(o UsageCounts) {
	c.BytesIn += o.BytesIn
	c.BytesOut += o.BytesOut
	c.RecordsIn += o.RecordsIn
	c.RecordsOut += o.RecordsOut
	c.PutRequests += o.PutRequests
	c.GetRequests += o.GetRequests
	c.Commits += o.Commits
}

// UsageDelta is counts to add to one bucket: a topic, a principal ("" for anonymous or
// unattributed requests) and a minute.
type UsageDelta struct {
	TopicID   int64
	Principal string
	Minute    time.Time // the bucket's start: truncated to the minute (UsageMinute)
	UsageCounts
}

// UsageMinute is the bucket t falls in.
func UsageMinute(t time.Time) time.Time { return t.Truncate(time.Minute).UTC() }

// PrincipalUsage is one principal's counts on a topic over a window.
type PrincipalUsage struct {
	Principal string
	UsageCounts
}

// Usage keeps the per-minute usage buckets.
type Usage interface {
	// AddUsage adds every delta to its bucket, in one transaction.
	AddUsage(ctx context.Context, deltas []UsageDelta) error
	// TopicUsage sums the topic's buckets from the one since falls in onwards, per
	// principal, sorted by principal.
	TopicUsage(ctx context.Context, topicID int64, since time.Time) ([]PrincipalUsage, error)
	// PruneUsage drops the buckets that start before before and answers how many.
	PruneUsage(ctx context.Context, before time.Time) (int64, error)
}

// MergeUsage sums deltas of the same bucket and sorts them by (topic, principal,
// minute): one upsert may not touch a row twice, and transactions that lock rows in one
// order cannot deadlock.
func MergeUsage(deltas []UsageDelta) []UsageDelta {
	out := make([]UsageDelta, 0, len(deltas))
	for _, d := range deltas {
		d.Minute = UsageMinute(d.Minute)
		out = append(out, d)
	}
	slices.SortFunc(out, compareUsage)
	merged := out[:0]
	for _, d := range out {
		if n := len(merged); n > 0 && compareUsage(merged[n-1], d) == 0 {
			merged[n-1].Add(d.UsageCounts)
			continue
		}
		merged = append(merged, d)
	}
	return merged
}

func compareUsage(a, b UsageDelta) int {
	return cmp.Or(cmp.Compare(a.TopicID, b.TopicID), cmp.Compare(a.Principal, b.Principal), a.Minute.Compare(b.Minute))
}
