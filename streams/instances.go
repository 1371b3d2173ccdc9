package streams

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/ctxwait"
)

// The <app>-instances topic: compacted, one partition, keyed by instance id; each
// value is an instance's endpoint and the tasks it runs queryable, published whenever
// they change (a tombstone when it stops). Every instance tails it to route queries.
// (The group's heartbeat carries no member metadata, so the routing table is a topic
// of its own.)

// instanceInfo is one instance's record in <app>-instances.
type instanceInfo struct {
	Endpoint string   `json:"endpoint"`
	Tasks    []TaskID `json:"tasks"`
	At       int64    `json:"at"` // ms, when published
}

func (a *App) instancesTopic() string { return a.topo.App() + "-instances" }

// claimant returns the instance (not self) whose latest record lists task id; the most
// recently published when several do (a record may be stale: the instance asked
// checks its own tasks anyway).
func (q *queries) claimant(id TaskID, self string) (string, instanceInfo, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var best string
	var bi instanceInfo
	for inst, info := range q.instances {
		if inst == self || info.Endpoint == "" {
			continue
		}
		for _, t := range info.Tasks {
			if t == id && (best == "" || info.At > bi.At) {
				best, bi = inst, info
			}
		}
	}
	return best, bi, best != ""
}

// Instances returns the routing table as <app>-instances last said: instance id →
// endpoint and the tasks it runs.
func (a *App) Instances() map[string][]TaskID {
	a.iq.mu.Lock()
	defer a.iq.mu.Unlock()
	out := map[string][]TaskID{}
	for k, v := range a.iq.instances {
		out[k] = v.Tasks
	}
	return out
}

// runInstances tails <app>-instances, and publishes this instance's record when it
// has an endpoint, until ctx ends; then it publishes the tombstone. It returns a
// function that stops it and waits.
func (a *App) runInstances(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); a.tailInstances(ctx) }()
	if a.cfg.ApplicationServer != "" {
		wg.Add(1)
		go func() { defer wg.Done(); a.publishInstance(ctx) }()
	}
	return func() {
		cancel()
		wg.Wait()
		if a.cfg.ApplicationServer != "" {
			pctx, pcancel := context.WithTimeout(context.Background(), a.cfg.RequestTimeout)
			defer pcancel()
			if err := a.putInstance(pctx, nil); err != nil {
				a.log.Warn("withdrawing this instance from "+a.instancesTopic(), "err", err)
			}
		}
	}
}

func (a *App) putInstance(ctx context.Context, info *instanceInfo) error {
	rec := client.RawRecord{Key: []byte(a.cfg.InstanceID)}
	if info != nil {
		v, err := json.Marshal(info)
		if err != nil {
			return err
		}
		rec.Value = v
	}
	_, err := retry(ctx, a, "publish to "+a.instancesTopic(), func(ctx context.Context) (client.BatchOffsets, error) {
		return a.c.ProduceBinary(ctx, a.instancesTopic(), 0, []client.RawRecord{rec}, client.BatchOptions{})
	})
	return err
}

// publishInstance publishes this instance's queryable tasks each time they change;
// changes that come while one is being published are folded into the next.
func (a *App) publishInstance(ctx context.Context) {
	a.iq.notify() // the first record: no tasks yet, but the endpoint is known
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.iq.changed:
		}
		info := instanceInfo{Endpoint: a.cfg.ApplicationServer, Tasks: a.iq.running(), At: time.Now().UnixMilli()}
		if err := a.putInstance(ctx, &info); err != nil && ctx.Err() == nil {
			a.log.Warn("publishing this instance's tasks", "err", err)
			a.iq.notify() // try again
			if ctxwait.Sleep(ctx, time.Second) != nil {
				return
			}
		}
	}
}

