package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Batch is what a Consumer hands its handler: records of one partition, in offset order.
type Batch struct {
	Topic     string
	Partition int32
	Records   []Record
	// NextOffset is the offset after the last record: what a commit of this batch
	// stores.
	NextOffset    int64
	HighWatermark int64
}

// Handler processes one batch. It runs on the partition's own goroutine, so handlers of
// different partitions run concurrently and one partition's batches never do. ctx ends
// when the partition is revoked or lost or the consumer stops: a handler that returns
// early because of that has not processed its batch. Any other error stops the
// consumer: Run returns it.
type Handler func(ctx context.Context, b Batch) error

// Consumer start positions, where a partition without a committed offset (or with one
// outside the log) starts.
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
)

// ConsumerConfig configures a Consumer. Zero values take the documented defaults.
type ConsumerConfig struct {
	Group  string
	Topics []string
	// MemberID identifies this member; default a random one per Consumer.
	MemberID string
	// SessionTimeout is the member's lease. Without a successful heartbeat for this long
	// the server gives its partitions away, and the consumer stops processing on its
	// own before that (at nine tenths of it, counted from when the last successful
	// heartbeat was sent, on the monotonic clock). Default 30s.
	SessionTimeout time.Duration
	// Assignor is "sticky" (default), "range" or "roundrobin".
	Assignor string
	// ManualCommit turns auto-commit off: the application commits with Commit (from the
	// handler, or from OnRevoked for partitions being given back). Default: auto-commit.
	ManualCommit bool
	// AutoCommitInterval is how often processed offsets are committed; they are also
	// committed when a partition is revoked and when the consumer stops. Default 1s.
	AutoCommitInterval time.Duration
	// StartAt is StartEarliest (default) or StartLatest.
	StartAt string
	// MaxRecords bounds a fetch; default: the server's.
	MaxRecords int
	// FetchWait is the long-poll of each fetch. Default min(2s, SessionTimeout/3).
	FetchWait time.Duration
	// Isolation of every fetch (FetchOptions.Isolation): the server's read_committed
	// when empty, so a member never sees records of open or aborted Kafka
	// transactions.
	Isolation Isolation
	// OnAssigned is called with partitions newly assigned, before they are fetched.
	OnAssigned func(ctx context.Context, tps []TopicPartition)
	// OnRevoked is called with partitions being given back, after their handlers have
	// returned and (with auto-commit) their offsets were committed, and before the
	// revocation is acknowledged: a manual committer commits here.
	OnRevoked func(ctx context.Context, tps []TopicPartition)
	// OnLost is called with partitions lost without a chance to commit: the session
	// timed out or the server fenced the member. Their handlers have returned.
	OnLost func(tps []TopicPartition)
	// OnError is called with each failure that keeps the consumer from making progress:
	// a heartbeat that failed (the server unreachable, credentials refused, the catalog
	// down), a subscribed topic that does not exist (*Error with code topic_not_found),
	// a start position that could not be looked up, a fetch that failed. The consumer
	// keeps retrying whatever the error — it may legitimately start before its topic
	// exists — so giving up is the caller's choice (cancel Run's context). It runs on
	// the consumer's goroutines: it must not block. Errors are *Error when the server
	// answered (branch with HasCode), transport errors otherwise. Each is also logged.
	OnError func(err error)
	// Logger receives the consumer's own log lines; default: discarded.
	Logger *slog.Logger
}

// DefaultSessionTimeout is ConsumerConfig.SessionTimeout when zero.
const DefaultSessionTimeout = 30 * time.Second

