package api

import (
	"strings"
	"testing"

	"github.com/strata-io/strata/segment"
)

// TestSearchParameters: key, contains and end_offset make a fetch a search done by the
// core: only the matches come back, next_offset is where the scan stopped; a binary
// topic's key is given as base64; bad values, and a search asked of a tail, are 400s.
func TestSearchParameters(t *testing.T) {
	e := newEnv(t, Config{})
	e.createTopic("t", 1, map[string]string{"value.format": "string", "key.format": "string"})
	for i, v := range []string{"apple", "banana", "cherry", "banana split", "date"} {
		e.c.appendRaw("t", 0, segment.DecodedRecord{Timestamp: int64(1000 + i), Key: []byte{byte('a' + i)}, Value: []byte(v)})
	}
	for _, tc := range []struct{ query, want string }{
		{"contains=banana", `{"records":[{"offset":1,"timestamp":1001,"key":"b","value":"banana","headers":[]},{"offset":3,"timestamp":1003,"key":"d","value":"banana split","headers":[]}],"next_offset":5,"high_watermark":5,"last_stable_offset":5,"log_start_offset":0}`},
		{"key=c", `{"records":[{"offset":2,"timestamp":1002,"key":"c","value":"cherry","headers":[]}],"next_offset":5,"high_watermark":5,"last_stable_offset":5,"log_start_offset":0}`},
		{"contains=banana&end_offset=3", `{"records":[{"offset":1,"timestamp":1001,"key":"b","value":"banana","headers":[]}],"next_offset":3,"high_watermark":5,"last_stable_offset":5,"log_start_offset":0}`},
		{"contains=an&max_records=1", `{"records":[{"offset":1,"timestamp":1001,"key":"b","value":"banana","headers":[]}],"next_offset":2,"high_watermark":5,"last_stable_offset":5,"log_start_offset":0}`},
		{"contains=zzz&offset=2", `{"records":[],"next_offset":5,"high_watermark":5,"last_stable_offset":5,"log_start_offset":0}`},
	} {
		rec := e.do("GET", "/v1/topics/t/partitions/0/records?"+tc.query, "")
		if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != tc.want {
			t.Errorf("?%s: %d\n got %s\nwant %s", tc.query, rec.Code, rec.Body, tc.want)
		}
	}
	e.createTopic("b", 1, map[string]string{"key.format": "binary"})
	e.c.appendRaw("b", 0, segment.DecodedRecord{Timestamp: 1, Key: []byte{0xff, 0}, Value: []byte(`1`)})
	if rec := e.do("GET", "/v1/topics/b/partitions/0/records?key=/wA=", ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"offset":0`) {
		t.Errorf("a binary key as base64: %d %s", rec.Code, rec.Body)
	}
	for _, q := range []string{"end_offset=0", "end_offset=x", "contains=", "key=a&offset=-1"} {
		rec := e.do("GET", "/v1/topics/t/partitions/0/records?"+q, "")
		if rec.Code != 400 {
			t.Errorf("?%s: %d %s, want 400", q, rec.Code, rec.Body)
		}
	}
	wantProblem(t, e.do("GET", "/v1/topics/b/partitions/0/records?key=%25%25", ""), 400, CodeInvalidParameter)
	wantProblem(t, e.do("GET", "/v1/topics/t/partitions/0/records?contains=a", "", header{"Accept", "text/event-stream"}), 400, CodeInvalidParameter)
}
