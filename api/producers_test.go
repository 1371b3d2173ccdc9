package api

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/writer"
)

// producerCluster is the fake cluster with producer ids.
type producerCluster struct {
	*fakeCluster
	initErr error
	inits   []string
	current []*catalog.Producer
}

func (c *producerCluster) InitProducer(ctx context.Context, tid string, current *catalog.Producer, _ string) (catalog.Producer, error) {
	c.inits = append(c.inits, tid)
	c.current = append(c.current, current)
	if c.initErr != nil {
		return catalog.Producer{}, c.initErr
	}
	if tid == "" {
		return catalog.Producer{ID: int64(len(c.inits))}, nil
	}
	return catalog.Producer{ID: 7, Epoch: 3}, nil
}

// scriptWriter records the writer requests and answers as told, after the fake
// cluster's own answer.
type scriptWriter struct {
	c    *fakeCluster
	reqs []writer.Request
	dup  bool
	err  error
}

func (w *scriptWriter) Produce(ctx context.Context, req writer.Request) (writer.Response, error) {
	w.reqs = append(w.reqs, req)
	if w.err != nil {
		return writer.Response{}, w.err
	}
	resp, err := w.c.Produce(ctx, req)
	resp.Duplicate = w.dup
	return resp, err
}

func TestInitProducer(t *testing.T) {
	var pc *producerCluster
	e := newEnv(t, Config{}, func(d *testDeps) {
		pc = &producerCluster{fakeCluster: d.Catalog.(*fakeCluster)}
		d.Catalog = pc
	})
	for _, tc := range []struct {
		body   string
		noType bool
		want   string
	}{
		{"", true, `{"producer_id":1,"epoch":0}`},
		{`{}`, false, `{"producer_id":2,"epoch":0}`},
		{`{"transactional_id":"copier-1"}`, false, `{"producer_id":7,"epoch":3}`},
		{`{"transactional_id":"copier-1","producer_id":7,"epoch":2}`, false, `{"producer_id":7,"epoch":3}`},
	} {
		var rec *httptest.ResponseRecorder
		if tc.noType {
			rec = e.do("POST", "/v1/producers", "", header{"Content-Type", ""})
		} else {
			rec = e.do("POST", "/v1/producers", tc.body)
		}
		if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != tc.want {
			t.Fatalf("init %q: %d %s, want %s", tc.body, rec.Code, rec.Body, tc.want)
		}
	}
	if got := fmt.Sprint(pc.inits); got != "[  copier-1 copier-1]" {
		t.Fatalf("catalog asked for %q", got)
	}
	if cur := pc.current[3]; cur == nil || *cur != (catalog.Producer{ID: 7, Epoch: 2}) {
		t.Fatalf("current identity passed %+v, want 7/2", cur)
	}

	wantProblem(t, e.do("POST", "/v1/producers", `{"transactional_id":"tab\there"}`), 400, CodeInvalidTransactionalID)
	wantProblem(t, e.do("POST", "/v1/producers", `{"transactional_id":""}`), 400, CodeInvalidTransactionalID)
	wantProblem(t, e.do("POST", "/v1/producers", `{"producer_id":-1,"epoch":0}`), 400, CodeInvalidRequest)
	wantProblem(t, e.do("POST", "/v1/producers", `{"transactional_id":"x","producer_id":1,"epoch":40000}`), 400, CodeInvalidRequest)
	wantProblem(t, e.do("POST", "/v1/producers", `{"transaction_id":"x"}`), 400, CodeInvalidRequest)
	pc.initErr = fmt.Errorf("sqlite: init producer: %w", catalog.ErrProducerFenced)
	wantProblem(t, e.do("POST", "/v1/producers", `{"transactional_id":"x","producer_id":1,"epoch":0}`), 409, CodeProducerFenced)
	pc.initErr = fmt.Errorf("sqlite: init producer: %w", catalog.ErrUnknownProducer)
	wantProblem(t, e.do("POST", "/v1/producers", `{"transactional_id":"x","producer_id":1,"epoch":0}`), 409, CodeUnknownProducer)
	pc.initErr = fmt.Errorf("connection refused")
	wantProblem(t, e.do("POST", "/v1/producers", `{}`), 503, CodeCatalogUnavailable)

	// A catalog without producers.
	plain := newEnv(t, Config{})
	wantProblem(t, plain.do("POST", "/v1/producers", `{}`), 503, CodeRoleUnavailable)
}

