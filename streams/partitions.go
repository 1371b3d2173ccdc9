package streams

import (
	"fmt"
	"sort"
	"strings"
)

// taskCounts decides each subtopology's task count: the partition count its sources
// share. User topics' counts come from partitions; a repartition topic has the count
// of the subtopology that writes it; a following internal topic (a foreign-key join's)
// takes its reader's and decides nothing. Sources of one subtopology with different
// counts are refused: their partition n would not hold the same keys.
func (t *Topology) taskCounts(partitions func(topic string) (int32, error)) (map[int]int32, error) {
	counts := map[int]int32{}
	writer := map[string]*subtopology{}
	for _, s := range t.subs {
		for _, w := range s.writes {
			writer[w] = s
		}
	}
	for pass := 0; len(counts) < len(t.subs); pass++ {
		if pass > len(t.subs) {
			return nil, fmt.Errorf("streams: repartition topics form a cycle")
		}
		for _, s := range t.subs {
			if _, done := counts[s.index]; done {
				continue
			}
			var (
				n     int32
				ready = true
				seen  []string
			)
			for _, src := range s.sources {
				if src.follows {
					continue
				}
				var c int32
				if w, ok := writer[src.topic]; ok && src.internal {
					wc, done := counts[w.index]
					if !done {
						ready = false
						break
					}
					c = wc
				} else {
					var err error
					if c, err = partitions(src.topic); err != nil {
						return nil, fmt.Errorf("streams: input topic %s: %w", src.topic, err)
					}
				}
				seen = append(seen, fmt.Sprintf("%s has %d", src.topic, c))
				if n != 0 && c != n {
					sort.Strings(seen)
					return nil, fmt.Errorf("streams: topics read together must be co-partitioned (the same partition count, keys partitioned alike), but %s: create them with equal counts, or repartition one side", strings.Join(seen, ", "))
				}
				n = c
			}
			if ready {
				counts[s.index] = n
			}
		}
	}
	return counts, nil
}
