package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/ctxwait"
)

// The transactional workload: Kafka's consume-transform-produce loop, exactly once.
// Transactors (franz-go GroupTransactSessions, members of one group) consume the
// workload's topic read_committed and, for every record, produce one output record —
// "label|input partition|input offset|input value", to a random partition of the output
// topic — then commit the transaction with the consumed offsets in it. A transaction
// that fails leaves its outcome unknown, and the transactor starts over as a new
// session (InitProducerId fences the old one and aborts what it left open).
//
// A read_committed franz-go consumer reads the output topic during the run; after it,
// the final read reads it read_committed over HTTP, once no transaction holds its last
// stable offset (the nodes' reaper aborts what a failed transactor left open). The
// checker (txn_check.go) judges the transactions from the history alone.

// txnSep separates the fields of an output value.
const txnSep = "|"

// txnConfigured reports whether the workload runs transactors.
func (c KafkaConfig) txnConfigured() bool { return len(c.Seeds) > 0 && c.Transactors > 0 }

// setupTxn creates the output topic.
func (w *Workload) setupTxn(ctx context.Context) error {
	if !w.cfg.Kafka.txnConfigured() {
		return nil
	}
	for {
		_, err := w.cli.CreateTopic(ctx, w.cfg.Kafka.TxnTopic, w.cfg.Partitions, map[string]string{"value.format": "string"})
		if err == nil || client.HasCode(err, "topic_exists") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("jepsen: create topic %s: %w", w.cfg.Kafka.TxnTopic, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// startTxn starts the transactors (until gctx ends: they keep consuming while the
// producers settle) and the output topic's reader (until ctx ends).
func (w *Workload) startTxn(ctx, gctx context.Context) {
	if !w.cfg.Kafka.txnConfigured() {
		return
	}
	for i := range w.cfg.Kafka.Transactors {
		w.groupWG.Go(func() { w.transact(gctx, fmt.Sprintf("t%d", i)) })
	}
	w.goRun(func() { w.readOutputs(ctx) })
}

// transact runs one transactor until ctx ends, as a new session after every failure.
func (w *Workload) transact(ctx context.Context, name string) {
	k := w.cfg.Kafka
	n := 0
	for ctx.Err() == nil {
		sess, err := kgo.NewGroupTransactSession(
			kgo.SeedBrokers(k.Seeds...), kgo.TransactionalID("jepsen-"+name), kgo.TransactionTimeout(k.TxnTimeout),
			kgo.ConsumerGroup(k.TxnGroup), kgo.ConsumeTopics(w.cfg.Topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
			kgo.SessionTimeout(w.cfg.SessionTimeout), kgo.RebalanceTimeout(10*time.Second),
			kgo.HeartbeatInterval(500*time.Millisecond), kgo.FetchMaxWait(500*time.Millisecond),
			kgo.MetadataMaxAge(2*time.Second), kgo.MetadataMinAge(250*time.Millisecond),
			kgo.RequestTimeoutOverhead(5*time.Second),
		)
		if err != nil {
			w.cfg.Log.Error("kafka transactor", "err", err)
			return
		}
		err = w.transactions(ctx, sess, name, &n)
		sess.Close()
		if err != nil {
			w.hist.AddEvent("workload", fmt.Sprintf("transactor %s starts over: %v", name, err))
			ctxwait.Sleep(ctx, 500*time.Millisecond)
		}
	}
}

// transactions runs one session's transactions until ctx ends or one fails.
func (w *Workload) transactions(ctx context.Context, sess *kgo.GroupTransactSession, name string, n *int) error {
	k := w.cfg.Kafka
	for ctx.Err() == nil {
		fs := sess.PollRecords(ctx, 100)
		at := time.Now()
		var recs []*kgo.Record
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Err != nil || len(p.Records) == 0 {
				return
			}
			rd := Read{Consumer: name, Mode: ReadGroup, Group: k.TxnGroup, Topic: p.Topic, Partition: p.Partition,
				From: -1, HWM: p.HighWatermark, At: at, Next: p.Records[len(p.Records)-1].Offset + 1}
			for _, r := range p.Records {
				rd.Records = append(rd.Records, ReadRecord{Offset: r.Offset, Value: string(r.Value)})
			}
			w.hist.AddRead(rd)
			recs = append(recs, p.Records...)
		})
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		*n++
		t := Txn{Transactor: name, Label: fmt.Sprintf("%s-%d", name, *n), Start: time.Now()}
		// The transaction runs to its end whatever the run does meanwhile: cutting it
		// short would only make its outcome unknown.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		var (
			mu     sync.Mutex
			failed []error
		)
		for _, r := range recs {
			t.Inputs = append(t.Inputs, TxnInput{Partition: r.Partition, Offset: r.Offset})
			out := TxnOutput{Partition: rand.Int32N(w.cfg.Partitions),
				Value: fmt.Sprintf("%s%s%d%s%d%s%s", t.Label, txnSep, r.Partition, txnSep, r.Offset, txnSep, r.Value)}
			t.Outputs = append(t.Outputs, out)
			sess.Produce(ectx, &kgo.Record{Topic: k.TxnTopic, Partition: out.Partition, Value: []byte(out.Value)}, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
				}
			})
		}
		committed, err := sess.End(ectx, kgo.TryCommit)
		cancel()
		t.End = time.Now()
		switch {
		case err != nil:
			t.Outcome, t.Err = Unknown, err.Error()
		case committed:
			t.Outcome = OK
		default:
			t.Outcome = Aborted
		}
		if len(failed) > 0 {
			msg := fmt.Sprintf("%d outputs failed, the first: %v", len(failed), failed[0])
			if t.Err != "" {
				msg = t.Err + "; " + msg
			}
			t.Err = msg
		}
		w.hist.AddTxn(t)
		if err != nil {
			return fmt.Errorf("end %s: %w", t.Label, err)
		}
	}
	return nil
}