func TestIdempotentProduce(t *testing.T) {
	var sw *scriptWriter
	e := newEnv(t, Config{}, func(d *testDeps) {
		sw = &scriptWriter{c: d.Catalog.(*fakeCluster)}
		d.Writer = sw
	})
	tp := e.createTopic("orders", 4, nil)
	body := func(records, producer string) string {
		return `{"records":[` + records + `],"producer":` + producer + `}`
	}
	recs := `{"partition":1,"value":1},{"partition":3,"value":2},{"partition":1,"value":3}`
	ok := body(recs, `{"id":5,"epoch":2,"sequences":{"1":10,"3":0}}`)

	rec := e.do("POST", "/v1/topics/orders/records", ok)
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"offsets":[{"partition":1,"offset":0},{"partition":3,"offset":0},{"partition":1,"offset":1}]}` {
		t.Fatalf("produce: %d %s", rec.Code, rec.Body)
	}
	got := sw.reqs[0]
	if got.Producer == nil || *got.Producer != (catalog.Producer{ID: 5, Epoch: 2}) ||
		fmt.Sprint(got.Sequences) != fmt.Sprint(map[writer.TopicPartition]int32{{TopicID: tp.ID, Partition: 1}: 10, {TopicID: tp.ID, Partition: 3}: 0}) {
		t.Fatalf("writer request producer %+v sequences %v", got.Producer, got.Sequences)
	}
	sw.dup = true
	rec = e.do("POST", "/v1/topics/orders/records", ok)
	if rec.Code != 200 || !strings.HasSuffix(strings.TrimSpace(rec.Body.String()), `],"duplicate":true}`) {
		t.Fatalf("duplicate: %d %s", rec.Code, rec.Body)
	}
	sw.dup = false

	before := len(sw.reqs)
	for _, tc := range []struct {
		name string
		body string
		code Code
	}{
		{"no id", body(recs, `{"epoch":0,"sequences":{"1":0,"3":0}}`), CodeInvalidRequest},
		{"negative epoch", body(recs, `{"id":1,"epoch":-1,"sequences":{"1":0,"3":0}}`), CodeInvalidRequest},
		{"no sequences", body(recs, `{"id":1,"epoch":0}`), CodeInvalidRequest},
		{"sequence missing for a partition written", body(recs, `{"id":1,"epoch":0,"sequences":{"1":0}}`), CodeInvalidRequest},
		{"sequence for a partition not written", body(recs, `{"id":1,"epoch":0,"sequences":{"1":0,"3":0,"2":0}}`), CodeInvalidRequest},
		{"negative sequence", body(recs, `{"id":1,"epoch":0,"sequences":{"1":-1,"3":0}}`), CodeInvalidRequest},
		{"sequence beyond int32", body(recs, `{"id":1,"epoch":0,"sequences":{"1":2147483648,"3":0}}`), CodeInvalidRequest},
		{"partition key not a number", body(recs, `{"id":1,"epoch":0,"sequences":{"one":0,"3":0}}`), CodeInvalidRequest},
		{"record without a partition", body(`{"key":"k","value":1}`, `{"id":1,"epoch":0,"sequences":{"0":0}}`), CodeInvalidRequest},
		{"unknown producer field", body(recs, `{"id":1,"epoch":0,"sequence":{}}`), CodeInvalidRequest},
	} {
		wantProblem(t, e.do("POST", "/v1/topics/orders/records", tc.body), 400, tc.code)
	}
	if len(sw.reqs) != before {
		t.Fatalf("refused requests reached the writer")
	}

	// The catalog's refusals.
	for _, tc := range []struct {
		err    error
		status int
		code   Code
	}{
		{fmt.Errorf("writer: the catalog refused the request: %w", catalog.ErrProducerFenced), 409, CodeProducerFenced},
		{fmt.Errorf("writer: the catalog refused the request: %w", catalog.ErrUnknownProducer), 409, CodeUnknownProducer},
		{fmt.Errorf("writer: the catalog refused the request: producer id 5 epoch 2: %w",
			&catalog.SequenceError{TopicID: tp.ID, Partition: 3, Expected: 4, Got: 9}), 409, CodeOutOfOrderSequence},
	} {
		sw.err = tc.err
		p := wantProblem(t, e.do("POST", "/v1/topics/orders/records", ok), tc.status, tc.code)
		if tc.code == CodeOutOfOrderSequence {
			if jsonNumber(t, p["expected_sequence"]) != 4 || jsonNumber(t, p["sequence"]) != 9 || p["topic"] != "orders" || jsonNumber(t, p["partition"]) != 3 {
				t.Fatalf("out of order problem %v", p)
			}
		}
	}
}

func TestTransactProduce(t *testing.T) {
	var sw *scriptWriter
	e := newEnv(t, Config{}, func(d *testDeps) {
		sw = &scriptWriter{c: d.Catalog.(*fakeCluster)}
		d.Writer = sw
	})
	in := e.createTopic("in", 2, nil)
	out := e.createTopic("out", 2, map[string]string{"value.format": "string"})
	audit := e.createTopic("audit", 1, nil)
	_ = in
	body := `{"records":[
		{"topic":"out","partition":1,"key":"k","value":"a"},
		{"topic":"audit","partition":0,"value":{"n":1}},
		{"topic":"out","partition":0,"value":"b"}],
	  "producer":{"id":3,"epoch":0,"sequences":{"out":{"0":5,"1":7},"audit":{"0":0}}},
	  "group_offsets":{"group":"copier","member_id":"m-1","member_epoch":4,"offsets":[{"topic":"in","partition":1,"offset":42,"metadata":"x"}]}}`
	rec := e.do("POST", "/v1/records", body)
	want := `{"offsets":[{"topic":"out","partition":1,"offset":0},{"topic":"audit","partition":0,"offset":0},{"topic":"out","partition":0,"offset":0}]}`
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != want {
		t.Fatalf("transaction: %d %s, want %s", rec.Code, rec.Body, want)
	}
	got := sw.reqs[0]
	if len(got.Records) != 3 || got.Records[0].TopicID != out.ID || got.Records[1].TopicID != audit.ID || string(got.Records[0].Value) != "a" {
		t.Fatalf("writer records %+v", got.Records)
	}
	wantSeqs := map[writer.TopicPartition]int32{{TopicID: out.ID, Partition: 0}: 5, {TopicID: out.ID, Partition: 1}: 7, {TopicID: audit.ID, Partition: 0}: 0}
	if fmt.Sprint(got.Sequences) != fmt.Sprint(wantSeqs) || got.Producer == nil || got.Producer.ID != 3 {
		t.Fatalf("writer producer %+v sequences %v", got.Producer, got.Sequences)
	}
	g := got.GroupOffsets
	if g == nil || g.Group != "copier" || g.MemberID != "m-1" || g.MemberEpoch != 4 || len(g.Offsets) != 1 ||
		g.Offsets[0] != (catalog.CommitOffset{Topic: "in", Partition: 1, Offset: 42, Metadata: "x"}) {
		t.Fatalf("writer group offsets %+v", g)
	}
	// Without a producer and without offsets, it is a plain multi-topic produce.
	rec = e.do("POST", "/v1/records", `{"records":[{"topic":"out","value":"c"}]}`)
	if rec.Code != 200 || sw.reqs[1].Producer != nil || sw.reqs[1].GroupOffsets != nil {
		t.Fatalf("plain multi-topic produce: %d %s", rec.Code, rec.Body)
	}

	n := len(sw.reqs)
	for _, tc := range []struct {
		name   string
		body   string
		status int
		code   Code
	}{
		{"no records", `{"records":[]}`, 400, CodeEmptyBatch},
		{"unknown topic", `{"records":[{"topic":"nope","value":1}]}`, 404, CodeTopicNotFound},
		{"bad topic name", `{"records":[{"topic":"a b","value":1}]}`, 400, CodeInvalidTopicName},
		{"no topic", `{"records":[{"value":1}]}`, 400, CodeInvalidTopicName},
		{"partition beyond the topic", `{"records":[{"topic":"out","partition":9,"value":"x"}]}`, 404, CodePartitionOutOfRange},
		{"value of the wrong format", `{"records":[{"topic":"out","value":1}]}`, 400, CodeInvalidRecord},
		{"sequences of a topic not written", `{"records":[{"topic":"out","partition":0,"value":"x"}],"producer":{"id":1,"epoch":0,"sequences":{"out":{"0":0},"audit":{"0":0}}}}`, 400, CodeInvalidRequest},
		{"sequences not an object of objects", `{"records":[{"topic":"out","partition":0,"value":"x"}],"producer":{"id":1,"epoch":0,"sequences":{"0":0}}}`, 400, CodeInvalidRequest},
		{"idempotent record without partition", `{"records":[{"topic":"out","value":"x"}],"producer":{"id":1,"epoch":0,"sequences":{"out":{"0":0}}}}`, 400, CodeInvalidRequest},
		{"bad group name", `{"records":[{"topic":"out","value":"x"}],"group_offsets":{"group":"a b","offsets":[{"topic":"in","partition":0,"offset":1}]}}`, 400, CodeInvalidGroupName},
		{"member without epoch", `{"records":[{"topic":"out","value":"x"}],"group_offsets":{"group":"g","member_id":"m","offsets":[{"topic":"in","partition":0,"offset":1}]}}`, 400, CodeInvalidRequest},
		{"no offsets", `{"records":[{"topic":"out","value":"x"}],"group_offsets":{"group":"g","offsets":[]}}`, 400, CodeInvalidRequest},
		{"negative offset", `{"records":[{"topic":"out","value":"x"}],"group_offsets":{"group":"g","offsets":[{"topic":"in","partition":0,"offset":-1}]}}`, 400, CodeInvalidOffset},
		{"stale member epoch 0", `{"records":[{"topic":"out","value":"x"}],"group_offsets":{"group":"g","member_id":"m","member_epoch":0,"offsets":[{"topic":"in","partition":0,"offset":1}]}}`, 409, CodeStaleMemberEpoch},
		{"unknown field", `{"records":[{"topic":"out","value":"x"}],"offsets":[]}`, 400, CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, e.do("POST", "/v1/records", tc.body), tc.status, tc.code)
		})
	}
	if len(sw.reqs) != n {
		t.Fatalf("%d refused requests reached the writer", len(sw.reqs)-n)
	}
	// The commit's group refusals keep their codes.
	sw.err = fmt.Errorf("writer: the catalog refused the request: group offsets: %w", catalog.ErrNotOwner)
	wantProblem(t, e.do("POST", "/v1/records", body), 409, CodeNotOwner)
	sw.err = fmt.Errorf("writer: the catalog refused the request: group offsets: %w", catalog.ErrUnknownMember)
	wantProblem(t, e.do("POST", "/v1/records", body), 409, CodeUnknownMember)
}
