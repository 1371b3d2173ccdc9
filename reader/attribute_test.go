package reader

import (
	"testing"

	"github.com/strata-io/strata/segment"
)

// TestGetAttribution: a GET is split among the topics whose batches it read, by bytes,
// when the footer is at hand; otherwise it is wholly the fetch's topic's.
func TestGetAttribution(t *testing.T) {
	ft := segment.Footer{Batches: []segment.BatchInfo{
		{TopicID: 1, Pos: 0, Len: 150},
		{TopicID: 2, Pos: 150, Len: 100},
		{TopicID: 1, Pos: 250, Len: 150},
		{TopicID: 3, Pos: 400, Len: 100},
	}}
	for _, tc := range []struct {
		name    string
		cached  bool
		off, n  int64
		want    map[int64]float64
		objSize int64
	}{
		{"a range across three batches", true, 100, 200, map[int64]float64{1: 0.5, 2: 0.5}, 1000},
		{"every batch", true, 0, 500, map[int64]float64{1: 0.6, 2: 0.2, 3: 0.2}, 1000},
		{"past the batches (the footer)", true, 600, 100, map[int64]float64{9: 1}, 1000},
		{"no footer at hand", false, 100, 200, map[int64]float64{9: 1}, 1000},
	} {
		got := map[int64]float64{}
		c := &blockCache{
			got:    func(topic int64, share float64) { got[topic] += share },
			footer: func(string) (segment.Footer, bool) { return ft, tc.cached },
		}
		c.attribute(9, "obj", tc.objSize, tc.off, make([]byte, tc.n))
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			continue
		}
		for k, v := range tc.want {
			if d := got[k] - v; d > 1e-9 || d < -1e-9 {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			}
		}
	}
}