// Consumer is a member of a consumer group over the HTTP API: it heartbeats in the
// background, processes the partitions the server assigns it (one goroutine each,
// long-polling fetches from the committed offset), gives partitions back only after
// their processing stopped, commits, and fences itself when its session may have timed
// out. Create it with NewConsumer and run it with Run.
//
// A partition never starts at a guessed position. It starts at its committed offset,
// or at StartAt only when a successful lookup says it has none (or that the offset is
// out of range); a lookup that fails is retried with backoff, and reported through
// OnError, until it succeeds, the partition is revoked or the consumer stops. The
// position a successful lookup gave is the partition's baseline: nothing is committed
// for a partition before it has one, and auto-commit never commits below it — only the
// application moves a committed offset back, with Commit.
type Consumer struct {
	c   *Client
	cfg ConsumerConfig
	log *slog.Logger

	base     time.Time    // monotonic origin of deadline
	deadline atomic.Int64 // ns since base after which this member must not process

	// reqMu serialises heartbeats and commits, so a commit always carries the epoch
	// of the last answer.
	reqMu sync.Mutex

	mu        sync.Mutex
	epoch     int32
	parts     map[TopicPartition]*partWorker // held: processing, or being given back
	processed map[TopicPartition]int64       // next offset after the last processed batch
	committed map[TopicPartition]int64
	baseline  map[TopicPartition]int64 // where a successful lookup said the worker starts
	failing   map[string]error         // what keeps the consumer from progress now, by what it was doing
	topicSeen map[string]bool          // subscribed topics known to exist since the last join (the coordinator's alone)
	failErr   error
	fail      context.CancelFunc

	wake chan struct{} // a revocation finished: heartbeat now
	wg   sync.WaitGroup
}

type partWorker struct {
	tp       TopicPartition
	cancel   context.CancelFunc
	done     chan struct{}
	revoking bool
}

// NewConsumer checks cfg and returns a consumer; nothing is sent until Run.
func NewConsumer(c *Client, cfg ConsumerConfig) (*Consumer, error) {
	if cfg.Group == "" {
		return nil, errors.New("consumer: Group is required")
	}
	if len(cfg.Topics) == 0 {
		return nil, errors.New("consumer: Topics: subscribe to at least one topic")
	}
	if cfg.MemberID == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("consumer: member id: %w", err)
		}
		cfg.MemberID = "strata-go-" + hex.EncodeToString(b[:])
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.AutoCommitInterval <= 0 {
		cfg.AutoCommitInterval = time.Second
	}
	switch cfg.StartAt {
	case "":
		cfg.StartAt = StartEarliest
	case StartEarliest, StartLatest:
	default:
		return nil, fmt.Errorf("consumer: StartAt %q: use %q or %q", cfg.StartAt, StartEarliest, StartLatest)
	}
	if cfg.FetchWait <= 0 {
		cfg.FetchWait = min(2*time.Second, cfg.SessionTimeout/3)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Consumer{
		c: c, cfg: cfg,
		log:       log.With("component", "consumer", "group", cfg.Group, "member", cfg.MemberID),
		base:      time.Now(),
		parts:     map[TopicPartition]*partWorker{},
		processed: map[TopicPartition]int64{},
		committed: map[TopicPartition]int64{},
		baseline:  map[TopicPartition]int64{},
		failing:   map[string]error{},
		topicSeen: map[string]bool{},
		wake:      make(chan struct{}, 1),
	}, nil
}

// MemberID is the member's id.
func (gc *Consumer) MemberID() string { return gc.cfg.MemberID }

// Epoch is the member epoch of the last heartbeat answer (0 while not a member).
func (gc *Consumer) Epoch() int32 {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return gc.epoch
}

// Assignment lists the partitions being processed (held and not being given back).
func (gc *Consumer) Assignment() []TopicPartition {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	var out []TopicPartition
	for tp, w := range gc.parts {
		if !w.revoking {
			out = append(out, tp)
		}
	}
	sortTPs(out)
	return out
}

// alive says whether the session can still be live: a member past its deadline stops
// processing, whatever its goroutines were doing when the process was paused.
func (gc *Consumer) alive() bool {
	d := gc.deadline.Load()
	return d > 0 && time.Since(gc.base).Nanoseconds() < d
}