// tailInstances keeps the routing table until ctx ends.
func (a *App) tailInstances(ctx context.Context) {
	var off int64
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout+a.cfg.FetchWait)
		res, err := a.c.FetchBinary(fctx, a.instancesTopic(), 0, client.FetchOptions{Offset: off, MaxRecords: 1000, Wait: a.cfg.FetchWait})
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			a.log.Debug("reading "+a.instancesTopic()+"; retrying", "err", err)
			if ctxwait.Sleep(ctx, backoff) != nil {
				return
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		a.iq.mu.Lock()
		for _, r := range res.Records {
			if r.Value == nil {
				delete(a.iq.instances, string(r.Key))
				continue
			}
			var info instanceInfo
			if err := json.Unmarshal(r.Value, &info); err != nil {
				a.log.Warn("a record of "+a.instancesTopic()+" is not an instance's: skipped", "offset", r.Offset, "err", err)
				continue
			}
			a.iq.instances[string(r.Key)] = info
		}
		a.iq.mu.Unlock()
		off = max(off, res.NextOffset)
	}
}

// forwardedHeader marks a query one instance forwarded to another, which answers
// from its own tasks only (no second hop, no loop between stale routing tables).
const forwardedHeader = "Strata-Streams-Forwarded"

// queryProblem is a query handler's error answer.
type queryProblem struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Title  string `json:"title"`
	Detail string `json:"detail,omitempty"`
}

// remote asks another instance's query handler.
func (a *App) remote(ctx context.Context, o Owner, path string, q url.Values, out any) error {
	u := o.Endpoint + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("streams: query instance %s: %w", o.Instance, err)
	}
	req.Header.Set(forwardedHeader, a.cfg.InstanceID)
	resp, err := a.iq.httpClient(a.cfg.RequestTimeout).Do(req)
	if err != nil {
		// Gone (killed, or moving): the routing table will say where next.
		return fmt.Errorf("%w: instance %s at %s: %v", ErrNotAvailable, o.Instance, o.Endpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var p queryProblem
		_ = json.NewDecoder(resp.Body).Decode(&p)
		switch p.Code {
		case "not_available":
			return fmt.Errorf("%w: instance %s: %s", ErrNotAvailable, o.Instance, p.Detail)
		case "key_not_found":
			return errKeyNotFound
		}
		return fmt.Errorf("streams: query instance %s: %s (%s)", o.Instance, resp.Status, p.Detail)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("streams: query instance %s: decode its answer: %w", o.Instance, err)
	}
	return nil
}

var errKeyNotFound = errors.New("key not found")

func (q *queries) httpClient(timeout time.Duration) *http.Client {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.http == nil {
		q.http = &http.Client{Timeout: timeout}
	}
	return q.http
}

func (a *App) remoteGet(ctx context.Context, o Owner, key []byte) ([]byte, bool, error) {
	var out keyAnswer
	err := a.remote(ctx, o, "/stores/"+url.PathEscape(o.Store)+"/keys/"+base64.RawURLEncoding.EncodeToString(key),
		url.Values{"key_encoding": {"base64"}}, &out)
	if errors.Is(err, errKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return out.Value, true, nil
}

func (a *App) remoteRange(ctx context.Context, o Owner, from, to []byte, limit int) ([]KeyValue[[]byte, []byte], error) {
	q := url.Values{"key_encoding": {"base64"}, "partition": {strconv.Itoa(int(o.Partition))}, "limit": {strconv.Itoa(limit)}}
	if from != nil {
		q.Set("from", base64.RawURLEncoding.EncodeToString(from))
	}
	if to != nil {
		q.Set("to", base64.RawURLEncoding.EncodeToString(to))
	}
	var out rangeAnswer
	if err := a.remote(ctx, o, "/stores/"+url.PathEscape(o.Store)+"/range", q, &out); err != nil {
		return nil, err
	}
	kvs := make([]KeyValue[[]byte, []byte], len(out.Entries))
	for i, e := range out.Entries {
		kvs[i] = KeyValue[[]byte, []byte]{e.Key, e.Value}
	}
	return kvs, nil
}
