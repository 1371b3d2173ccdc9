package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/ctxwait"
)

// The share-group workload: members of one share group (KIP-932) — over HTTP, and
// over Kafka when the run has Kafka — acquire the workload's topic record by record,
// accept most and release some at random, under the same faults as the rest. Every
// delivery is recorded with its delivery count and, over HTTP, the answer to its
// acknowledgement; after healing, a final member drains the group. The checker
// (share_check.go) proves from the history alone that no record is accepted twice or
// delivered again once accepted, that no two members hold one delivery, that no
// delivery count passes the limit, and that every record is accepted in the end.

// ShareConfig is the share-group part of a workload.
type ShareConfig struct {
	// HTTPMembers and KafkaMembers are members of the share group Group
	// ("jepsen-share"); KafkaMembers only when the run has Kafka. Defaults 2 and 2;
	// negative: none.
	HTTPMembers, KafkaMembers int
	Group                     string
	// Release is the fraction of deliveries released rather than accepted. Default
	// 0.1.
	Release float64
	// Reject is the fraction of deliveries rejected: archived and copied once to the
	// group's dead-letter topic DLQTopic ("dlq.jepsen"). Default 0.01; negative: none.
	Reject   float64
	DLQTopic string
	// Limit is the group's share.delivery.count.limit. Default 10 (Kafka's most): a
	// record released at random that many times is archived unaccepted, once in
	// 10^10 deliveries.
	Limit int
	// Lock is the group's share.record.lock.duration.ms. Default 5s: a killed node's
	// deliveries come back that soon.
	Lock time.Duration
}

func (c ShareConfig) withDefaults() ShareConfig {
	if c.HTTPMembers == 0 {
		c.HTTPMembers = 2
	}
	if c.KafkaMembers == 0 {
		c.KafkaMembers = 2
	}
	if c.Group == "" {
		c.Group = "jepsen-share"
	}
	if c.Release == 0 {
		c.Release = 0.1
	}
	if c.Reject == 0 {
		c.Reject = 0.01
	}
	if c.DLQTopic == "" {
		c.DLQTopic = "dlq.jepsen"
	}
	if c.Limit <= 0 {
		c.Limit = 10
	}
	if c.Lock <= 0 {
		c.Lock = 5 * time.Second
	}
	return c
}

// Share actions and delivery paths.
const (
	ShareAccept  = "accept"
	ShareRelease = "release"
	ShareReject  = "reject"
	ViaHTTP      = "http"
	ViaKafka     = "kafka"
	ViaFinal     = "final"
)

// ShareDelivery is one record handed to one share-group member, and what the member
// did with it: Outcome is the acknowledgement's answer over HTTP (ok, failed: refused,
// unknown); over Kafka franz-go reports acknowledgements per partition, not per
// record, so a Kafka member's is unknown.
type ShareDelivery struct {
	Member        string    `json:"member"`
	Via           string    `json:"via"`
	Partition     int32     `json:"partition"`
	Offset        int64     `json:"offset"`
	Value         string    `json:"value"`
	DeliveryCount int       `json:"delivery_count"`
	Action        string    `json:"action"`
	Outcome       Outcome   `json:"outcome"`
	Err           string    `json:"err,omitempty"`
	At            time.Time `json:"at"`
}

// AddShares records deliveries.
func (h *History) AddShares(d ...ShareDelivery) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Shares = append(h.Shares, d...)
}

// shareConfigured reports whether the workload runs share members.
func (w *Workload) shareConfigured() bool {
	return w.cfg.Share.HTTPMembers > 0 || (len(w.cfg.Kafka.Seeds) > 0 && w.cfg.Share.KafkaMembers > 0)
}