// Run joins the group and processes assigned partitions with h until ctx ends (it then
// gives its partitions back, commits, leaves the group and returns nil) or h fails (the
// same, returning h's error). A consumer that ctx stops while something keeps it from
// progress (what OnError was last told and nothing has cured since) returns that
// error, so a deadline never ends it silently. Run once per Consumer.
func (gc *Consumer) Run(ctx context.Context, h Handler) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	gc.mu.Lock()
	gc.fail = cancel
	gc.mu.Unlock()

	err := gc.loop(runCtx, h)
	stuck := gc.stuck() // before stopping, which gives every partition up

	// Stop: give everything back, commit, leave.
	stopCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), gc.cfg.SessionTimeout)
	defer stop()
	gc.mu.Lock()
	var all []*partWorker
	for _, w := range gc.parts {
		if !w.revoking { // those are being given back already
			w.revoking = true
			all = append(all, w)
		}
	}
	gc.mu.Unlock()
	if len(all) > 0 {
		gc.revoke(stopCtx, all)
	}
	gc.wg.Wait()
	gc.reqMu.Lock()
	gc.mu.Lock()
	epoch := gc.epoch
	gc.epoch = 0
	gc.mu.Unlock()
	if epoch > 0 {
		if _, lerr := gc.c.Heartbeat(stopCtx, gc.cfg.Group, HeartbeatRequest{MemberID: gc.cfg.MemberID, MemberEpoch: -1}); lerr != nil {
			gc.log.Warn("leave group", "err", lerr)
		}
	}
	gc.reqMu.Unlock()
	gc.mu.Lock()
	ferr := gc.failErr
	gc.mu.Unlock()
	if ferr != nil {
		return ferr
	}
	if err != nil && ctx.Err() == nil {
		return err
	}
	if stuck != nil {
		return fmt.Errorf("consumer: stopped while failing: %w", stuck)
	}
	return nil
}

// report records and announces a failure that keeps the consumer from progress; what
// says what was being attempted, and a later resolved(what) clears it.
func (gc *Consumer) report(what string, err error) {
	gc.mu.Lock()
	gc.failing[what] = err
	gc.mu.Unlock()
	gc.log.Warn(what, "err", err)
	if gc.cfg.OnError != nil {
		gc.cfg.OnError(err)
	}
}

// resolved clears a failure: what now succeeds.
func (gc *Consumer) resolved(what string) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	delete(gc.failing, what)
}

// resolvedPrefix clears every failure whose what starts with prefix.
func (gc *Consumer) resolvedPrefix(prefix string) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	for what := range gc.failing {
		if strings.HasPrefix(what, prefix) {
			delete(gc.failing, what)
		}
	}
}

// stuck returns the failures not cured yet (nil when none), in a stable order.
func (gc *Consumer) stuck() error {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	whats := make([]string, 0, len(gc.failing))
	for what := range gc.failing {
		whats = append(whats, what)
	}
	slices.Sort(whats)
	errs := make([]error, len(whats))
	for i, what := range whats {
		errs[i] = gc.failing[what]
	}
	return errors.Join(errs...)
}

// setFailure records the first handler error and stops Run.
func (gc *Consumer) setFailure(err error) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.failErr == nil {
		gc.failErr = err
	}
	if gc.fail != nil {
		gc.fail()
	}
}

// fencedCode says whether a server answer means this member is no longer one.
func fencedCode(err error) bool {
	return HasCode(err, CodeUnknownMember) || HasCode(err, CodeStaleMemberEpoch) || HasCode(err, CodeGroupNotFound)
}

// loop is the coordinator: it heartbeats, reconciles, auto-commits and fences.
func (gc *Consumer) loop(ctx context.Context, h Handler) error {
	interval := HeartbeatIntervalFor(gc.cfg.SessionTimeout)
	autoCommit := time.NewTicker(gc.cfg.AutoCommitInterval)
	defer autoCommit.Stop()
	fence := time.NewTimer(time.Hour)
	fence.Stop()
	defer fence.Stop()
	next := time.NewTimer(0)
	defer next.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-next.C:
		case <-gc.wake:
		case <-fence.C:
			if !gc.alive() {
				gc.log.Warn("session may have timed out: stopping processing and joining again")
				gc.loseAll()
				resetTimer(next, 0)
			}
			continue
		case <-autoCommit.C:
			if !gc.cfg.ManualCommit {
				if err := gc.commitProcessed(ctx, nil); err != nil && ctx.Err() == nil {
					gc.log.Warn("auto-commit", "err", err)
					if fencedCode(err) || HasCode(err, CodeNotOwner) {
						gc.loseAll()
						resetTimer(next, 0)
					}
				}
			}
			continue
		}
		d, err := gc.heartbeat(ctx, h)
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			failures = 0
			interval = d
			gc.resolved("heartbeat")
			resetTimer(fence, time.Duration(gc.deadline.Load()-time.Since(gc.base).Nanoseconds()))
		case fencedCode(err):
			gc.log.Warn("fenced by the server: stopping processing and joining again", "err", err)
			gc.loseAll()
			failures++
		default:
			gc.report("heartbeat", err)
			failures++
		}
		wait := interval
		if failures > 0 {
			wait = min(interval, time.Duration(failures)*100*time.Millisecond)
		}
		resetTimer(next, wait)
	}
}

