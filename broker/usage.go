package broker

import (
	"context"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// Per-topic usage and cost (issue 32). The counting is the node's usage recorder
// (package usage), told by the writer per flush, by the reader per GET and by the
// fetch calls here per response; this file answers what a topic used and what that
// costs a month at the configured list prices.

// UsageRecorder counts usage on this node and answers it with every node's written
// counts (usage.Recorder).
type UsageRecorder interface {
	Add(now time.Time, topicID int64, principal string, c catalog.UsageCounts)
	TopicUsage(ctx context.Context, topicID int64, since time.Time) ([]catalog.PrincipalUsage, error)
}

// Prices are the object store's list prices the cost estimate uses (README's cost
// model). The defaults are S3 Standard's in us-east-1.
type Prices struct {
	PutPer1000      float64 // USD per 1,000 PUT requests
	GetPer1000      float64 // USD per 1,000 GET requests
	StorageGBMonth  float64 // USD per GB (10^9 bytes) stored for a month
	CommitPerMillon float64 // USD per million catalog commits; 0: the catalog is a fixed cost
}

// DefaultPrices are S3 Standard's list prices in us-east-1.
var DefaultPrices = Prices{PutPer1000: 0.005, GetPer1000: 0.0004, StorageGBMonth: 0.023}

// DefaultUsageWindow is the window of a usage answer that names none.
const DefaultUsageWindow = time.Hour

// UsageMonth is the month cost estimates extrapolate to: 30 days.
const UsageMonth = 30 * 24 * time.Hour

// TopicUsage is what a topic used over a window, in total and per principal, and its
// estimated monthly cost.
type TopicUsage struct {
	Topic string
	// Since is where the counts start: the start of the minute bucket the asked-for
	// start falls in (counts are kept per minute).
	Since time.Time
	Until time.Time
	catalog.UsageCounts
	// StoredBytes is what the topic keeps now: its partitions' chunk bytes at or above
	// their log start offsets.
	StoredBytes int64
	Cost        UsageCost
	// Principals splits the counts by who caused them; "" holds anonymous requests and
	// the GETs, which serve whoever reads next.
	Principals []catalog.PrincipalUsage
}

// UsageCost is the monthly estimate: the window's request rates kept up for a month
// (UsageMonth), and the stored bytes kept for a month.
type UsageCost struct {
	PutUSD     float64
	GetUSD     float64
	CommitUSD  float64
	StorageUSD float64
	TotalUSD   float64
}

// ParseSince reads a usage window's start: a duration back from now ("15m", "24h") or
// an RFC 3339 time; "" is DefaultUsageWindow. Anything else, or a start in the future,
// is CodeInvalidRequest on the field "since".
func ParseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return now.Add(-DefaultUsageWindow), nil
	}
	bad := func(why string) error {
		return newError(CodeInvalidRequest, "since %q: %s", truncate(s, 64), why).with("field", "since")
	}
	var since time.Time
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, bad("a duration back from now must be positive")
		}
		since = now.Add(-d)
	} else if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		since = t
	} else {
		return time.Time{}, bad("give a duration back from now (15m, 24h) or an RFC 3339 time")
	}
	if since.After(now) {
		return time.Time{}, bad("the window starts in the future")
	}
	return since, nil
}

// TopicUsage answers what a topic used since since (ParseSince) and what it costs.
// Reading it needs describe on the topic.
func (b *Broker) TopicUsage(ctx context.Context, who Principal, topic, since string) (TopicUsage, error) {
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Topic(topic)); e != nil {
		return TopicUsage{}, e
	}
	if b.d.Usage == nil {
		return TopicUsage{}, newError(CodeRoleUnavailable, "this node counts no usage")
	}
	now := b.now()
	from, err := ParseSince(since, now)
	if err != nil {
		return TopicUsage{}, err
	}
	t, err := b.topic(ctx, "usage of topic", topic)
	if err != nil {
		return TopicUsage{}, err
	}
	rows, err := b.d.Usage.TopicUsage(ctx, t.ID, from)
	if err != nil {
		return TopicUsage{}, catalogError("usage of topic", err, onTopic(topic))
	}
	parts, err := b.d.Catalog.Partitions(ctx, t.ID)
	if err != nil {
		return TopicUsage{}, catalogError("usage of topic", err, onTopic(topic))
	}
	u := TopicUsage{Topic: t.Name, Since: catalog.UsageMinute(from), Until: now, Principals: rows}
	for _, r := range rows {
		u.Add(r.UsageCounts)
	}
	for _, p := range parts {
		u.StoredBytes += p.Bytes
	}
	u.Cost = b.prices.cost(u.UsageCounts, u.StoredBytes, now.Sub(u.Since))
	return u, nil
}

// cost is the README's cost model at p: requests at the window's rate for a month,
// plus storage for a month. window is what the counts cover (from the start of the
// first bucket to now).
func (p Prices) cost(c catalog.UsageCounts, stored int64, window time.Duration) UsageCost {
	scale := 0.0
	if window > 0 {
		scale = float64(UsageMonth) / float64(window)
	}
	out := UsageCost{
		PutUSD:     c.PutRequests * scale * p.PutPer1000 / 1000,
		GetUSD:     c.GetRequests * scale * p.GetPer1000 / 1000,
		CommitUSD:  c.Commits * scale * p.CommitPerMillon / 1e6,
		StorageUSD: float64(stored) / 1e9 * p.StorageGBMonth,
	}
	out.TotalUSD = out.PutUSD + out.GetUSD + out.CommitUSD + out.StorageUSD
	return out
}

// countOut counts a fetch response for per-topic usage: one call per response.
func (b *Broker) countOut(topicID int64, who Principal, bytes, records int64) {
	if b.d.Usage == nil || records == 0 && bytes == 0 {
		return
	}
	b.d.Usage.Add(b.now(), topicID, who.Name, catalog.UsageCounts{BytesOut: bytes, RecordsOut: records})
}

// countRecords counts decoded records served: their keys, values and headers.
func (b *Broker) countRecords(topicID int64, who Principal, recs []segment.DecodedRecord) {
	if b.d.Usage == nil || len(recs) == 0 {
		return
	}
	var n int64
	for i := range recs {
		r := &recs[i]
		n += int64(len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			n += int64(len(h.Key) + len(h.Value))
		}
	}
	b.countOut(topicID, who, n, int64(len(recs)))
}

// countBatches counts raw batches served: their bytes and the records their headers
// declare.
func (b *Broker) countBatches(topicID int64, who Principal, batches [][]byte) {
	if b.d.Usage == nil || len(batches) == 0 {
		return
	}
	var n, recs int64
	for _, raw := range batches {
		n += int64(len(raw))
		if h, err := segment.ParseBatchHeader(raw); err == nil {
			recs += int64(h.NumRecords)
		}
	}
	b.countOut(topicID, who, n, recs)
}