// readOutputs reads the output topic read_committed with franz-go until ctx ends,
// recording every batch: none may hold an aborted transaction's record.
func (w *Workload) readOutputs(ctx context.Context) {
	k := w.cfg.Kafka
	parts := map[int32]kgo.Offset{}
	for p := range w.cfg.Partitions {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{k.TxnTopic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.MetadataMaxAge(2*time.Second), kgo.MetadataMinAge(250*time.Millisecond), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		w.cfg.Log.Error("kafka output reader", "err", err)
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		at := time.Now()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Err != nil || len(p.Records) == 0 {
				return
			}
			rd := Read{Consumer: "txn-reader", Mode: ReadAssign, Topic: p.Topic, Partition: p.Partition, From: -1,
				HWM: p.HighWatermark, At: at, Next: p.Records[len(p.Records)-1].Offset + 1}
			for _, r := range p.Records {
				rd.Records = append(rd.Records, ReadRecord{Offset: r.Offset, Value: string(r.Value)})
			}
			w.hist.AddTxnRead(rd)
		})
	}
}

// finalTxn reads every output partition read_committed over HTTP, from its log start
// until the last stable offset reaches the high watermark (a transaction a failed
// transactor left open is aborted at its timeout), up to FinalTimeout per partition.
func (w *Workload) finalTxn(parent context.Context) {
	if !w.cfg.Kafka.txnConfigured() {
		return
	}
	topic := w.cfg.Kafka.TxnTopic
	for p := range w.cfg.Partitions {
		ctx, cancel := context.WithTimeout(parent, w.cfg.FinalTimeout)
		f := FinalState{Topic: topic, Partition: p, LogStart: -1}
		var lastErr error
		offset := int64(-1)
		for ctx.Err() == nil {
			parts, err := w.cli.Partitions(ctx, topic)
			if err != nil || int(p) >= len(parts) {
				lastErr = errors.Join(err, fmt.Errorf("partitions: %d answered", len(parts)))
				ctxwait.Sleep(ctx, 200*time.Millisecond)
				continue
			}
			pi := parts[p]
			if offset < 0 {
				offset, f.LogStart = pi.LogStartOffset, pi.LogStartOffset
			}
			f.HWM = pi.HighWatermark
			if offset >= pi.HighWatermark && pi.LastStableOffset == pi.HighWatermark {
				f.Complete = true
				break
			}
			if offset >= pi.LastStableOffset {
				lastErr = fmt.Errorf("an open transaction holds the last stable offset at %d (high watermark %d)", pi.LastStableOffset, pi.HighWatermark)
				ctxwait.Sleep(ctx, 200*time.Millisecond)
				continue
			}
			fctx, fcancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
			res, err := w.cli.Fetch(fctx, topic, p, client.FetchOptions{Offset: offset, MaxRecords: 2000, Isolation: client.ReadCommitted})
			fcancel()
			rd := Read{Consumer: "final", Mode: ReadFinal, Topic: topic, Partition: p, From: offset, At: time.Now()}
			if err != nil {
				rd.Err, lastErr = err.Error(), err
				w.hist.AddTxnRead(rd)
				ctxwait.Sleep(ctx, 200*time.Millisecond)
				continue
			}
			rd.Next, rd.HWM, rd.Records = res.NextOffset, res.HighWatermark, readRecords(res.Records)
			w.hist.AddTxnRead(rd)
			if res.NextOffset <= offset {
				lastErr = fmt.Errorf("fetch at %d below the last stable offset %d answered next offset %d", offset, pi.LastStableOffset, res.NextOffset)
				ctxwait.Sleep(ctx, 200*time.Millisecond)
				continue
			}
			offset = res.NextOffset
		}
		if !f.Complete {
			f.Err = fmt.Sprintf("read to %d of %d: %v", offset, f.HWM, errors.Join(lastErr, ctx.Err()))
		}
		cancel()
		w.hist.AddTxnFinal(f)
	}
}