// HeartbeatIntervalFor is the interval a consumer uses before the server has answered:
// a tenth of the session, as the server computes it.
func HeartbeatIntervalFor(session time.Duration) time.Duration {
	return min(max(session/10, 10*time.Millisecond), 5*time.Second)
}

func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	select {
	case <-t.C:
	default:
	}
	t.Reset(max(d, 0))
}

// heartbeat sends one heartbeat and reconciles with its answer. It returns the interval
// to wait.
func (gc *Consumer) heartbeat(ctx context.Context, h Handler) (time.Duration, error) {
	gc.reqMu.Lock()
	gc.mu.Lock()
	req := HeartbeatRequest{MemberID: gc.cfg.MemberID, MemberEpoch: gc.epoch, SessionTimeout: gc.cfg.SessionTimeout}
	if gc.epoch == 0 {
		req.Topics = gc.cfg.Topics
		req.Assignor = gc.cfg.Assignor
	}
	held := make([]TopicPartition, 0, len(gc.parts))
	for tp := range gc.parts {
		held = append(held, tp)
	}
	gc.mu.Unlock()
	req.Owned = groupTPs(held)

	// The lease is renewed from when the server reads this, no earlier than now: so the
	// deadline counts from the send.
	sent := time.Since(gc.base)
	hctx, cancel := context.WithTimeout(ctx, max(gc.cfg.SessionTimeout/2, 50*time.Millisecond))
	res, err := gc.c.Heartbeat(hctx, gc.cfg.Group, req)
	cancel()
	if err != nil {
		gc.reqMu.Unlock()
		return 0, err
	}
	deadline := sent + gc.cfg.SessionTimeout*9/10
	if time.Since(gc.base) >= deadline {
		// The answer came too late to trust (the process was paused, or the network
		// stalled): behave as a member whose session ended.
		gc.reqMu.Unlock()
		gc.log.Warn("heartbeat answered after the session deadline: stopping processing and joining again")
		gc.loseAll()
		return 0, nil
	}
	gc.deadline.Store(deadline.Nanoseconds())
	gc.mu.Lock()
	gc.epoch = res.MemberEpoch
	assigned := map[TopicPartition]bool{}
	for _, a := range res.Assignment {
		for _, p := range a.Partitions {
			assigned[TopicPartition{a.Topic, p}] = true
		}
	}
	var revoke []*partWorker
	for tp, w := range gc.parts {
		if !assigned[tp] && !w.revoking {
			w.revoking = true
			revoke = append(revoke, w)
		}
	}
	var added []TopicPartition
	for tp := range assigned {
		if _, ok := gc.parts[tp]; !ok {
			added = append(added, tp)
		}
	}
	gc.mu.Unlock()
	gc.reqMu.Unlock()

	if len(revoke) > 0 {
		gc.wg.Add(1)
		go func() {
			defer gc.wg.Done()
			// Finishes even if Run is stopping: the commit and OnRevoked belong to it.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), gc.cfg.SessionTimeout)
			defer cancel()
			gc.revoke(rctx, revoke)
			gc.signalWake()
		}()
	}
	if len(added) > 0 {
		sortTPs(added)
		gc.assign(ctx, h, added)
	}
	gc.checkTopics(ctx, req.MemberEpoch == 0, res.Assignment)
	return res.HeartbeatInterval, nil
}

