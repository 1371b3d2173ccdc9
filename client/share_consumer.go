package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
)

// ErrReject, wrapped in a ShareHandler's error (Reject), rejects the record: it is
// archived and never delivered again. Any other error releases it for redelivery,
// until the group's share.delivery.count.limit archives it.
var ErrReject = errors.New("record rejected")

// Reject wraps err so that a ShareHandler returning it rejects the record.
func Reject(err error) error { return fmt.Errorf("%w: %w", ErrReject, err) }

// ShareRecord is a record a share consumer hands its handler.
type ShareRecord struct {
	Topic     string
	Partition int32
	v1.ShareRecord
}

// ShareHandler processes one record: nil accepts it, an error wrapping ErrReject
// rejects it, any other error releases it for redelivery. It should return soon after
// ctx is done.
type ShareHandler func(ctx context.Context, r ShareRecord) error

// ShareConsumerConfig configures a ShareConsumer.
type ShareConsumerConfig struct {
	Group  string
	Topics []string
	// MaxRecords bounds each acquisition. Default 100.
	MaxRecords int
	// Wait is how long an acquisition waits for records when none are available.
	// Default 5s.
	Wait time.Duration
	// ShutdownTimeout bounds the acknowledgements sent once Run's context is done
	// (what was handled, and the release of what was not). Default 10s.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
}

// ShareConsumer is a member of a share group over HTTP: it acquires records, hands
// each to a handler, and acknowledges them by the handler's answer. While a handler
// runs, the records held are renewed at half the lock duration, so a slow handler
// keeps them; on shutdown what was not handled is released at once rather than at
// its lock deadline. Delivery is at least once: records whose acknowledgement is
// refused (their lock passed) come back.
type ShareConsumer struct {
	c   *Client
	cfg ShareConsumerConfig
	log *slog.Logger

	mu     sync.Mutex
	member string
}

// NewShareConsumer makes a share consumer; Run starts it.
func NewShareConsumer(c *Client, cfg ShareConsumerConfig) (*ShareConsumer, error) {
	if cfg.Group == "" || len(cfg.Topics) == 0 {
		return nil, errors.New("share consumer: Group and Topics are required")
	}
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = 100
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 5 * time.Second
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ShareConsumer{c: c, cfg: cfg, log: log}, nil
}

// MemberID is the member's id ("" before its first acquisition).
func (sc *ShareConsumer) MemberID() string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.member
}

// Run acquires and handles records until ctx is done (then nil) or the server refuses
// the member for good (its error); either way the member then leaves the group.
func (sc *ShareConsumer) Run(ctx context.Context, h ShareHandler) error {
	defer sc.leave(ctx)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		res, err := sc.c.AcquireShareRecords(ctx, sc.cfg.Group, ShareAcquireRequest{MemberID: sc.MemberID(),
			Topics: sc.cfg.Topics, MaxRecords: sc.cfg.MaxRecords, Wait: sc.cfg.Wait})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if !IsRetryable(err) && StatusOf(err) != 0 {
				return fmt.Errorf("share consumer %s: %w", sc.cfg.Group, err)
			}
			sc.log.Warn("share consumer: acquisition failed; retrying", "group", sc.cfg.Group, "error", err)
			if sc.c.sleep(ctx, backoff) != nil {
				return nil
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		sc.mu.Lock()
		sc.member = res.MemberID
		sc.mu.Unlock()
		for _, p := range res.Partitions {
			sc.handle(ctx, h, p, res.LockDuration)
		}
	}
	return nil
}

// leave takes the member out of the group, so that what it still holds goes to other
// members at once (and a reset need not wait for its session to lapse).
func (sc *ShareConsumer) leave(ctx context.Context) {
	member := sc.MemberID()
	if member == "" {
		return
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sc.cfg.ShutdownTimeout)
	defer cancel()
	if err := sc.c.LeaveShareGroup(lctx, sc.cfg.Group, member); err != nil {
		sc.log.Warn("share consumer: leaving the group failed; its session lapses instead", "group", sc.cfg.Group, "error", err)
	}
}

// outcome is a record's acknowledgement type.
type outcome struct {
	offset int64
	typ    string
}

// handle hands an acquisition's records to h, renewing their lock meanwhile, and
// acknowledges them.
func (sc *ShareConsumer) handle(ctx context.Context, h ShareHandler, p ShareAcquisition, lock time.Duration) {
	if len(p.Records) == 0 {
		return
	}
	member := sc.MemberID()
	var renewMu sync.Mutex // a renewal and the acknowledgement do not cross
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if lock > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc.renew(ctx, p, member, lock, stop, &renewMu)
		}()
	}
	outs := make([]outcome, 0, len(p.Records))
	for _, r := range p.Records {
		typ := AckRelease // not handled: shutting down
		if ctx.Err() == nil {
			switch err := h(ctx, ShareRecord{Topic: p.Topic, Partition: p.Partition, ShareRecord: r}); {
			case err == nil:
				typ = AckAccept
			case errors.Is(err, ErrReject):
				typ = AckReject
			}
		}
		outs = append(outs, outcome{r.Offset, typ})
	}
	close(stop)
	wg.Wait()
	renewMu.Lock()
	defer renewMu.Unlock()
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sc.cfg.ShutdownTimeout)
	defer cancel()
	ack := ShareAck{AcquisitionID: p.AcquisitionID, Ranges: outcomeRanges(outs)}
	if err := sc.c.AcknowledgeShareRecords(actx, sc.cfg.Group, member, []ShareAck{ack}); err != nil {
		// The records come back to the group (at their lock deadline at the latest)
		// and are delivered again: at least once.
		sc.log.Warn("share consumer: acknowledgement refused; the records will be delivered again",
			"group", sc.cfg.Group, "topic", p.Topic, "partition", p.Partition, "error", err)
	}
}

// renew renews the acquisition's records at half the lock duration until stop.
func (sc *ShareConsumer) renew(ctx context.Context, p ShareAcquisition, member string, lock time.Duration, stop <-chan struct{}, mu *sync.Mutex) {
	outs := make([]outcome, len(p.Records))
	for i, r := range p.Records {
		outs[i] = outcome{r.Offset, AckRenew}
	}
	ack := ShareAck{AcquisitionID: p.AcquisitionID, Ranges: outcomeRanges(outs)}
	t := time.NewTicker(lock / 2)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		mu.Lock()
		err := sc.c.AcknowledgeShareRecords(ctx, sc.cfg.Group, member, []ShareAck{ack})
		mu.Unlock()
		if err != nil && ctx.Err() == nil {
			sc.log.Warn("share consumer: lock renewal refused", "group", sc.cfg.Group, "topic", p.Topic, "partition", p.Partition, "error", err)
			return
		}
	}
}

// outcomeRanges merges consecutive offsets with one type into ranges.
func outcomeRanges(outs []outcome) []ShareAckRange {
	var rs []ShareAckRange
	for _, o := range outs {
		if n := len(rs); n > 0 && rs[n-1].Type == o.typ && rs[n-1].Last+1 == o.offset {
			rs[n-1].Last = o.offset
			continue
		}
		rs = append(rs, ShareAckRange{First: o.offset, Last: o.offset, Type: o.typ})
	}
	return rs
}
