package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report for a person: the floor, each phase, the targets.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	s := r.Settings
	fmt.Fprintf(tw, "Strata bench: %s, %d node(s), %d CPUs, %s; %.0fs; load average %.1f at the start, %.1f at the end\n",
		r.Target, r.Nodes, r.CPUs, r.GoVersion, r.Seconds, r.Load[0], r.Load[1])
	limit := "the nodes' default"
	if s.MemoryLimit > 0 {
		limit = sizeString(s.MemoryLimit)
	}
	hedge := ""
	if s.Hedge != "" {
		hedge = ", hedged PUTs " + s.Hedge
	}
	fmt.Fprintf(tw, "%d partitions, %d producers, %d-byte records in requests of %d, linger %.0fms, flush %s, buffer %s, cache %s, memory limit %s%s\n\n",
		s.Partitions, s.Producers, s.RecordSize, s.BatchRecords, s.LingerMs, sizeString(s.MaxFlushBytes), sizeString(s.BufferBytes), sizeString(s.CacheBytes), limit, hedge)
	if f := r.Floor; f != nil {
		fmt.Fprintf(tw, "FLOOR\t\n")
		if f.PutMiBps > 0 {
			fmt.Fprintf(tw, "  PUT %s objects, %d streams\t%.1f MiB/s\n", sizeString(f.SegmentBytes), f.Streams, f.PutMiBps)
			if f.PutAfterMiBps > 0 {
				fmt.Fprintf(tw, "  the same after the maximum-load phases\t%.1f MiB/s\n", f.PutAfterMiBps)
			}
			fmt.Fprintf(tw, "  GET %s objects, %d streams\t%.1f MiB/s\n", sizeString(f.SegmentBytes), f.Streams, f.GetMiBps)
		}
		if f.FlushPut.N > 0 {
			fmt.Fprintf(tw, "  PUT %s objects (flush-sized), one at a time\tp50 %.1f ms  p99 %.1f ms\n", sizeString(roundSize(f.FlushBytes)), f.FlushPut.P50, f.FlushPut.P99)
		}
		if f.CommitsPerSec > 0 {
			fmt.Fprintf(tw, "  catalog: 1-statement transactions updating 8 rows\t%.0f /s  p50 %.2f ms  p99 %.2f ms\n", f.CommitsPerSec, f.Commit.P50, f.Commit.P99)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "PRODUCE\trecords/s\tMiB/s\tack p50\tp99\tp999 ms\tPUTs/GiB\tcommits/flush\tflush\tCPU s/GiB\tpeak RSS\theap\tGC CPU\t429s\n")
	for _, p := range r.Produce {
		fmt.Fprintf(tw, "  %s\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.2f\t%s\t%.1f\t%s\t%s\t%.1f%%\t%d\n",
			p.Name, p.RecordsPS, p.MiBps, p.Ack.P50, p.Ack.P99, p.Ack.P999, p.PutsPerGiB, p.CommitsPerFlush,
			sizeString(roundSize(int64(p.MeanFlushBytes))), p.CPUSecPerGiB, sizeString(roundSize(int64(p.PeakRSS))),
			sizeString(roundSize(int64(p.PeakHeap))), 100*p.GCShare, p.Rejected)
		if fb := p.FlushBytes; fb != nil {
			fmt.Fprintf(tw, "    flush sizes: p10 %s  p50 %s  p90 %s  p99 %s (max %s)\n", sizeString(roundSize(int64(fb.P10))), sizeString(roundSize(int64(fb.P50))),
				sizeString(roundSize(int64(fb.P90))), sizeString(roundSize(int64(fb.P99))), sizeString(r.Settings.MaxFlushBytes))
		}
		if put := p.StageP99["put"]; put > 0 {
			fmt.Fprintf(tw, "    PUT stage: p99 %.0f ms  p99.9 %.0f ms; %.0f of %.0f PUTs were hedges\n", put, p.PutP999, p.Hedges, p.Puts)
		}
		if p.Failed > 0 {
			fmt.Fprintf(tw, "    %d requests failed; first: %s\n", p.Failed, p.FirstError)
		}
	}
	if r.E2E.N > 0 {
		fmt.Fprintf(tw, "  end to end through SSE (half load)\t\t\t%.1f\t%.1f\t%.1f\t(%d records)\n", r.E2E.P50, r.E2E.P99, r.E2E.P999, r.E2E.N)
	}
	fmt.Fprintln(tw)
	if len(r.Fetch) > 0 {
		fmt.Fprintf(tw, "FETCH\tMiB/s\tread\tGETs\tGET bytes\tGETs per 4 MiB\n")
		for _, f := range r.Fetch {
			fmt.Fprintf(tw, "  %s\t%.1f\t%s\t%.0f\t%s\t%.2f\n", f.Name, f.MiBps, sizeString(roundSize(f.Bytes)), f.Gets, sizeString(roundSize(int64(f.GetBytes))), f.GetsPer4Mi)
		}
		fmt.Fprintln(tw)
	}
	if sr := r.SlowReaders; sr != nil {
		fmt.Fprintf(tw, "SLOW READERS (%d sockets ask for %s and never read)\tserved\tfailed\tp50 ms\tp99 ms\tpeak RSS\theap\n", sr.Sockets, sizeString(sr.MaxBytes))
		fmt.Fprintf(tw, "  another client's fetches of 100 records\t%d\t%d\t%.1f\t%.1f\t%s\t%s\n", sr.Served, sr.Failed, sr.Fetch.P50, sr.Fetch.P99,
			sizeString(roundSize(int64(sr.PeakRSS))), sizeString(roundSize(int64(sr.PeakHeap))))
		if sr.FirstError != "" {
			fmt.Fprintf(tw, "    first failure: %s\n", sr.FirstError)
		}
		fmt.Fprintln(tw)
	}
	if sc := r.Scale; sc != nil {
		fmt.Fprintf(tw, "SCALE (%s, %d records per chunk row, %d rows seeded in %.1fs)\tp50 ms\tp99 ms\n", sc.CatalogKind, sc.ChunkRecords, sc.RowsSeeded, sc.SeedSeconds)
		fmt.Fprintf(tw, "  fetch from a partition of %s records\t%.2f\t%.2f\n", countString(sc.SmallRecords), sc.Small.P50, sc.Small.P99)
		fmt.Fprintf(tw, "  fetch from a partition of %s records\t%.2f\t%.2f\n", countString(sc.LargeRecords), sc.Large.P50, sc.Large.P99)
		fmt.Fprintln(tw)
	}
	if cp := r.Capacity; cp != nil {
		fmt.Fprintf(tw, "CATALOG CAPACITY (%s, %.0fs per line)\tper s\tp50 ms\tp99 ms\tDB CPU ms/op\tclient CPU ms/op\n", cp.CatalogKind, cp.CellSeconds)
		for _, c := range cp.Cells {
			srv := "-"
			if cp.ServerCPU {
				srv = fmt.Sprintf("%.2f", c.ServerCPUms)
			}
			fmt.Fprintf(tw, "  %s\t%.0f\t%.2f\t%.2f\t%s\t%.2f\n", c.Name, c.PerSec, c.Latency.P50, c.Latency.P99, srv, c.ClientCPUms)
		}
		fmt.Fprintln(tw)
	}
	if len(r.Targets) > 0 {
		fmt.Fprintf(tw, "TARGETS\tfigure\tbound\tratio\twant\t\n")
		for _, t := range r.Targets {
			mark := "ok"
			if !t.Pass {
				mark = "MISSED"
			}
			fmt.Fprintf(tw, "  %s\t%s %s\t%s\t%.2f\t%s\t%s\n", t.Name, num(t.Figure), t.Unit, num(t.Bound), t.Ratio, t.Want, mark)
			if t.Note != "" {
				fmt.Fprintf(tw, "    %s\t\n", t.Note)
			}
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "note: %s\n", n)
	}
	return tw.Flush()
}

