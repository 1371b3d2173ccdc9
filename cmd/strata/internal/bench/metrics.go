package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// samples is one scrape of the nodes' /metrics, summed over the nodes: series name with
// its labels as exposed (`strata_writer_puts_total{result="ok"}`) to value.
type samples map[string]float64

// get returns a series, 0 when absent.
func (s samples) get(series string) float64 { return s[series] }

// sum adds every series of a metric whose labels contain all of the given label pairs
// (`op="put"`), so a caller need not list every result.
func (s samples) sum(metric string, labels ...string) float64 {
	var t float64
	for k, v := range s {
		name, rest, _ := strings.Cut(k, "{")
		if name != metric {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(rest, l)
		}
		if ok {
			t += v
		}
	}
	return t
}

// delta returns after minus before, series by series.
func delta(before, after samples) samples {
	d := make(samples, len(after))
	for k, v := range after {
		d[k] = v - before[k]
	}
	return d
}

// scrape reads /metrics of every node and sums the series. Gauges summed over nodes
// (resident memory, cache bytes) are totals, which is what the memory bound is about.
func scrape(ctx context.Context, hc *http.Client, nodes []string) (samples, error) {
	out := samples{}
	for _, n := range nodes {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, n+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", n, err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("scrape %s: HTTP %d", n, resp.StatusCode)
		}
		err = parseText(resp.Body, out)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", n, err)
		}
	}
	return out, nil
}

// parseText adds the samples of a Prometheus text exposition to out. Only what the
// bench reads matters: comment lines are skipped, a line is `series value [timestamp]`.
func parseText(r io.Reader, out samples) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		// The value follows the last space outside the labels' braces.
		end := len(line)
		if i := bytes.LastIndexByte(line, '}'); i >= 0 {
			end = i + 1
		} else if i := bytes.IndexByte(line, ' '); i >= 0 {
			end = i
		}
		series := string(line[:end])
		fields := strings.Fields(string(line[end:]))
		if len(fields) == 0 {
			return fmt.Errorf("metrics line %q has no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || math.IsNaN(v) {
			continue // NaN quantiles and the like say nothing the bench uses
		}
		out[series] += v
	}
	return sc.Err()
}

// quantile estimates quantile q (0..1) of a histogram from the cumulative bucket
// series of one label set (`stage="put"`), as Prometheus's histogram_quantile does:
// linear within the bucket that holds the rank. It returns 0 without observations.
func (s samples) quantile(metric, label string, q float64) float64 {
	type bucket struct{ le, n float64 }
	var bs []bucket
	for k, v := range s {
		name, rest, _ := strings.Cut(k, "{")
		if name != metric+"_bucket" || !strings.Contains(rest, label) {
			continue
		}
		_, le, ok := strings.Cut(rest, `le="`)
		if !ok {
			continue
		}
		le, _, _ = strings.Cut(le, `"`)
		bound, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{bound, v})
	}
	if len(bs) == 0 {
		return 0
	}
	slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
	total := bs[len(bs)-1].n
	if total <= 0 {
		return 0
	}
	rank := q * total
	lo, below := 0.0, 0.0
	for _, b := range bs {
		if b.n >= rank {
			if math.IsInf(b.le, 1) {
				return lo // beyond the last finite bound: report that bound
			}
			if b.n == below {
				return b.le
			}
			return lo + (b.le-lo)*(rank-below)/(b.n-below)
		}
		lo, below = b.le, b.n
	}
	return lo
}
