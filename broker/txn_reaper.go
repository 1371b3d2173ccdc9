package broker

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/internal/prom"
)

// The reaper: a transaction ongoing past its timeout, judged on the database clock, is
// aborted (markers written, the epoch bumped so its producer is fenced) by whichever
// node notices first (docs/design.md "Transactions"). Every node with the core runs one
// (RunTxnReaper, owned by the node); the catalog's conditional abort makes two racing
// nodes abort a transaction once.

// TxnReapInterval is how often the reaper looks: no open transaction holds a
// partition's last stable offset back much longer than its timeout.
const TxnReapInterval = time.Second

// txnReapBatch bounds the transactions one pass aborts.
const txnReapBatch = 100

// txnMetrics are the coordinator's metrics.
type txnMetrics struct {
	open    prometheus.Gauge
	oldest  prometheus.Gauge
	commits prometheus.Counter
	aborts  *prometheus.CounterVec // cause: client, timeout
}

func newTxnMetrics(reg prometheus.Registerer) *txnMetrics {
	return &txnMetrics{
		open: prom.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_txn_open",
			Help: "Kafka transactions ongoing (the cluster's, sampled by this node's reaper)."})),
		oldest: prom.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_txn_oldest_open_seconds",
			Help: "Age of the oldest ongoing Kafka transaction, by the database clock (0: none)."})),
		commits: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_txn_commits_total",
			Help: "Kafka transactions committed through this node."})),
		aborts: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_txn_aborts_total",
			Help: "Kafka transactions aborted through this node, by cause: client (EndTxn), timeout (the reaper)."}, []string{"cause"})),
	}
}

func (m *txnMetrics) decided(commit bool, cause string) {
	if commit {
		m.commits.Inc()
		return
	}
	m.aborts.WithLabelValues(cause).Inc()
}

// ReapTxns runs one pass of the reaper: it aborts the transactions past their timeout
// and samples the open ones for the metrics. It answers how many it aborted.
func (b *Broker) ReapTxns(ctx context.Context) (int, error) {
	if e := b.check(CapTransactions); e != nil {
		return 0, e
	}
	// The reaper's aborts are audited as the cluster's own doing.
	actx := withAudit(ctx, Principal{Name: "Strata:reaper"}, "txn.timeout", acl.Cluster(), nil)
	aborted, err := b.d.Transactions.AbortExpiredTxns(actx, txnReapBatch)
	for range aborted {
		b.txnMetrics.decided(false, "timeout")
	}
	if err != nil {
		return len(aborted), txnError("abort expired transactions", err)
	}
	st, err := b.d.Transactions.TxnStats(ctx)
	if err != nil {
		return len(aborted), txnError("transaction stats", err)
	}
	b.txnMetrics.open.Set(float64(st.Open))
	age := 0.0
	if !st.OldestOpen.IsZero() {
		age = st.DatabaseTime.Sub(st.OldestOpen).Seconds()
	}
	b.txnMetrics.oldest.Set(max(age, 0))
	return len(aborted), nil
}

// RunTxnReaper runs the reaper every interval (TxnReapInterval when zero) until ctx
// ends; it returns nil then. Failures are logged and the next pass tries again.
func (b *Broker) RunTxnReaper(ctx context.Context, interval time.Duration, log *slog.Logger) error {
	if b.check(CapTransactions) != nil {
		return nil
	}
	if interval <= 0 {
		interval = TxnReapInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTimer(interval/2 + rand.N(interval/2+1)) // nodes started together spread out
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n, err := b.ReapTxns(ctx)
		if n > 0 {
			log.Info("aborted transactions past their timeout", "count", n)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("transaction reaper", "err", err)
		}
		t.Reset(interval)
	}
}