func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// roundSize rounds to two significant binary units for display (3.98 MiB shows as 4 MiB
// would mislead; 3.9 MiB shows as 3993 KiB).
func roundSize(n int64) int64 {
	for _, u := range []int64{1 << 30, 1 << 20, 1 << 10} {
		if n >= 4*u {
			return n / u * u
		}
	}
	return n
}

// WriteSVG draws produce-ack and end-to-end latency (p50 and p99 per 250 ms) over the
// half-load phase, on a log scale, as a self-contained SVG.
func (r *Report) WriteSVG(w io.Writer) error {
	const (
		width, height = 900, 420
		left, right   = 70, 20
		top, bottom   = 40, 50
	)
	pw, ph := float64(width-left-right), float64(height-top-bottom)
	series := []struct {
		name, color string
		pts         []Point
		p99         bool
	}{
		{"ack p50", "#1f77b4", r.Series.Ack, false},
		{"ack p99", "#1f77b4", r.Series.Ack, true},
		{"end-to-end p50", "#d62728", r.Series.E2E, false},
		{"end-to-end p99", "#d62728", r.Series.E2E, true},
	}
	var tmax, vmin, vmax float64 = 1, math.Inf(1), 0
	for _, s := range series {
		for _, p := range s.pts {
			v := p.P50
			if s.p99 {
				v = p.P99
			}
			tmax = max(tmax, p.T+0.25)
			if v > 0 {
				vmin, vmax = min(vmin, v), max(vmax, v)
			}
		}
	}
	if math.IsInf(vmin, 1) {
		vmin, vmax = 1, 10
	}
	lo, hi := math.Floor(math.Log10(vmin)), math.Ceil(math.Log10(vmax))
	if hi <= lo {
		hi = lo + 1
	}
	x := func(t float64) float64 { return float64(left) + t/tmax*pw }
	y := func(v float64) float64 {
		return float64(top) + ph - (math.Log10(max(v, math.Pow(10, lo)))-lo)/(hi-lo)*ph
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15">Latency over time at half load (%s, %d-byte records, linger %.0f ms)</text>`+"\n",
		left, escape(r.Target), r.Settings.RecordSize, r.Settings.LingerMs)
	for e := lo; e <= hi; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if e == hi && m > 1 {
				break
			}
			yy := y(v)
			stroke := "#eee"
			if m == 1 {
				stroke = "#ccc"
			}
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s"/>`+"\n", left, width-right, yy, yy, stroke)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s ms</text>`+"\n", left-6, yy+4, num(v))
		}
	}
	step := math.Max(1, math.Round(tmax/10))
	for t := 0.0; t <= tmax; t += step {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/>`+"\n", x(t), x(t), top, height-bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.0f s</text>`+"\n", x(t), height-bottom+18, t)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#888"/>`+"\n", left, top, pw, ph)
	for i, s := range series {
		if len(s.pts) == 0 {
			continue
		}
		var pts []string
		for _, p := range s.pts {
			v := p.P50
			if s.p99 {
				v = p.P99
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.T+0.125), y(v)))
		}
		dash := ""
		if s.p99 {
			dash = ` stroke-dasharray="5,3"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n", s.color, dash, strings.Join(pts, " "))
		lx := left + 10 + i*180
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, lx+24, height-12, height-12, s.color, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", lx+30, height-8, s.name)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Produce is one produce phase's result.
type Produce struct {
	Name       string  `json:"name"`
	Path       string  `json:"path"`
	Mode       string  `json:"mode"` // closed (max) or open (fixed rate)
	Seconds    float64 `json:"seconds"`
	Requests   int64   `json:"requests"`
	Records    int64   `json:"records"`
	Bytes      int64   `json:"payload_bytes"`
	RecordsPS  float64 `json:"records_per_s"`
	MiBps      float64 `json:"mib_per_s"`
	Rejected   int64   `json:"rejected_429"`
	Failed     int64   `json:"failed"`
	FirstError string  `json:"first_error,omitempty"`
	Ack        Latency `json:"ack"`
	// From the nodes' metrics over the phase.
	Flushes float64 `json:"flushes"`
	Puts    float64 `json:"puts"`
	// Hedges are the PUTs sent again under a fresh key for a slow first one (counted in
	// Puts: the store bills them).
	Hedges float64 `json:"hedges"`
	// FullFlushPayload is the payload of the fullest flush these requests allow: a
	// request is never split between objects, so a flush holds as many whole requests
	// of the phase's mean object bytes as fit in MaxFlushBytes.
	FullFlushPayload float64 `json:"full_flush_payload_bytes"`
	PutsPerGiB       float64 `json:"puts_per_gib"`
	CommitsPerFlush  float64 `json:"catalog_commits_per_flush"`
	MeanFlushBytes   float64 `json:"mean_flush_bytes"`
	// FlushBytes are percentiles of the flush (object) size over the phase, from the
	// nodes' strata_writer_flush_bytes histogram (interpolated within its 1 MiB
	// buckets): how close flushes come to --max-flush-bytes.
	FlushBytes   *SizePercentiles `json:"flush_bytes_percentiles,omitempty"`
	CPUSeconds   float64          `json:"node_cpu_seconds"`
	CPUSecPerGiB float64          `json:"node_cpu_seconds_per_gib"`
	// ClientCPUSecPerGiB is the bench's own CPU (its producers; with --in-process,
	// the node's too) per GiB produced: on a small machine the clients compete with
	// the node for the same cores.
	ClientCPUSecPerGiB float64 `json:"client_cpu_seconds_per_gib"`
	PeakRSS            float64 `json:"node_peak_rss_bytes"`
	PeakHeap           float64 `json:"node_peak_heap_bytes"`
	// GCCPUSeconds is the collector's CPU time over the phase; GCShare its share of
	// the node's CPU.
	GCCPUSeconds float64 `json:"node_gc_cpu_seconds"`
	GCShare      float64 `json:"node_gc_cpu_share"`
	// StageP99 is the writer's p99 per flush stage over the phase, in ms, from the
	// nodes' strata_writer_flush_seconds histogram: where produce-ack latency goes.
	StageP99 map[string]float64 `json:"writer_stage_p99_ms,omitempty"`
	// PutP999 is the writer's PUT stage (first PUT or hedge, whichever landed) at
	// p99.9 over the phase, in ms, beside its p99 in StageP99: what hedging cuts.
	PutP999 float64 `json:"writer_put_p999_ms,omitempty"`
}

// SizePercentiles are percentiles of a size, in bytes.
type SizePercentiles struct {
	P10 float64 `json:"p10"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

// Fetch is one fetch phase's result.
type Fetch struct {
	Name       string  `json:"name"`
	Path       string  `json:"path"`
	Bytes      int64   `json:"bytes"`
	Objects    float64 `json:"mean_object_bytes,omitempty"`
	Seconds    float64 `json:"seconds"`
	MiBps      float64 `json:"mib_per_s"`
	Gets       float64 `json:"gets"`
	GetBytes   float64 `json:"get_bytes"`
	GetsPer4Mi float64 `json:"gets_per_4mib"`
}

// Scale is the scale phase's result.
type Scale struct {
	SmallRecords  int64   `json:"small_records"`
	LargeRecords  int64   `json:"large_records"`
	ChunkRecords  int     `json:"records_per_chunk"`
	RowsSeeded    int64   `json:"rows_seeded"`
	SeedSeconds   float64 `json:"seed_seconds"`
	Small         Latency `json:"small_fetch"`
	Large         Latency `json:"large_fetch"`
	P50Ratio      float64 `json:"p50_ratio"`
	CatalogKind   string  `json:"catalog"`
	FetchesPerSet int     `json:"fetches_each"`
}

// Target is one target of the performance issue with this run's figure.
type Target struct {
	Name   string  `json:"name"`
	Figure float64 `json:"figure"`
	Bound  float64 `json:"bound"`
	Unit   string  `json:"unit"`
	// Ratio is the figure over its floor (or over the bound when there is no floor).
	Ratio float64 `json:"ratio"`
	Want  string  `json:"want"`
	Pass  bool    `json:"pass"`
	Note  string  `json:"note,omitempty"`
}

// Report is a whole run.
type Report struct {
	Started   time.Time `json:"started"`
	Target    string    `json:"target"`
	Nodes     int       `json:"nodes"`
	GoVersion string    `json:"go_version"`
	CPUs      int       `json:"cpus"`
	Settings  struct {
		Partitions    int     `json:"partitions"`
		Producers     int     `json:"producers"`
		RecordSize    int     `json:"record_size"`
		BatchRecords  int     `json:"batch_records"`
		PhaseSeconds  float64 `json:"phase_seconds"`
		LingerMs      float64 `json:"linger_ms"`
		Hedge         string  `json:"hedge,omitempty"`
		MaxFlushBytes int64   `json:"max_flush_bytes"`
		BufferBytes   int64   `json:"buffer_bytes"`
		CacheBytes    int64   `json:"cache_bytes"`
		MemoryLimit   int64   `json:"memory_limit,omitempty"`
	} `json:"settings"`
	Floor   *Floor    `json:"floor,omitempty"`
	Produce []Produce `json:"produce"`
	E2E     Latency   `json:"end_to_end"`
	Fetch   []Fetch   `json:"fetch"`
	Scale   *Scale    `json:"scale,omitempty"`
	// Capacity is the catalog capacity phase (capacity.go).
	Capacity *Capacity `json:"capacity,omitempty"`
	// SlowReaders is the slow-reader phase (memory.go).
	SlowReaders *SlowReaders `json:"slow_readers,omitempty"`
	Targets     []Target     `json:"targets"`
	Series      struct {
		Ack []Point `json:"ack"`
		E2E []Point `json:"e2e"`
	} `json:"series"`
	Seconds float64 `json:"seconds"`
	// Load is the machine's 1-minute load average when the run started and ended
	// (/proc/loadavg): figures from a machine shared with other work drift with it.
	Load  [2]float64 `json:"load_average"`
	Notes []string   `json:"notes,omitempty"`
}

// loadAverage is the 1-minute load average, 0 where /proc/loadavg is missing.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func sizeString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

func countString(n int64) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.FormatInt(n/1_000_000, 10) + " M"
	case n >= 1000 && n%1000 == 0:
		return strconv.FormatInt(n/1000, 10) + " K"
	}
	return strings.TrimSpace(strconv.FormatInt(n, 10))
}
