package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
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
