package api

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/segment"
)

func TestFetch(t *testing.T) {
	e := newEnv(t, Config{})
	e.createTopic("t", 2, map[string]string{"value.format": "string"})
	for i := 0; i < 5; i++ {
		e.c.appendRaw("t", 1, segment.DecodedRecord{Timestamp: int64(1000 + i), Value: []byte{byte('a' + i)}})
	}
	e.c.mu.Lock()
	// Retention moved the log start: offsets 0 and 1 are gone.
	e.c.logStart[tp{1, 1}] = 2
	e.c.logs[tp{1, 1}] = e.c.logs[tp{1, 1}][2:]
	e.c.mu.Unlock()

	for _, tc := range []struct {
		query string
		want  string
	}{
		{"offset=3&max_records=1", `{"records":[{"offset":3,"timestamp":1003,"key":null,"value":"d","headers":[]}],"next_offset":4,"high_watermark":5,"last_stable_offset":5,"log_start_offset":2}`},
		{"", `{"records":[{"offset":2,"timestamp":1002,"key":null,"value":"c","headers":[]},{"offset":3,"timestamp":1003,"key":null,"value":"d","headers":[]},{"offset":4,"timestamp":1004,"key":null,"value":"e","headers":[]}],"next_offset":5,"high_watermark":5,"last_stable_offset":5,"log_start_offset":2}`},
		{"offset=earliest&max_records=1", `{"records":[{"offset":2,"timestamp":1002,"key":null,"value":"c","headers":[]}],"next_offset":3,"high_watermark":5,"last_stable_offset":5,"log_start_offset":2}`},
		{"offset=latest", `{"records":[],"next_offset":5,"high_watermark":5,"last_stable_offset":5,"log_start_offset":2}`},
		{"offset=5&max_bytes=10&wait_ms=0", `{"records":[],"next_offset":5,"high_watermark":5,"last_stable_offset":5,"log_start_offset":2}`},
		{"offset=4&format=base64", `{"records":[{"offset":4,"timestamp":1004,"key":null,"value":"ZQ==","headers":[]}],"next_offset":5,"high_watermark":5,"last_stable_offset":5,"log_start_offset":2}`},
	} {
		rec := e.do("GET", "/v1/topics/t/partitions/1/records?"+tc.query, "")
		if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != tc.want {
			t.Errorf("?%s: %d\n got %s\nwant %s", tc.query, rec.Code, rec.Body, tc.want)
		}
	}

	for _, tc := range []struct {
		query  string
		status int
		code   Code
	}{
		{"offset=-1", 400, CodeInvalidOffset},
		{"offset=abc", 400, CodeInvalidOffset},
		{"offset=1.0", 400, CodeInvalidOffset},
		{"offset=99999999999999999999", 400, CodeInvalidOffset},
		{"max_records=-1", 400, CodeInvalidParameter},
		{"max_bytes=lots", 400, CodeInvalidParameter},
		{"wait_ms=1s", 400, CodeInvalidParameter},
		{"format=xml", 400, CodeInvalidParameter},
		{"isolation=serializable", 400, CodeInvalidParameter},
		{"isolation=READ_COMMITTED", 400, CodeInvalidParameter},
	} {
		wantProblem(t, e.do("GET", "/v1/topics/t/partitions/1/records?"+tc.query, ""), tc.status, tc.code)
	}

	for _, offset := range []string{"1", "6"} {
		p := wantProblem(t, e.do("GET", "/v1/topics/t/partitions/1/records?offset="+offset, ""), 416, CodeOffsetOutOfRange)
		if jsonNumber(t, p["log_start_offset"]) != 2 || jsonNumber(t, p["high_watermark"]) != 5 {
			t.Errorf("offset %s: problem %v", offset, p)
		}
	}

	for _, tc := range []struct {
		path   string
		status int
		code   Code
	}{
		{"/v1/topics/t/partitions/2/records", 404, CodePartitionOutOfRange},
		{"/v1/topics/t/partitions/-1/records", 400, CodeInvalidPartition},
		{"/v1/topics/t/partitions/one/records", 400, CodeInvalidPartition},
		{"/v1/topics/t/partitions/+1/records", 400, CodeInvalidPartition},
		{"/v1/topics/nope/partitions/0/records", 404, CodeTopicNotFound},
		{"/v1/topics/" + strings.Repeat("n", 5000) + "/partitions/0/records", 400, CodeInvalidTopicName},
	} {
		wantProblem(t, e.do("GET", tc.path, ""), tc.status, tc.code)
	}
}

func TestFetchLongPoll(t *testing.T) {
	e := newEnv(t, Config{}, func(d *testDeps) { d.MaxWait = time.Minute })
	e.createTopic("t", 1, nil)
	var wg sync.WaitGroup
	var body string
	wg.Add(1)
	go func() {
		defer wg.Done()
		body = e.do("GET", "/v1/topics/t/partitions/0/records?offset=0&wait_ms=60000", "").Body.String()
	}()
	// Produce once the fetch is waiting at the high watermark.
	testwait.Until(t, 10*time.Second, "the fetch to wait at the high watermark", func() bool {
		e.c.mu.Lock()
		defer e.c.mu.Unlock()
		return len(e.c.fetchWaits) > 0
	})
	if rec := e.do("POST", "/v1/topics/t/records", `{"records":[{"value":{"n":1}}]}`); rec.Code != 200 {
		t.Fatalf("produce: %d %s", rec.Code, rec.Body)
	}
	wg.Wait()
	want := `{"records":[{"offset":0,"timestamp":1700000000000,"key":null,"value":{"n":1},"headers":[]}],"next_offset":1,"high_watermark":1,"last_stable_offset":1,"log_start_offset":0}`
	if strings.TrimSpace(body) != want {
		t.Errorf("long poll got %s", body)
	}
	if e.c.fetchWaits[0] != time.Minute {
		t.Errorf("wait %v, want 1m", e.c.fetchWaits[0])
	}
}

func TestFetchWaitCapped(t *testing.T) {
	e := newEnv(t, Config{}, func(d *testDeps) { d.MaxWait = 5 * time.Millisecond })
	e.createTopic("t", 1, nil)
	rec := e.do("GET", "/v1/topics/t/partitions/0/records?offset=0&wait_ms=999999999", "")
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if len(e.c.fetchWaits) == 0 || e.c.fetchWaits[0] != 5*time.Millisecond {
		t.Errorf("waits %v, want the 5ms cap", e.c.fetchWaits)
	}
}