// checkTopics looks up the subscribed topics that the assignment leaves out and that
// are not known to exist since the member (re)joined: the server gives a topic that
// does not exist to nobody, silently, so the consumer says so (and looks again at
// every heartbeat until it exists). Only the coordinator goroutine calls it.
func (gc *Consumer) checkTopics(ctx context.Context, joined bool, assignment []TopicPartitions) {
	if joined {
		clear(gc.topicSeen)
	}
	for _, a := range assignment {
		gc.topicSeen[a.Topic] = true
	}
	for _, t := range gc.cfg.Topics {
		what := "topic " + t
		if gc.topicSeen[t] {
			gc.resolved(what)
			continue
		}
		tctx, cancel := context.WithTimeout(ctx, gc.lookupTimeout())
		_, err := gc.c.Topic(tctx, t)
		cancel()
		switch {
		case err == nil:
			gc.topicSeen[t] = true
			gc.resolved(what)
		case HasCode(err, v1.CodeTopicNotFound):
			gc.report(what, fmt.Errorf("subscribed to %s, which does not exist (yet): %w", t, err))
		}
		// Any other error: the heartbeats' own failures say it; look again next time.
	}
}

func (gc *Consumer) signalWake() {
	select {
	case gc.wake <- struct{}{}:
	default:
	}
}

// assign starts workers for newly assigned partitions. One lookup of the committed
// offsets serves them all; when it fails, each worker looks its own up again, retrying
// until it succeeds (consumer_worker.go): a failed lookup is never "nothing committed".
func (gc *Consumer) assign(ctx context.Context, h Handler, tps []TopicPartition) {
	// Bounded: the coordinator heartbeats too, and a node that does not answer must not
	// hold it past the session.
	lctx, cancel := context.WithTimeout(ctx, gc.lookupTimeout())
	offs, err := gc.c.GroupOffsets(lctx, gc.cfg.Group)
	cancel()
	if err != nil && ctx.Err() == nil {
		gc.log.Warn("read committed offsets at assignment: each partition looks again", "err", err)
	}
	known := err == nil
	if gc.cfg.OnAssigned != nil {
		gc.cfg.OnAssigned(ctx, slices.Clone(tps))
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	for _, tp := range tps {
		wctx, cancel := context.WithCancel(ctx)
		w := &partWorker{tp: tp, cancel: cancel, done: make(chan struct{})}
		gc.parts[tp] = w
		off := committedOf(offs, tp)
		if off >= 0 {
			gc.committed[tp] = off
		}
		delete(gc.processed, tp)
		delete(gc.baseline, tp)
		gc.wg.Add(1)
		go func() {
			defer gc.wg.Done()
			defer close(w.done)
			gc.work(wctx, h, tp, off, known)
		}()
	}
}

// revoke stops the workers, waits for their handlers, commits (auto-commit), calls
// OnRevoked, and only then forgets the partitions, so the next heartbeat acknowledges.
func (gc *Consumer) revoke(ctx context.Context, ws []*partWorker) {
	tps := make([]TopicPartition, len(ws))
	for i, w := range ws {
		w.cancel()
		tps[i] = w.tp
	}
	for _, w := range ws {
		<-w.done
	}
	sortTPs(tps)
	if !gc.cfg.ManualCommit && gc.alive() {
		if err := gc.commitProcessed(ctx, tps); err != nil {
			gc.log.Warn("commit on revocation", "partitions", fmt.Sprint(tps), "err", err)
		}
	}
	if gc.cfg.OnRevoked != nil {
		gc.cfg.OnRevoked(ctx, slices.Clone(tps))
	}
	gc.mu.Lock()
	for _, w := range ws {
		if gc.parts[w.tp] == w {
			delete(gc.parts, w.tp)
		}
		delete(gc.processed, w.tp)
		delete(gc.committed, w.tp)
		delete(gc.baseline, w.tp)
	}
	gc.mu.Unlock()
}

// loseAll stops every worker without committing (the session ended or the server
// fenced the member), calls OnLost, and makes the next heartbeat join afresh.
func (gc *Consumer) loseAll() {
	gc.deadline.Store(0)
	gc.mu.Lock()
	var ws []*partWorker
	for _, w := range gc.parts {
		w.cancel()
		ws = append(ws, w)
	}
	gc.mu.Unlock()
	for _, w := range ws {
		<-w.done
	}
	tps := make([]TopicPartition, 0, len(ws))
	gc.mu.Lock()
	for _, w := range ws {
		if gc.parts[w.tp] == w {
			delete(gc.parts, w.tp)
			tps = append(tps, w.tp)
		}
		delete(gc.processed, w.tp)
		delete(gc.committed, w.tp)
		delete(gc.baseline, w.tp)
	}
	gc.mu.Unlock()
	sortTPs(tps)
	if gc.cfg.OnLost != nil && len(tps) > 0 {
		gc.cfg.OnLost(tps)
	}
	gc.mu.Lock()
	gc.epoch = 0
	gc.mu.Unlock()
}

// commitProcessed commits the processed offsets not yet committed, of only (all when
// nil). A partition without a baseline, or processed below it, commits nothing: that
// would be a position nobody looked up (processing starts at the baseline and only
// moves forward, so this guards the rule rather than a path known to need it).
func (gc *Consumer) commitProcessed(ctx context.Context, only []TopicPartition) error {
	// The offsets are read and sent under reqMu: an auto-commit that read its offsets
	// before a revocation's commit and sent them after it would move the group back.
	gc.reqMu.Lock()
	defer gc.reqMu.Unlock()
	gc.mu.Lock()
	var offs []GroupOffset
	for tp, off := range gc.processed {
		if only != nil && !slices.Contains(only, tp) {
			continue
		}
		if c, ok := gc.committed[tp]; ok && c == off {
			continue
		}
		if base, ok := gc.baseline[tp]; !ok || off < base {
			gc.log.Error("not committing an offset below the partition's baseline", "partition", tp.String(), "offset", off, "baseline", base, "has_baseline", ok)
			continue
		}
		offs = append(offs, GroupOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: off})
	}
	gc.mu.Unlock()
	if len(offs) == 0 {
		return nil
	}
	if err := gc.commitLocked(ctx, offs); err != nil {
		return err
	}
	gc.mu.Lock()
	for _, o := range offs {
		gc.committed[TopicPartition{o.Topic, o.Partition}] = o.Offset
	}
	gc.mu.Unlock()
	return nil
}

