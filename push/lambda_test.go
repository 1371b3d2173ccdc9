package push_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/testwait"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/push"
)

// fakeLambda answers Lambda's Invoke API as AWS does: function "ok" accepts, "flaky"
// fails (a function error) on its first calls, any other is unknown (404
// ResourceNotFoundException). It counts records by offset and the highest delivery
// count seen.
type fakeLambda struct {
	mu       sync.Mutex
	flaky    int // function errors still to answer
	seen     map[recordID]int
	maxCount int16
}

func (f *fakeLambda) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// POST /2015-03-31/functions/{name}/invocations
	name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/2015-03-31/functions/"), "/invocations")
	fn := name[strings.LastIndex(name, ":")+1:]
	body, _ := io.ReadAll(r.Body)
	if fn != "ok" && fn != "flaky" {
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"Type":"User","message":"Function not found: `+name+`"}`)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fn == "flaky" && f.flaky > 0 {
		f.flaky--
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
		_, _ = io.WriteString(w, `{"errorMessage":"boom","errorType":"Error"}`)
		return
	}
	var req struct {
		Records []wireRecord `json:"records"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rec := range req.Records {
		f.seen[recordID{rec.Partition, rec.Offset}]++
		f.maxCount = max(f.maxCount, rec.DeliveryCount)
	}
	_, _ = io.WriteString(w, `null`)
}

// TestLambdaTarget: Lambda targets through aws-sdk-go-v2's client (against a fake
// Invoke endpoint): an invocation that succeeds accepts, a function error releases
// without using up a delivery, an unknown function pauses the subscription with AWS's
// error.
func TestLambdaTarget(t *testing.T) {
	fake := &fakeLambda{flaky: 5, seen: map[recordID]int{}}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	inv := push.NewLambdaInvoker(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")},
		func(o *lambda.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	n := pushNode(t, nodeMutate(func(c *node.Config) { c.PushConfig.Lambda = inv }))
	const total = 300
	topic, group := setup(t, n.Broker, total, 0)
	ctx := context.Background()
	const arn = "arn:aws:lambda:us-east-1:123456789012:function:"
	if _, err := n.Broker.PutPush(ctx, broker.Anonymous, broker.PushRequest{PushSubscription: catalog.PushSubscription{
		Group: group, Topics: []string{topic}, LambdaARN: arn + "flaky",
		Retry: catalog.PushRetry{MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}}}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, time.Minute, "every record done", func() bool { return done(t, n.Broker, group) })
	fake.mu.Lock()
	if len(fake.seen) != total || fake.maxCount != 1 || fake.flaky != 0 {
		t.Fatalf("the function saw %d records, highest delivery count %d, %d function errors left; want %d, 1, 0",
			len(fake.seen), fake.maxCount, fake.flaky, total)
	}
	fake.mu.Unlock()

	// An unknown function pauses the subscription with AWS's error.
	if _, err := n.Broker.PutPush(ctx, broker.Anonymous, broker.PushRequest{PushSubscription: catalog.PushSubscription{
		Group: group, Topics: []string{topic}, LambdaARN: arn + "nosuch"}}); err != nil {
		t.Fatal(err)
	}
	var s catalog.PushSubscription
	var err error
	testwait.Until(t, time.Minute, "the subscription paused", func() bool {
		s, err = n.Broker.Push(ctx, broker.Anonymous, group)
		if err == nil && s.Paused {
			return true
		}
		// A record for the new settings to call with: the delivery under the old ones
		// may take those produced before the role restarts it.
		if _, err := n.Broker.Produce(ctx, broker.Anonymous, broker.ProduceRequest{Records: []broker.Record{{Topic: topic, Value: []byte(`1`)}}}); err != nil {
			t.Fatal(err)
		}
		return false
	})
	if !strings.Contains(s.LastError, "HTTP 404") || !strings.Contains(s.LastError, "ResourceNotFound") {
		t.Fatalf("paused with %q, want AWS's 404 ResourceNotFoundException", s.LastError)
	}
	if rej := metric(t, n, "strata_push_records_total", group, "result", "reject"); rej != 0 {
		t.Fatalf("%v records rejected for an unknown function", rej)
	}
}
