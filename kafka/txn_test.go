package kafka_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	strata "github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/kafka"
	"github.com/strata-io/strata/segment"
)

// consumeValues reads topic from its start with franz-go at an isolation level until it
// has want records or d has passed, and answers their values in order.
func consumeValues(t *testing.T, addr, topic string, iso kgo.IsolationLevel, want int, d time.Duration) []string {
	t.Helper()
	cl := client(t, kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("poll: %v", errs)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// rawCapped is rawTo with the versions of some APIs capped (franz-go sends the highest
// version both sides know).
func rawCapped(t *testing.T, n *node, caps map[kmsg.Key]int16) raw {
	v := kversion.Stable()
	for k, max := range caps {
		v.SetMaxKeyVersion(int16(k), max)
	}
	return raw{t: t, n: n, br: client(t, kgo.SeedBrokers(n.addr), kgo.MaxVersions(v)).Broker(int(n.id))}
}

// stableOffsets answers a partition's high watermark and last stable offset.
func stableOffsets(t *testing.T, r raw, topic string, partition int32) (hw, lso int64) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := r.do(req).(*kmsg.ListOffsetsResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("list offsets: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return r.hwm(topic, partition), p.Offset
}

// TestTransactionsWithFranzGo: a committed transaction is seen by read_committed and
// read_uncommitted consumers, an aborted one only by read_uncommitted; the last stable
// offset stays behind an open transaction and moves at its commit.
func TestTransactionsWithFranzGo(t *testing.T) {
	cat := openSQLite(t)
	if _, err := cat.CreateTopic(t.Context(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cat, kafka.Config{})
	r := rawTo(t, n)
	ctx := ctxFor(t, 60*time.Second)
	p := client(t, kgo.SeedBrokers(n.addr), kgo.TransactionalID("tx"), kgo.TransactionTimeout(time.Minute), kgo.DefaultProduceTopic("t"))
	produce := func(commit bool, values ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := p.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
		if commit || len(values) == 0 {
			if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatalf("end: %v", err)
			}
		}
	}
	produce(true, "c1", "c2")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("x1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("o1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// c1 c2 commit-marker x1 abort-marker o1: o1 is open at offset 5.
	if hw, lso := stableOffsets(t, r, "t", 0); hw != 6 || lso != 5 {
		t.Fatalf("with o1 open: high watermark %d, stable %d; want 6, 5", hw, lso)
	}
	if got := consumeValues(t, n.addr, "t", kgo.ReadCommitted(), 3, 2*time.Second); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Fatalf("read committed with o1 open: %v, want c1 c2", got)
	}
	// The HTTP API reads committed by default; read_uncommitted on request.
	hc := strata.New(n.http)
	httpValues := func(iso strata.Isolation) ([]string, strata.FetchResult) {
		t.Helper()
		res, err := hc.Fetch(ctx, "t", 0, strata.FetchOptions{Base64: true, Isolation: iso})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range res.Records {
			var b []byte
			if err := json.Unmarshal(r.Value, &b); err != nil {
				t.Fatal(err)
			}
			out = append(out, string(b))
		}
		return out, res
	}
	if got, res := httpValues(""); !slices.Equal(got, []string{"c1", "c2"}) || res.NextOffset != 5 || res.LastStableOffset != 5 || res.HighWatermark != 6 {
		t.Fatalf("HTTP, by default: %v %+v; want c1 c2, next offset 5, stable 5, high watermark 6", got, res)
	}
	if got, _ := httpValues(strata.ReadUncommitted); !slices.Equal(got, []string{"c1", "c2", "x1", "o1"}) {
		t.Fatalf("HTTP, read_uncommitted: %v", got)
	}
	if ps, err := hc.Partitions(ctx, "t"); err != nil || ps[0].LastStableOffset != 5 {
		t.Fatalf("HTTP partitions: %+v, %v; want last stable offset 5", ps, err)
	}
	if got := consumeValues(t, n.addr, "t", kgo.ReadUncommitted(), 4, 20*time.Second); !slices.Equal(got, []string{"c1", "c2", "x1", "o1"}) {
		t.Fatalf("read uncommitted: %v, want c1 c2 x1 o1", got)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if hw, lso := stableOffsets(t, r, "t", 0); hw != 7 || lso != 7 {
		t.Fatalf("after the commit: high watermark %d, stable %d; want 7, 7", hw, lso)
	}
	if got := consumeValues(t, n.addr, "t", kgo.ReadCommitted(), 3, 20*time.Second); !slices.Equal(got, []string{"c1", "c2", "o1"}) {
		t.Fatalf("read committed: %v, want c1 c2 o1", got)
	}
	// The coordinator's view through franz-go's admin client.
	adm := admin(t, kgo.SeedBrokers(n.addr))
	ds, err := adm.DescribeTransactions(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := ds["tx"]; !ok || d.Err != nil || d.State != "CompleteCommit" {
		t.Fatalf("describe: %+v", ds)
	}
	ls, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil || !slices.Contains(ls.TransactionalIDs(), "tx") {
		t.Fatalf("list: %+v, %v", ls, err)
	}
}

// TestTransactionFencing: a second instance of a transactional id fences the first — its
// produce and its commit are refused — and aborts its open transaction.
func TestTransactionFencing(t *testing.T) {
	cat := openSQLite(t)
	if _, err := cat.CreateTopic(t.Context(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cat, kafka.Config{})
	r := rawTo(t, n)
	ctx := ctxFor(t, 60*time.Second)
	a := client(t, kgo.SeedBrokers(n.addr), kgo.TransactionalID("same"), kgo.DefaultProduceTopic("t"), kgo.RecordRetries(1))
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := a.ProduceSync(ctx, kgo.StringRecord("zombie")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, lso := stableOffsets(t, r, "t", 0); lso != 0 {
		t.Fatalf("the first instance's transaction is not holding the stable offset: %d", lso)
	}
	b := client(t, kgo.SeedBrokers(n.addr), kgo.TransactionalID("same"), kgo.DefaultProduceTopic("t"))
	if err := b.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := b.ProduceSync(ctx, kgo.StringRecord("live")).FirstErr(); err != nil { // InitProducerId first: fences a
		t.Fatal(err)
	}
	if err := b.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	err := a.ProduceSync(ctx, kgo.StringRecord("zombie 2")).FirstErr()
	if err == nil {
		t.Fatal("the fenced instance produced")
	}
	if err := a.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced instance committed")
	}
	if got := consumeValues(t, n.addr, "t", kgo.ReadCommitted(), 2, 3*time.Second); !slices.Equal(got, []string{"live"}) {
		t.Fatalf("read committed: %v, want only the live instance's record", got)
	}
}

// TestTxnOffsetCommitAtCommit: offsets committed in a transaction reach the group only
// when it commits; meanwhile OffsetFetch with require_stable answers
// UNSTABLE_OFFSET_COMMIT for them.
func TestTxnOffsetCommitAtCommit(t *testing.T) {
	cat := openSQLite(t)
	for _, name := range []string{"in", "out"} {
		if _, err := cat.CreateTopic(t.Context(), name, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	n := startNode(t, cat, kafka.Config{})
	r := rawTo(t, n)
	now := time.Now().UnixMilli()
	r.produce("in", map[int32][]byte{0: batchtest.Batch(t, batchtest.Some(5, now), 0, -1, -1, -1)})
	ctx := ctxFor(t, 30*time.Second)
	p := client(t, kgo.SeedBrokers(n.addr), kgo.TransactionalID("etl"), kgo.DefaultProduceTopic("out"))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := p.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch, commit.Generation = "etl", "g", pid, epoch, -1
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = "in"
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 4
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	resp, err := commit.RequestWith(ctx, p) // v5: the group joins the transaction itself
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("txn offset commit: %+v, %v", resp, err)
	}
	fetch := func(stable bool) kmsg.OffsetFetchResponseGroupTopicPartition {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest() // v8+, as franz-go sends it: groups
		req.RequireStable = stable
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "g"
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.Partitions = "in", []int32{0}
		g.Topics = append(g.Topics, gt)
		req.Groups = append(req.Groups, g)
		resp, err := req.RequestWith(ctx, r.br)
		if err != nil || resp.Version < 8 {
			t.Fatalf("offset fetch v%d: %v", resp.Version, err)
		}
		return resp.Groups[0].Topics[0].Partitions[0]
	}
	if got := fetch(false); got.Offset != -1 {
		t.Fatalf("before the commit the group has offset %d, want none", got.Offset)
	}
	if got := fetch(true); got.ErrorCode != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable while pending: %v, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(got.ErrorCode))
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := fetch(true); got.ErrorCode != 0 || got.Offset != 4 {
		t.Fatalf("after the commit: offset %d, %v; want 4", got.Offset, kerr.ErrorForCode(got.ErrorCode))
	}
}

// TestTransactionRefusals: every transactional API refuses a stale or fenced epoch,
// EndTxn with no transaction, offsets of a group not in the transaction, a timeout
// above the maximum — each with Kafka's code, and nothing changes.
func TestTransactionRefusals(t *testing.T) {
	cat := openSQLite(t)
	if _, err := cat.CreateTopic(t.Context(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cat, kafka.Config{})
	r := rawTo(t, n)
	tid := "refused"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &tid, int32((16 * time.Minute).Milliseconds())
	wantCode(t, "timeout above the maximum", r.do(init).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.InvalidTransactionTimeout)
	init.TransactionTimeoutMillis = 60_000
	ip := r.do(init).(*kmsg.InitProducerIDResponse)
	wantCode(t, "init", ip.ErrorCode, &kerr.Error{Code: 0, Message: "none"})

	v4 := rawCapped(t, n, map[kmsg.Key]int16{kmsg.EndTxn: 4, kmsg.AddPartitionsToTxn: 3, kmsg.TxnOffsetCommit: 4})
	end := func(epoch int16, commit bool, version int16) int16 {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = tid, ip.ProducerID, epoch, commit
		via := r
		if version < 5 {
			via = v4
		}
		return via.do(req).(*kmsg.EndTxnResponse).ErrorCode
	}
	wantCode(t, "EndTxn with no transaction", end(ip.ProducerEpoch, true, 4), kerr.InvalidTxnState)
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = tid, ip.ProducerID, ip.ProducerEpoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "t", []int32{0}
	add.Topics = append(add.Topics, at)
	addResp, err := add.RequestWith(t.Context(), v4.br)
	if err != nil || addResp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add partitions: %+v, %v", addResp, err)
	}
	unknown := *add
	unknown.Topics = []kmsg.AddPartitionsToTxnRequestTopic{at, {Topic: "nope", Partitions: []int32{0}}}
	uResp, err := unknown.RequestWith(t.Context(), v4.br)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "the known partition beside an unknown topic", uResp.Topics[0].Partitions[0].ErrorCode, kerr.OperationNotAttempted)
	wantCode(t, "the unknown topic", uResp.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)

	stale := ip.ProducerEpoch + 1 // ahead or behind: not the producer's epoch
	stAdd := *add
	stAdd.ProducerEpoch = stale
	sResp, err := stAdd.RequestWith(t.Context(), v4.br)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "AddPartitionsToTxn at another epoch", sResp.Topics[0].Partitions[0].ErrorCode, kerr.ProducerFenced)
	aot := kmsg.NewPtrAddOffsetsToTxnRequest()
	aot.TransactionalID, aot.ProducerID, aot.ProducerEpoch, aot.Group = tid, ip.ProducerID, stale, "g"
	wantCode(t, "AddOffsetsToTxn at another epoch", r.do(aot).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, kerr.ProducerFenced)
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.TransactionalID, toc.Group, toc.ProducerID, toc.ProducerEpoch, toc.Generation = tid, "g", ip.ProducerID, ip.ProducerEpoch, -1
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = "t"
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tt.Partitions = append(tt.Partitions, tp)
	toc.Topics = append(toc.Topics, tt)
	tocResp, err := toc.RequestWith(t.Context(), v4.br)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "TxnOffsetCommit v4 of a group not in the transaction", tocResp.Topics[0].Partitions[0].ErrorCode, kerr.InvalidTxnState)
	toc.ProducerEpoch = stale
	tocResp, err = toc.RequestWith(t.Context(), v4.br)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "TxnOffsetCommit at another epoch", tocResp.Topics[0].Partitions[0].ErrorCode, kerr.ProducerFenced)
	wantCode(t, "EndTxn at another epoch", end(stale, true, 4), kerr.ProducerFenced)
	other := ip.ProducerID + 1000
	wrong := *add
	wrong.ProducerID = other
	wResp, err := wrong.RequestWith(t.Context(), v4.br)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "AddPartitionsToTxn of another producer id", wResp.Topics[0].Partitions[0].ErrorCode, kerr.InvalidProducerIDMapping)
	// The transaction holds partition 0 but wrote nothing: it does not hold the stable
	// offset, and nothing was written by the refusals.
	if hw, lso := stableOffsets(t, r, "t", 0); hw != 0 || lso != 0 {
		t.Fatalf("after the refusals: high watermark %d, stable %d", hw, lso)
	}
	// Its abort writes the one marker; a commit asked at the pre-bump epoch of a v5
	// abort is the other decision: refused.
	wantCode(t, "abort (v5)", end(ip.ProducerEpoch, false, 5), &kerr.Error{Code: 0, Message: "none"})
	wantCode(t, "commit retried at the pre-bump epoch", end(ip.ProducerEpoch, true, 5), kerr.InvalidTxnState)
	wantCode(t, "abort retried at the pre-bump epoch", end(ip.ProducerEpoch, false, 5), &kerr.Error{Code: 0, Message: "none"})
	if hw, lso := stableOffsets(t, r, "t", 0); hw != 1 || lso != 1 {
		t.Fatalf("after the abort: high watermark %d, stable %d; want 1, 1", hw, lso)
	}
}

// TestTransactionTimeout: a producer that disappears mid-transaction is aborted once
// its timeout has passed, by the reaper, and the stable offset moves on.
func TestTransactionTimeout(t *testing.T) {
	cat := openSQLite(t)
	if _, err := cat.CreateTopic(t.Context(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cat, kafka.Config{})
	r := rawTo(t, n)
	tid := "gone"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &tid, 300
	ip := r.do(init).(*kmsg.InitProducerIDResponse)
	batch := batchtest.Batch(t, batchtest.Some(3, time.Now().UnixMilli()), 0, ip.ProducerID, ip.ProducerEpoch, 0)
	batch[22] |= 0x10 // transactional
	batch = withCRC(batch)
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &tid, -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	wantCode(t, "transactional produce (v12 adds the partition)", r.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode, &kerr.Error{Code: 0, Message: "none"})
	if hw, lso := stableOffsets(t, r, "t", 0); hw != 3 || lso != 0 {
		t.Fatalf("open: high watermark %d, stable %d; want 3, 0", hw, lso)
	}
	testwait.Until(t, 15*time.Second, "the transaction aborted at its timeout", func() bool {
		if _, err := n.core.ReapTxns(t.Context()); err != nil {
			t.Fatal(err)
		}
		hw, lso := stableOffsets(t, r, "t", 0)
		return lso == hw && hw == 4
	})
	if got := consumeValues(t, n.addr, "t", kgo.ReadCommitted(), 1, time.Second); len(got) != 0 {
		t.Fatalf("read committed after the timeout: %v, want nothing", got)
	}
	// The late producer is fenced.
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = tid, ip.ProducerID, ip.ProducerEpoch, true
	wantCode(t, "the late producer's commit", r.do(end).(*kmsg.EndTxnResponse).ErrorCode, kerr.ProducerFenced)
}

// TestMarkersReadByFranzGo: a rendered marker is the control batch franz-go's fetch
// processing takes: one control record at its offset, the next offset after it.
func TestMarkersReadByFranzGo(t *testing.T) {
	for _, commit := range []bool{true, false} {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.RecordBatches = segment.ControlBatch(10, 7, 1, commit, 1000)
		rp.HighWatermark, rp.LastStableOffset = 11, 11
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{KeepControlRecords: true, Offset: 10,
			IsolationLevel: kgo.ReadCommitted(), Topic: "t"}, &rp, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil || len(fp.Records) != 1 || !fp.Records[0].Attrs.IsControl() || fp.Records[0].Offset != 10 || next != 11 {
			t.Fatalf("commit %v: %+v, next %d", commit, fp, next)
		}
	}
}
