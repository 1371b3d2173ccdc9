package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// TestShareConsumer: two share consumers on a real node share a two-partition topic:
// every record is handled once and accepted, a record its handler always fails is
// delivered exactly share.delivery.count.limit times and then archived, a rejected one
// once; then the group has nothing left in flight.
func TestShareConsumer(t *testing.T) {
	srv := startServer(t, "")
	c := client.New(srv.URL)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "jobs", 2, nil); err != nil {
		t.Fatal(err)
	}
	var recs []client.Record
	for i := range 40 {
		v := fmt.Sprint(i)
		switch i {
		case 7:
			v = "poison"
		case 12:
			v = "bad"
		}
		recs = append(recs, client.Record{Value: client.String(v), Partition: client.Int32(int32(i % 2))})
	}
	if _, err := c.Produce(ctx, "jobs", recs); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ConfigureShareGroup(ctx, "workers", map[string]string{"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "3"}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	handled := map[string]int{}
	maxCount := map[string]int{}
	h := func(_ context.Context, r client.ShareRecord) error {
		v := string(r.Value)
		mu.Lock()
		handled[v]++
		maxCount[v] = max(maxCount[v], r.DeliveryCount)
		mu.Unlock()
		switch v {
		case `"poison"`:
			return errors.New("cannot process")
		case `"bad"`:
			return client.Reject(errors.New("malformed"))
		}
		return nil
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		sc, err := client.NewShareConsumer(c, client.ShareConsumerConfig{Group: "workers", Topics: []string{"jobs"}, MaxRecords: 5, Wait: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = sc.Run(runCtx, h)
		}()
	}
	done := testwait.Within(30*time.Second, func() bool {
		g, err := c.DescribeShareGroup(ctx, "workers")
		if err != nil || len(g.Partitions) != 2 {
			return false
		}
		for _, p := range g.Partitions {
			if p.StartOffset != 20 || p.Lag != 0 {
				return false
			}
		}
		return true
	})
	stop()
	wg.Wait()
	if !done {
		g, err := c.DescribeShareGroup(ctx, "workers")
		t.Fatalf("the group never finished the topic: %+v, %v", g, err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("consumer %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range 40 {
		v := fmt.Sprintf("%q", fmt.Sprint(i))
		switch i {
		case 7:
			if n := handled[`"poison"`]; n != 3 || maxCount[`"poison"`] != 3 {
				t.Errorf("poison handled %d times (last delivery %d), want 3: the delivery limit", n, maxCount[`"poison"`])
			}
		case 12:
			if n := handled[`"bad"`]; n != 1 {
				t.Errorf("rejected record handled %d times, want 1", n)
			}
		default:
			if n := handled[v]; n != 1 {
				t.Errorf("record %s handled %d times, want 1", v, n)
			}
		}
	}
}

// TestShareConsumerRenewsLocks: a handler slower than the lock keeps its records (the
// consumer renews them), so a second member never gets them and each record is
// handled once, at delivery 1.
func TestShareConsumerRenewsLocks(t *testing.T) {
	srv := startServer(t, "")
	c := client.New(srv.URL)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "slow", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "slow", []client.Record{{Value: client.String("x")}, {Value: client.String("y")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ConfigureShareGroup(ctx, "slowpokes", map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "2000"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var deliveries []int
	release := make(chan struct{})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	sc, _ := client.NewShareConsumer(c, client.ShareConsumerConfig{Group: "slowpokes", Topics: []string{"slow"}, Wait: 200 * time.Millisecond})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = sc.Run(runCtx, func(ctx context.Context, r client.ShareRecord) error {
			mu.Lock()
			deliveries = append(deliveries, r.DeliveryCount)
			mu.Unlock()
			select { // slow: holds the records until the test has seen them stay held
			case <-release:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	if !testwait.Within(30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(deliveries) == 1
	}) {
		t.Fatal("the consumer never handed a record to its handler")
	}
	// While the handler holds the first record, a second member acquires — for more
	// than three lock durations — and never gets the records.
	other := ""
	deadline := time.Now().Add(6500 * time.Millisecond)
	for time.Now().Before(deadline) {
		got, err := c.AcquireShareRecords(ctx, "slowpokes", client.ShareAcquireRequest{MemberID: other, Topics: []string{"slow"}, Wait: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		other = got.MemberID
		if len(got.Partitions) != 0 {
			t.Fatalf("the second member acquired %+v while the first one's handler held them", got.Partitions)
		}
	}
	close(release)
	if !testwait.Within(30*time.Second, func() bool {
		g, err := c.DescribeShareGroup(ctx, "slowpokes")
		return err == nil && len(g.Partitions) == 1 && g.Partitions[0].StartOffset == 2
	}) {
		t.Fatal("the records were never accepted")
	}
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(deliveries) != 2 || deliveries[0] != 1 || deliveries[1] != 1 {
		t.Fatalf("deliveries %v, want two records each at delivery 1", deliveries)
	}
}
