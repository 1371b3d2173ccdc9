package frontends_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// dlqFaultCommitter is the node's committer with faults on the dead-letter mover's
// flushes: the first one dies between its segment PUT and its commit (the commit never
// happens: its object is an orphan), the second commits but its answer is lost (the
// writer settles it from the catalog).
type dlqFaultCommitter struct {
	node.Committer
	seen atomic.Int32
}

func (c *dlqFaultCommitter) Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	if !slices.ContainsFunc(seg.Requests, func(r catalog.Request) bool { return r.ShareDLQ != nil }) {
		return c.Committer.Commit(ctx, seg)
	}
	switch c.seen.Add(1) {
	case 1:
		return nil, fmt.Errorf("test: the mover died after the PUT of %s: %w", seg.Key, catalog.ErrCommitFailed)
	case 2:
		if _, err := c.Committer.Commit(ctx, seg); err != nil {
			return nil, err
		}
		return nil, errors.New("test: the commit's answer was lost")
	}
	return c.Committer.Commit(ctx, seg)
}

// TestShareDeadLetters: a share group's dead-letter topic must start with the node's
// prefix and opt in (refusals change nothing); records a consumer rejects, and records
// found over the delivery limit — released at the limit, or their lock expired at it —
// land in the dead-letter topic exactly once each, with the context headers, even when
// the mover's first flush dies between its PUT and its commit and the second's answer
// is lost. On SQLite and on Postgres.
func TestShareDeadLetters(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []nodetest.Option
	}{{"sqlite", nil}, {"postgres", []nodetest.Option{nodetest.OnServices()}}} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &dlqFaultCommitter{}
			n := nodetest.Start(t, append(tc.opts, nodetest.Mutate(func(c *node.Config) {
				fc.Committer = c.Catalog
				c.Committer = fc
				c.WriterConfig.SettleTimeout = 5 * time.Second
				c.ShareDLQInterval = 50 * time.Millisecond
			}))...)
			testShareDeadLetters(t, shareNode{t: t, url: n.URL}, n.Catalog)
			if fc.seen.Load() < 3 {
				t.Fatalf("the mover flushed %d times: the faults were not all met", fc.seen.Load())
			}
		})
	}
}