// commitLocked commits offs at the member's epoch; the caller holds reqMu.
func (gc *Consumer) commitLocked(ctx context.Context, offs []GroupOffset) error {
	gc.mu.Lock()
	epoch := gc.epoch
	gc.mu.Unlock()
	if epoch <= 0 {
		return fmt.Errorf("consumer: commit: %s is not a member of group %s right now", gc.cfg.MemberID, gc.cfg.Group)
	}
	return gc.c.CommitOffsets(ctx, gc.cfg.Group, gc.cfg.MemberID, epoch, offs)
}

// Commit commits offsets (the next offset to read) of partitions this member holds, at
// its current epoch. The server refuses partitions it does not own (not_owner) and a
// member it has fenced (unknown_member, stale_member_epoch). With auto-commit the
// processed offsets are committed anyway; Commit is for ManualCommit. An offset below
// where the partition started is the application's explicit seek: auto-commit then
// goes on from there.
func (gc *Consumer) Commit(ctx context.Context, offsets map[TopicPartition]int64) error {
	offs := make([]GroupOffset, 0, len(offsets))
	for tp, off := range offsets {
		offs = append(offs, GroupOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: off})
	}
	sort.Slice(offs, func(i, j int) bool {
		if offs[i].Topic != offs[j].Topic {
			return offs[i].Topic < offs[j].Topic
		}
		return offs[i].Partition < offs[j].Partition
	})
	gc.reqMu.Lock()
	defer gc.reqMu.Unlock()
	if err := gc.commitLocked(ctx, offs); err != nil {
		return err
	}
	gc.mu.Lock()
	for _, o := range offs {
		tp := TopicPartition{o.Topic, o.Partition}
		gc.committed[tp] = o.Offset
		gc.processed[tp] = o.Offset
		if base, ok := gc.baseline[tp]; ok && o.Offset < base {
			gc.baseline[tp] = o.Offset
		}
	}
	gc.mu.Unlock()
	return nil
}

func sortTPs(tps []TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

func groupTPs(tps []TopicPartition) []TopicPartitions {
	sortTPs(tps)
	var out []TopicPartitions
	for _, tp := range tps {
		if len(out) == 0 || out[len(out)-1].Topic != tp.Topic {
			out = append(out, TopicPartitions{Topic: tp.Topic})
		}
		out[len(out)-1].Partitions = append(out[len(out)-1].Partitions, tp.Partition)
	}
	return out
}
