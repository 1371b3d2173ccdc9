package main

import (
	"fmt"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/usage"
)

// usageFlags tune per-topic usage (package usage) and the list prices of its cost
// estimate (broker.Prices; the README's cost model), shared by dev and serve.
type usageFlags struct {
	interval    time.Duration
	retention   time.Duration
	topicLabels int
	prices      broker.Prices
}

func addUsageFlags(c *command) *usageFlags {
	u := &usageFlags{}
	c.fs.DurationVar(&u.interval, "usage-interval", usage.DefaultInterval, "how often a node adds its per-topic usage counts to the catalog (each write its own transaction; a node's answers include its unwritten counts)")
	c.fs.DurationVar(&u.retention, "usage-retention", usage.DefaultRetention, "how long per-minute usage buckets are kept in the catalog")
	c.fs.IntVar(&u.topicLabels, "usage-topic-labels", usage.DefaultTopicLabels, "the most topics the strata_topic_* metrics label by name on one node; later ones count under topic=\"other\"")
	c.fs.Float64Var(&u.prices.PutPer1000, "price-put-per-1000", broker.DefaultPrices.PutPer1000, "object-store list price in USD per 1,000 PUTs, for usage cost estimates (default S3 Standard, us-east-1)")
	c.fs.Float64Var(&u.prices.GetPer1000, "price-get-per-1000", broker.DefaultPrices.GetPer1000, "object-store list price in USD per 1,000 GETs, for usage cost estimates (default S3 Standard, us-east-1)")
	c.fs.Float64Var(&u.prices.StorageGBMonth, "price-storage-gb-month", broker.DefaultPrices.StorageGBMonth, "object-store list price in USD per GB stored for a month, for usage cost estimates (default S3 Standard, us-east-1)")
	c.fs.Float64Var(&u.prices.CommitPerMillon, "price-commit-per-million", 0, "USD per million catalog commits, for usage cost estimates (default 0: the catalog is a fixed cost)")
	return u
}

func (u *usageFlags) validate() []string {
	var bad []string
	if u.interval < 100*time.Millisecond || u.interval > time.Minute {
		bad = append(bad, fmt.Sprintf("--usage-interval %s: want between 100ms and 1m (default %s)", u.interval, usage.DefaultInterval))
	}
	if u.retention < time.Hour {
		bad = append(bad, fmt.Sprintf("--usage-retention %s: want at least 1h (default %s)", u.retention, usage.DefaultRetention))
	}
	if u.topicLabels < 1 {
		bad = append(bad, fmt.Sprintf("--usage-topic-labels %d: want at least 1 (default %d)", u.topicLabels, usage.DefaultTopicLabels))
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"--price-put-per-1000", u.prices.PutPer1000}, {"--price-get-per-1000", u.prices.GetPer1000},
		{"--price-storage-gb-month", u.prices.StorageGBMonth}, {"--price-commit-per-million", u.prices.CommitPerMillon}} {
		if p.v < 0 {
			bad = append(bad, fmt.Sprintf("%s %g: a price cannot be negative", p.name, p.v))
		}
	}
	return bad
}

func (u *usageFlags) config() usage.Config {
	return usage.Config{Interval: u.interval, Retention: u.retention, TopicLabels: u.topicLabels}
}