func testShareDeadLetters(t *testing.T, s shareNode, cat catalog.ShareGroups) {
	s.want("POST", "/v1/topics", `{"name":"q","partitions":1}`, 201, "")
	s.want("POST", "/v1/topics/q/records", `{"records":[{"value":"r0","headers":{"h":"x"}},{"value":"r1"},{"value":"r2"},{"value":"r3"},{"value":"r4"},{"value":"r5"}]}`, 200, "")
	s.want("POST", "/v1/topics", `{"name":"other","partitions":1,"configs":{"errors.deadletterqueue.group.enable":"true"}}`, 201, "")
	s.want("POST", "/v1/topics", `{"name":"dlq.closed","partitions":1}`, 201, "")
	base := `"share.auto.offset.reset":"earliest","share.record.lock.duration.ms":"1000","share.delivery.count.limit":"2"`
	s.want("PUT", "/v1/share-groups/g", `{"configs":{`+base+`}}`, 200, "")
	configs := func() string {
		c, err := cat.GroupConfigs(t.Context(), "g")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(c)
	}
	before := configs()
	for _, bad := range []struct{ name, topic string }{
		{"without the prefix", "other"},
		{"a topic that does not exist", "dlq.none"},
		{"a topic that does not opt in", "dlq.closed"},
	} {
		got, code, body := s.call("PUT", "/v1/share-groups/g", `{"configs":{`+base+`,"errors.deadletterqueue.topic.name":"`+bad.topic+`"}}`)
		if got != 400 || code != v1.CodeInvalidConfig {
			t.Fatalf("dead-letter topic %s: %d %q %s, want 400 invalid_config", bad.name, got, code, body)
		}
		if after := configs(); after != before {
			t.Fatalf("refused dead-letter topic %s changed the configs: %s, was %s", bad.name, after, before)
		}
	}
	s.want("POST", "/v1/topics", `{"name":"dlq.q","partitions":1,"configs":{"errors.deadletterqueue.group.enable":"true"}}`, 201, "")
	s.want("PUT", "/v1/share-groups/g", `{"configs":{`+base+`,"errors.deadletterqueue.topic.name":"dlq.q"}}`, 200, "")

	// First delivery: reject r0-r1, release r2, accept r4-r5, leave r3 to its lock.
	first := s.acquire(v1.ShareRecordsRequest{Topics: []string{"q"}, WaitMs: 5000})
	m := first.MemberID
	if len(first.Partitions) != 1 || len(first.Partitions[0].Records) != 6 {
		t.Fatalf("first acquisition: %+v, want records 0-5", first)
	}
	acq := first.Partitions[0].AcquisitionID
	s.want("POST", "/v1/share-groups/g/acks", v1.ShareAckRequest{MemberID: m, Acks: []v1.ShareAck{{AcquisitionID: acq, Ranges: []v1.ShareAckRange{
		{First: i64(0), Last: i64(1), Type: "reject"}, {First: i64(2), Type: "release"}, {First: i64(4), Last: i64(5), Type: "accept"}}}}}, 204, "")
	// Second delivery of r2 (released) and r3 (its lock passed), at the limit: release
	// r2 (dead-lettered at once), leave r3 to its lock again (dead-lettered when an
	// acquire finds it expired).
	var second v1.ShareAcquisition
	if !testwait.Within(30*time.Second, func() bool {
		got := s.acquire(v1.ShareRecordsRequest{MemberID: m, Topics: []string{"q"}, WaitMs: 200})
		for _, p := range got.Partitions {
			for _, r := range p.Records {
				if r.Offset == 3 {
					second = p
					return true
				}
			}
			if len(p.Records) > 0 {
				s.want("POST", "/v1/share-groups/g/acks", v1.ShareAckRequest{MemberID: m, Acks: []v1.ShareAck{{AcquisitionID: p.AcquisitionID,
					Ranges: []v1.ShareAckRange{{First: i64(p.Records[0].Offset), Last: i64(p.Records[len(p.Records)-1].Offset), Type: "release"}}}}}, 204, "")
			}
		}
		return false
	}) {
		t.Fatal("record 3 was never delivered again after its lock passed")
	}
	for _, r := range second.Records {
		if r.DeliveryCount != 2 {
			t.Fatalf("second delivery: %+v, want delivery count 2", second)
		}
		if r.Offset == 2 {
			s.want("POST", "/v1/share-groups/g/acks", ackBody(m, second.AcquisitionID, 2, 2, "release"), 204, "")
		}
	}

	// The dead-letter topic ends with one copy of each of r0-r3, whatever the faults.
	type copied struct {
		value   string
		headers map[string]string
	}
	read := func() []copied {
		var f v1.FetchResponse
		if err := json.Unmarshal(s.want("GET", "/v1/topics/dlq.q/partitions/0/records?offset=0&max_records=100", nil, 200, ""), &f); err != nil {
			t.Fatal(err)
		}
		var out []copied
		for _, r := range f.Records {
			c := copied{value: string(r.Value), headers: map[string]string{}}
			for _, h := range r.Headers {
				if h.Value != nil {
					c.headers[h.Key] = *h.Value
				}
			}
			out = append(out, c)
		}
		slices.SortFunc(out, func(a, b copied) int {
			return cmpStr(a.headers["__dlq.errors.offset"], b.headers["__dlq.errors.offset"])
		})
		return out
	}
	testwait.NoError(t, 60*time.Second, "r0-r3 dead-lettered", func() error {
		// An acquire finds r3's expired lock (and acquires nothing: r4-r5 are done).
		s.acquire(v1.ShareRecordsRequest{MemberID: m, Topics: []string{"q"}})
		p := s.partitions()
		if got := read(); len(got) < 4 || len(p) != 1 || p[0].DeadLetterPending != 0 || p[0].StartOffset != 6 {
			return fmt.Errorf("dead-letter topic holds %d records; share-partition %+v", len(got), p)
		}
		return nil
	})
	want := []struct{ value, offset, count, reason string }{
		{`"r0"`, "0", "1", "rejected"}, {`"r1"`, "1", "1", "rejected"},
		{`"r2"`, "2", "2", "delivery_limit"}, {`"r3"`, "3", "2", "delivery_limit"},
	}
	got := read()
	if len(got) != len(want) {
		t.Fatalf("dead-letter topic: %d records %+v, want exactly %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.value != w.value || g.headers["__dlq.errors.topic"] != "q" || g.headers["__dlq.errors.partition"] != "0" ||
			g.headers["__dlq.errors.offset"] != w.offset || g.headers["__dlq.errors.delivery.count"] != w.count ||
			g.headers["__dlq.errors.reason"] != w.reason || g.headers["__dlq.errors.group.id"] != "g" {
			t.Fatalf("copy %d: %+v, want %+v", i, g, w)
		}
	}
	if got[0].headers["h"] != "x" {
		t.Fatalf("copy of r0 lost its own header: %+v", got[0])
	}
}

func cmpStr(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