// setupShare configures the group before any member joins: from the earliest offset,
// so that every record of the topic is the group's to deliver.
func (w *Workload) setupShare(ctx context.Context) error {
	if !w.shareConfigured() {
		return nil
	}
	s := w.cfg.Share
	w.hist.ShareGroup, w.hist.ShareLimit = s.Group, s.Limit
	cfg := map[string]string{
		"share.auto.offset.reset":       "earliest",
		"share.delivery.count.limit":    strconv.Itoa(s.Limit),
		"share.record.lock.duration.ms": strconv.FormatInt(s.Lock.Milliseconds(), 10),
	}
	if s.Reject > 0 {
		w.hist.ShareDLQTopic = s.DLQTopic
		cfg["errors.deadletterqueue.topic.name"] = s.DLQTopic
		for {
			_, err := w.cli.CreateTopic(ctx, s.DLQTopic, 1, map[string]string{"value.format": "string", "errors.deadletterqueue.group.enable": "true"})
			if err == nil || client.HasCode(err, "topic_exists") {
				break
			}
			if ctxwait.Sleep(ctx, 200*time.Millisecond) != nil {
				return fmt.Errorf("jepsen: create topic %s: %w", s.DLQTopic, err)
			}
		}
	}
	for {
		_, err := w.cli.ConfigureShareGroup(ctx, s.Group, cfg)
		if err == nil {
			return nil
		}
		if ctxwait.Sleep(ctx, 200*time.Millisecond) != nil {
			return fmt.Errorf("jepsen: configure share group %s: %w", s.Group, err)
		}
	}
}

// startShare starts the share members; they run until gctx ends, then leave.
func (w *Workload) startShare(gctx context.Context) {
	if !w.shareConfigured() {
		return
	}
	for i := range max(w.cfg.Share.HTTPMembers, 0) {
		w.groupWG.Go(func() { w.shareHTTP(gctx, fmt.Sprintf("sh%d", i), ViaHTTP, w.cfg.Share.Release, w.cfg.Share.Reject) })
	}
	if len(w.cfg.Kafka.Seeds) == 0 {
		return
	}
	for i := range max(w.cfg.Share.KafkaMembers, 0) {
		w.groupWG.Go(func() { w.shareKafka(gctx, fmt.Sprintf("sk%d", i)) })
	}
}

// shareHTTP runs one HTTP member until ctx ends: it acquires, decides each record
// (accept; release or reject with probabilities release and reject), acknowledges,
// and records each delivery with the answer. The member leaves at the end, releasing
// what it holds. It answers whether its last acquisition was empty.
func (w *Workload) shareHTTP(ctx context.Context, name, via string, release, reject float64) (idle bool) {
	member := ""
	defer func() {
		if member != "" {
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = w.cli.LeaveShareGroup(lctx, w.cfg.Share.Group, member)
		}
	}()
	for ctx.Err() == nil {
		res, err := w.cli.AcquireShareRecords(ctx, w.cfg.Share.Group, client.ShareAcquireRequest{
			MemberID: member, Topics: []string{w.cfg.Topic}, MaxRecords: 20, Wait: 500 * time.Millisecond})
		if err != nil {
			if client.HasCode(err, "unknown_member_id") || client.HasCode(err, "fenced_member_epoch") {
				member = ""
			}
			ctxwait.Sleep(ctx, 100*time.Millisecond)
			continue
		}
		member = res.MemberID
		if len(res.Partitions) == 0 {
			if via == ViaFinal {
				return true
			}
			continue
		}
		at := time.Now()
		var (
			acks []client.ShareAck
			ds   []ShareDelivery
		)
		for _, p := range res.Partitions {
			ack := client.ShareAck{AcquisitionID: p.AcquisitionID}
			for _, r := range p.Records {
				d := ShareDelivery{Member: name, Via: via, Partition: p.Partition, Offset: r.Offset, DeliveryCount: r.DeliveryCount,
					Action: ShareAccept, At: at}
				_ = json.Unmarshal(r.Value, &d.Value)
				switch x := rand.Float64(); {
				case x < reject:
					d.Action = ShareReject
				case x < reject+release:
					d.Action = ShareRelease
				}
				ack.Ranges = append(ack.Ranges, client.ShareAckRange{First: r.Offset, Last: r.Offset, Type: d.Action})
				ds = append(ds, d)
			}
			acks = append(acks, ack)
		}
		err = w.cli.AcknowledgeShareRecords(ctx, w.cfg.Share.Group, member, acks)
		outcome, msg := OK, ""
		if err != nil {
			outcome, msg = Unknown, err.Error()
			if s := client.StatusOf(err); s >= 400 && s < 500 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests {
				outcome = Failed
			}
		}
		for i := range ds {
			ds[i].Outcome, ds[i].Err = outcome, msg
		}
		w.hist.AddShares(ds...)
	}
	return false
}

