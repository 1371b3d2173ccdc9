package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/strata-io/strata/catalog"
)

// TopicInfo is a topic as produce and fetch see it: its catalog row and its effective
// configuration (the explicit configs over the defaults).
type TopicInfo struct {
	catalog.Topic
	Config catalog.Config
}

// topicCache keeps name → topic metadata for a short TTL so that a produce does no
// catalog read: the writer's commit re-checks that the topic still exists (by its
// immutable id), so a stale entry can at worst delay a refusal, never misplace data.
// Misses are not cached: only existing topics take room.
//
// Once an entry expires, one caller re-reads it while the others go on using it: every
// fetch loop of hundreds of SSE streams reading the same row at once would queue that
// many reads on the catalog's few connections, behind which requests waited longer
// than clients do (database/sql hands a freed connection to a random waiter). An entry
// is thus at most a TTL and one catalog read old.
type topicCache struct {
	cat interface {
		Topic(ctx context.Context, name string) (catalog.Topic, error)
	}
	ttl time.Duration
	now func() time.Time

	mu         sync.Mutex
	entries    map[string]cacheEntry
	refreshing map[string]bool // expired entries a caller is re-reading
}

type cacheEntry struct {
	info    TopicInfo
	expires time.Time
}

// sweepAbove is the entry count past which an insert first drops expired entries, so
// deleted topics do not stay in memory forever.
const sweepAbove = 1024

func newTopicCache(cat Catalog, ttl time.Duration, now func() time.Time) *topicCache {
	return &topicCache{cat: cat, ttl: ttl, now: now, entries: make(map[string]cacheEntry), refreshing: make(map[string]bool)}
}

// get returns the topic, from the cache when fresh or when another caller is already
// re-reading its expired entry.
func (c *topicCache) get(ctx context.Context, name string) (TopicInfo, error) {
	if c.ttl <= 0 {
		return c.refresh(ctx, name)
	}
	c.mu.Lock()
	e, ok := c.entries[name]
	if ok && (c.now().Before(e.expires) || c.refreshing[name]) {
		c.mu.Unlock()
		return e.info, nil
	}
	if ok {
		c.refreshing[name] = true
	}
	c.mu.Unlock()
	if ok {
		defer func() {
			c.mu.Lock()
			delete(c.refreshing, name)
			c.mu.Unlock()
		}()
	}
	return c.refresh(ctx, name)
}

// refresh reads the topic from the catalog and caches it.
func (c *topicCache) refresh(ctx context.Context, name string) (TopicInfo, error) {
	t, err := c.cat.Topic(ctx, name)
	if err != nil {
		c.invalidate(name)
		return TopicInfo{}, err
	}
	cfg, err := catalog.ParseConfig(t.Configs)
	if err != nil {
		// %v, not %w: a stored config the code cannot parse is a server fault, not the
		// caller's invalid_config.
		return TopicInfo{}, fmt.Errorf("topic %s: stored configs: %v", name, err)
	}
	info := TopicInfo{Topic: t, Config: cfg}
	if c.ttl > 0 {
		now := c.now()
		c.mu.Lock()
		if len(c.entries) >= sweepAbove {
			for k, e := range c.entries {
				if !now.Before(e.expires) {
					delete(c.entries, k)
				}
			}
		}
		c.entries[name] = cacheEntry{info: info, expires: now.Add(c.ttl)}
		c.mu.Unlock()
	}
	return info, nil
}

// invalidate forgets a topic, after this node changed or deleted it or a commit said it
// is gone.
func (c *topicCache) invalidate(name string) {
	c.mu.Lock()
	delete(c.entries, name)
	c.mu.Unlock()
}
