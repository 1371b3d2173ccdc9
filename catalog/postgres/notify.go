package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/ctxwait"
)

// notifyChannel carries commit notifications. Payloads are watermarks
// "topic:partition:hwm" separated by commas (see encodeWatermarks).
const notifyChannel = "strata_commit"

// maxPayload keeps payloads under Postgres's 8000-byte NOTIFY limit.
const maxPayload = 7900

// listenApplicationName names Listen's connections in pg_stat_activity.
const listenApplicationName = "strata-listen"

// notifier sends commit notifications off the commit's path. NOTIFY is never sent inside
// the commit: Postgres serialises the commits of transactions that notify. Watermarks
// queue here, coalesced per partition (only the highest matters), and one owned
// goroutine sends them with one pg_notify per payload, dropping them on error: readers
// also poll.
type notifier struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	mu      sync.Mutex
	pending map[catalog.TopicPartition]int64
	groups  map[string]bool // classic groups that changed (groupChannel)
	wake    chan struct{}

	cancel context.CancelFunc
	done   chan struct{}
}

func startNotifier(pool *pgxpool.Pool, log *slog.Logger) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	n := &notifier{pool: pool, log: log, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go n.run(ctx)
	return n
}

// add queues new high watermarks; it never blocks.
func (n *notifier) add(hw map[catalog.TopicPartition]int64) {
	n.mu.Lock()
	if n.pending == nil {
		n.pending = make(map[catalog.TopicPartition]int64, len(hw))
	}
	for tp, h := range hw {
		if h > n.pending[tp] {
			n.pending[tp] = h
		}
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// addGroup queues a notification that a classic group changed; it never blocks.
func (n *notifier) addGroup(name string) {
	n.mu.Lock()
	if n.groups == nil {
		n.groups = map[string]bool{}
	}
	n.groups[name] = true
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) run(ctx context.Context) {
	defer close(n.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
		}
		n.mu.Lock()
		batch, groups := n.pending, n.groups
		n.pending, n.groups = nil, nil
		n.mu.Unlock()
		n.send(ctx, notifyChannel, encodeWatermarks(batch))
		n.send(ctx, groupChannel, encodeGroups(groups))
	}
}

// send sends payloads on channel, dropping the rest after an error.
func (n *notifier) send(ctx context.Context, channel string, payloads []string) {
	for _, payload := range payloads {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		// A notifying transaction gets an xid and a commit record; it need not wait
		// for a WAL flush, as a lost notification costs only a poll.
		_, err := n.pool.Exec(sctx, `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)`, channel, payload)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				n.log.Debug("notification dropped", "channel", channel, "err", err)
			}
			return
		}
	}
}

// stop ends the goroutine and waits for it; queued notifications are dropped.
func (n *notifier) stop() {
	n.cancel()
	<-n.done
}

// encodeWatermarks lays watermarks out as payloads of at most maxPayload bytes, in
// (topic, partition) order.
func encodeWatermarks(hw map[catalog.TopicPartition]int64) []string {
	keys := slices.SortedFunc(maps.Keys(hw), func(a, b catalog.TopicPartition) int {
		return cmp.Or(cmp.Compare(a.TopicID, b.TopicID), cmp.Compare(a.Partition, b.Partition))
	})
	var out []string
	var sb strings.Builder
	for _, tp := range keys {
		item := strconv.FormatInt(tp.TopicID, 10) + ":" + strconv.FormatInt(int64(tp.Partition), 10) + ":" + strconv.FormatInt(hw[tp], 10)
		if sb.Len() > 0 && sb.Len()+1+len(item) > maxPayload {
			out = append(out, sb.String())
			sb.Reset()
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(item)
	}
	if sb.Len() > 0 {
		out = append(out, sb.String())
	}
	return out
}

// decodeWatermarks parses a payload made by encodeWatermarks.
func decodeWatermarks(payload string) ([]catalog.Watermark, error) {
	if payload == "" {
		return nil, errors.New("empty payload")
	}
	items := strings.Split(payload, ",")
	out := make([]catalog.Watermark, 0, len(items))
	for _, item := range items {
		t, rest, ok1 := strings.Cut(item, ":")
		p, h, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("watermark %q: want topic:partition:hwm", item)
		}
		tid, err1 := strconv.ParseInt(t, 10, 64)
		part, err2 := strconv.ParseInt(p, 10, 32)
		hwm, err3 := strconv.ParseInt(h, 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("watermark %q: %w", item, err)
		}
		out = append(out, catalog.Watermark{TopicID: tid, Partition: int32(part), HighWatermark: hwm})
	}
	return out, nil
}

const (
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
)

// Listen delivers commit notifications to fn on a dedicated connection (LISTEN needs a
// session of its own, never a pooled one), reconnecting with backoff after a loss, until
// ctx ends. Notifications sent while disconnected are lost: readers poll the high
// watermark after a reconnect.
func (c *Catalog) Listen(ctx context.Context, fn func(catalog.Watermark)) error {
	return c.listen(ctx, notifyChannel, func(payload string) {
		ws, err := decodeWatermarks(payload)
		if err != nil {
			c.log.Warn("listen: notification ignored", "err", err)
			return
		}
		for _, w := range ws {
			fn(w)
		}
	})
}

// listen runs LISTEN sessions on channel, handing each payload to handle, until ctx
// ends.
func (c *Catalog) listen(ctx context.Context, channel string, handle func(payload string)) error {
	return c.reconnecting(ctx, "listen "+channel, func(ctx context.Context) (bool, error) {
		return c.listenOnce(ctx, channel, handle)
	})
}

// reconnecting runs session (a LISTEN session on a connection of its own, answering
// whether it got as far as listening) again after every loss, with backoff, until ctx
// ends.
func (c *Catalog) reconnecting(ctx context.Context, what string, session func(context.Context) (bool, error)) error {
	backoff := listenMinBackoff
	for {
		connected, err := session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if connected {
			backoff = listenMinBackoff
		}
		c.log.Warn(what+": connection lost, reconnecting", "err", err, "backoff", backoff)
		if ctxwait.Sleep(ctx, backoff) != nil {
			return nil
		}
		backoff = min(2*backoff, listenMaxBackoff)
	}
}

// listenOnce runs one LISTEN session until it fails or ctx ends; connected says whether
// it got as far as listening.
func (c *Catalog) listenOnce(ctx context.Context, channel string, handle func(payload string)) (connected bool, err error) {
	cfg := c.connConfig.Copy()
	cfg.RuntimeParams["application_name"] = listenApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("postgres: listen: connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return false, fmt.Errorf("postgres: listen: %w", err)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("postgres: listen: wait: %w", err)
		}
		handle(n.Payload)
	}
}