// shareKafka runs one franz-go share consumer until ctx ends, recording every record
// it is handed and marking each accepted or, at random, released.
func (w *Workload) shareKafka(ctx context.Context, name string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.cfg.Kafka.Seeds...), kgo.ShareGroup(w.cfg.Share.Group), kgo.ConsumeTopics(w.cfg.Topic),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.MetadataMaxAge(2*time.Second), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		w.cfg.Log.Error("kafka share member", "err", err)
		return
	}
	defer cl.Close() // acknowledges what was marked and leaves the group
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		at := time.Now()
		var ds []ShareDelivery
		fs.EachRecord(func(r *kgo.Record) {
			d := ShareDelivery{Member: name, Via: ViaKafka, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value),
				DeliveryCount: int(r.DeliveryCount()), Action: ShareAccept, Outcome: Unknown, At: at}
			st := kgo.AckAccept
			switch x := rand.Float64(); {
			case x < w.cfg.Share.Reject:
				d.Action, st = ShareReject, kgo.AckReject
			case x < w.cfg.Share.Reject+w.cfg.Share.Release:
				d.Action, st = ShareRelease, kgo.AckRelease
			}
			r.Ack(st)
			ds = append(ds, d)
		})
		w.hist.AddShares(ds...)
	}
}

// finalShare drains the group after healing: one HTTP member accepts everything
// left until an acquisition finds nothing and no share-partition has records in
// flight (a killed member's come back when their locks pass).
func (w *Workload) finalShare(parent context.Context) {
	if !w.shareConfigured() {
		return
	}
	ctx, cancel := context.WithTimeout(parent, w.cfg.FinalTimeout)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		// One member per round: shareHTTP leaves when it returns.
		if !w.shareHTTP(ctx, "final", ViaFinal, 0, 0) {
			break
		}
		g, err := w.cli.DescribeShareGroup(ctx, w.cfg.Share.Group)
		if err != nil {
			last = err
			continue
		}
		done := true
		for _, p := range g.Partitions {
			done = done && p.Lag == 0 && p.Acquired == 0 && p.DeadLetterPending == 0
		}
		if done {
			w.hist.mu.Lock()
			w.hist.ShareDrained = true
			w.hist.mu.Unlock()
			w.readDLQ(ctx)
			return
		}
		ctxwait.Sleep(ctx, 250*time.Millisecond)
	}
	w.hist.AddEvent("workload", fmt.Sprintf("share group not drained: %v", errors.Join(last, ctx.Err())))
}

// ShareDLQRecord is a copy in the dead-letter topic, by the original it names in its
// headers.
type ShareDLQRecord struct {
	Offset    int64  `json:"offset"` // in the dead-letter topic
	Partition int32  `json:"orig_partition"`
	Orig      int64  `json:"orig_offset"`
	Reason    string `json:"reason"`
	Value     string `json:"value"`
}

// readDLQ reads the whole dead-letter topic (every copy is made once nothing is
// pending) into the history.
func (w *Workload) readDLQ(ctx context.Context) {
	if w.hist.ShareDLQTopic == "" {
		return
	}
	var out []ShareDLQRecord
	for offset := int64(0); ctx.Err() == nil; {
		res, err := w.cli.Fetch(ctx, w.hist.ShareDLQTopic, 0, client.FetchOptions{Offset: offset, MaxRecords: 1000})
		if err != nil {
			ctxwait.Sleep(ctx, 200*time.Millisecond)
			continue
		}
		for _, r := range res.Records {
			d := ShareDLQRecord{Offset: r.Offset, Partition: -1, Orig: -1}
			_ = json.Unmarshal(r.Value, &d.Value)
			for _, h := range r.Headers {
				switch h.Key {
				case "__dlq.errors.partition":
					if p, err := strconv.ParseInt(string(h.Value), 10, 32); err == nil {
						d.Partition = int32(p)
					}
				case "__dlq.errors.offset":
					d.Orig, _ = strconv.ParseInt(string(h.Value), 10, 64)
				case "__dlq.errors.reason":
					d.Reason = string(h.Value)
				}
			}
			out = append(out, d)
		}
		if res.NextOffset >= res.HighWatermark {
			w.hist.mu.Lock()
			w.hist.ShareDLQ, w.hist.ShareDLQRead = out, true
			w.hist.mu.Unlock()
			return
		}
		offset = res.NextOffset
	}
}

// sharesByRecord groups deliveries by record.
func sharesByRecord(ds []ShareDelivery) map[pos][]*ShareDelivery {
	out := map[pos][]*ShareDelivery{}
	for i := range ds {
		d := &ds[i]
		out[pos{d.Partition, d.Offset}] = append(out[pos{d.Partition, d.Offset}], d)
	}
	return out
}
