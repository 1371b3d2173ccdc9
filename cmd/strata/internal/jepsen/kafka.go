package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The Kafka-client workload: franz-go producers (idempotent, as franz-go is by default)
// and franz-go group consumers — a classic group (JoinGroup/SyncGroup, the client's
// cooperative-sticky balancer) and a KIP-848 group — on the same topic as the HTTP
// workload, recorded in the same history and judged by the same checker; and the
// transactional consume-transform-produce workload (txn.go).

// KafkaConfig is the Kafka part of a workload. Zero values take the defaults shown;
// without Seeds there is none.
type KafkaConfig struct {
	// Seeds are the nodes' Kafka listeners (the cluster fills them).
	Seeds []string
	// Producers are franz-go idempotent producers. Default 2.
	Producers int
	// ClassicMembers and NextGenMembers are members of the classic group
	// ClassicGroup ("jepsen-kafka-classic") and of the KIP-848 group NextGenGroup
	// ("jepsen-kafka-848"). Defaults 2 and 2; negative: none.
	ClassicMembers, NextGenMembers int
	ClassicGroup, NextGenGroup     string
	// Transactors run the transactional consume-transform-produce loop (txn.go) as
	// members of TxnGroup ("jepsen-kafka-txn"), from the workload's topic to TxnTopic
	// ("jepsen-txn-out"), with transaction.timeout.ms TxnTimeout (10s). Default 2;
	// negative: none.
	Transactors int
	TxnGroup    string
	TxnTopic    string
	TxnTimeout  time.Duration
}

func (c KafkaConfig) withDefaults() KafkaConfig {
	if c.Producers == 0 {
		c.Producers = 2
	}
	if c.ClassicMembers == 0 {
		c.ClassicMembers = 2
	}
	if c.NextGenMembers == 0 {
		c.NextGenMembers = 2
	}
	if c.ClassicGroup == "" {
		c.ClassicGroup = "jepsen-kafka-classic"
	}
	if c.NextGenGroup == "" {
		c.NextGenGroup = "jepsen-kafka-848"
	}
	if c.Transactors == 0 {
		c.Transactors = 2
	}
	if c.TxnGroup == "" {
		c.TxnGroup = "jepsen-kafka-txn"
	}
	if c.TxnTopic == "" {
		c.TxnTopic = "jepsen-txn-out"
	}
	if c.TxnTimeout <= 0 {
		c.TxnTimeout = 10 * time.Second
	}
	return c
}

// kafkaGroups lists the Kafka groups the workload runs.
func (c KafkaConfig) groups() []string {
	var out []string
	if len(c.Seeds) == 0 {
		return nil
	}
	if c.ClassicMembers > 0 {
		out = append(out, c.ClassicGroup)
	}
	if c.NextGenMembers > 0 {
		out = append(out, c.NextGenGroup)
	}
	if c.Transactors > 0 {
		out = append(out, c.TxnGroup)
	}
	return out
}

// startKafka starts the Kafka producers (until ctx ends; Stop then waits for their
// answers, up to ResolveTimeout) and group members (until gctx ends).
func (w *Workload) startKafka(ctx, gctx context.Context) {
	k := w.cfg.Kafka
	if len(k.Seeds) == 0 {
		return
	}
	for i := range k.Producers {
		w.goRun(func() { w.kafkaProduce(ctx, fmt.Sprintf("k%d", i)) })
	}
	for i := range k.ClassicMembers {
		w.groupWG.Go(func() { w.kafkaMember(gctx, k.ClassicGroup, fmt.Sprintf("kc%d", i), false) })
	}
	for i := range k.NextGenMembers {
		w.groupWG.Go(func() { w.kafkaMember(gctx, k.NextGenGroup, fmt.Sprintf("kn%d", i), true) })
	}
	w.startTxn(ctx, gctx)
}

// kafkaProduce produces records one at a time (each waits for the previous one's
// answer, so the history's order per producer is the send order) to random partitions.
// An answered record is ok with its offset; any error leaves its outcome unknown:
// franz-go retries until it knows, and gives up only when the run ends.
func (w *Workload) kafkaProduce(ctx context.Context, name string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.cfg.Kafka.Seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.RequestTimeoutOverhead(5*time.Second), kgo.MetadataMaxAge(2*time.Second), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		w.cfg.Log.Error("kafka producer", "err", err)
		return
	}
	defer cl.Close()
	var pending sync.WaitGroup
	defer pending.Wait()
	for n := 1; ctx.Err() == nil; n++ {
		r := &kgo.Record{Topic: w.cfg.Topic, Partition: rand.Int32N(w.cfg.Partitions), Value: fmt.Appendf(nil, "%s-%d", name, n)}
		req, start := w.hist.NextRequest(), time.Now()
		done := make(chan struct{})
		pending.Add(1)
		// Answers after the run ends still count: the producer settles what it sent.
		cl.Produce(w.resolve, r, func(r *kgo.Record, err error) {
			defer pending.Done()
			defer close(done)
			s := Send{Request: req, Producer: name, Idempotent: true, Topic: r.Topic, Partition: r.Partition,
				Value: string(r.Value), Attempts: 1, Outcome: OK, Offset: r.Offset, Start: start, End: time.Now()}
			if err != nil {
				s.Outcome, s.Offset, s.Err = Unknown, 0, err.Error()
			}
			w.hist.AddSends(s)
		})
		select {
		case <-done:
		case <-w.resolve.Done():
			return
		}
		ctxwait.Sleep(ctx, w.cfg.Interval)
	}
}

// kafkaMember runs one franz-go group member until ctx ends, recording every batch it is
// handed; at the end it commits what it polled and leaves.
func (w *Workload) kafkaMember(ctx context.Context, group, name string, nextGen bool) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(w.cfg.Kafka.Seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(w.cfg.Topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.SessionTimeout(w.cfg.SessionTimeout),
		kgo.RebalanceTimeout(10 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.FetchMaxWait(500 * time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(500 * time.Millisecond), kgo.MetadataMaxAge(2 * time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond), // franz-go refuses a max age below the min (5s by default)
		kgo.RequestTimeoutOverhead(5 * time.Second),
	}
	if nextGen {
		opts = append(opts, kgo.WithContext(context.WithValue(context.Background(), "opt_in_kafka_next_gen_balancer_beta", true)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		w.cfg.Log.Error("kafka group member", "err", err)
		return
	}
	defer cl.Close() // leaves the group
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		at := time.Now()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Err != nil || len(p.Records) == 0 {
				return
			}
			rd := Read{Consumer: name, Mode: ReadGroup, Group: group, Topic: p.Topic, Partition: p.Partition,
				From: -1, HWM: p.HighWatermark, At: at, Next: p.Records[len(p.Records)-1].Offset + 1}
			for _, r := range p.Records {
				rd.Records = append(rd.Records, ReadRecord{Offset: r.Offset, Value: string(r.Value)})
			}
			w.hist.AddRead(rd)
		})
	}
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.CommitUncommittedOffsets(cctx); err != nil {
		w.hist.AddEvent("workload", fmt.Sprintf("kafka member %s: final commit: %v", name, err))
	}
}
