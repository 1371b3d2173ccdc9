package bench

import (
	"fmt"
	"strings"
)

// The targets of the performance issue, each checked against the figures of a run.

// writerStages are the stage labels of strata_writer_flush_seconds, in flush order.
var writerStages = []string{"encode", "put", "wait", "commit"}

// stageNote formats StageP99 in flush order.
func stageNote(p99 map[string]float64) string {
	var parts []string
	for _, st := range writerStages {
		if v, ok := p99[st]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f", st, v))
		}
	}
	if len(parts) == 0 {
		return "not exposed"
	}
	return strings.Join(parts, ", ")
}

// targets checks the targets against this run's figures.
func (b *runner) targets(commitP99 float64) {
	rep := &b.rep
	cfg := &b.cfg
	byName := map[string]*Produce{}
	for i := range rep.Produce {
		byName[rep.Produce[i].Name] = &rep.Produce[i]
	}
	add := func(t Target) { rep.Targets = append(rep.Targets, t) }
	fl := rep.Floor
	var floorNote string
	if fl != nil && fl.PutAfterMiBps > 0 {
		floorNote = fmt.Sprintf("raw PUT %.0f MiB/s before the maximum-load phases and %.0f after: against their mean, %.0f", fl.PutMiBps, fl.PutAfterMiBps, fl.PutBound())
	}
	if p := byName["produce-binary"]; p != nil && fl != nil && fl.PutBound() > 0 {
		r := p.MiBps / fl.PutBound()
		add(Target{Name: "produce binary vs raw PUT bandwidth", Figure: p.MiBps, Bound: 0.7 * fl.PutBound(), Unit: "MiB/s", Ratio: r, Want: ">= 0.7x", Pass: r >= 0.7, Note: floorNote})
	}
	b.kafkaTargets(byName, add)
	if p := byName["produce-json"]; p != nil && fl != nil && fl.PutBound() > 0 {
		r := p.MiBps / fl.PutBound()
		add(Target{Name: "produce JSON vs raw PUT bandwidth", Figure: p.MiBps, Bound: 0.35 * fl.PutBound(), Unit: "MiB/s", Ratio: r, Want: ">= 0.35x", Pass: r >= 0.35, Note: floorNote})
	}
	if h := byName["produce-binary-half"]; h != nil {
		linger := float64(cfg.Linger) / 1e6
		if fl != nil && fl.FlushPut.N > 0 {
			bound := linger + fl.FlushPut.P99 + commitP99 + 10
			add(Target{Name: "produce-ack p99 at half load", Figure: h.Ack.P99, Bound: bound, Unit: "ms", Ratio: h.Ack.P99 / bound, Want: "<= linger + PUT p99 + commit p99 + 10ms", Pass: h.Ack.P99 <= bound,
				Note: fmt.Sprintf("linger %.0f + PUT p99 %.1f + commit p99 %.1f + 10; the node's flush stages p99: %s", linger, fl.FlushPut.P99, commitP99, stageNote(h.StageP99))})
			add(Target{Name: "end-to-end p99 through SSE", Figure: rep.E2E.P99, Bound: bound + 20, Unit: "ms", Ratio: rep.E2E.P99 / (bound + 20), Want: "<= ack bound + 20ms", Pass: rep.E2E.P99 > 0 && rep.E2E.P99 <= bound+20})
		}
		// PUTs per GiB: the least possible is one PUT per full flush, a full flush being
		// as many whole requests as fit in MaxFlushBytes (a request is never split
		// between objects: with 0.5 MiB requests an 8 MiB flush holds 7.6 MiB of them);
		// at a load that fills less than a flush per linger, one per linger.
		for _, p := range rep.Produce {
			if p.Bytes == 0 || p.Puts == 0 || p.Mode != "closed" || p.Name == "produce-binary-overload" {
				continue // sustained load: the maximum-load phases
			}
			full := float64(cfg.MaxFlushBytes)
			if p.FullFlushPayload > 0 {
				full = p.FullFlushPayload
			}
			minPuts := float64(1<<30) / full
			perLinger := p.MiBps * (1 << 20) * cfg.Linger.Seconds() // payload bytes per linger
			expected := max(minPuts, float64(1<<30)/max(perLinger, 1))
			add(Target{Name: "PUTs per GiB, " + p.Name, Figure: p.PutsPerGiB, Bound: 1.1 * minPuts, Unit: "PUTs/GiB", Ratio: p.PutsPerGiB / minPuts,
				Want: "<= 1.1x the minimum for the flush size", Pass: p.PutsPerGiB <= 1.1*minPuts,
				Note: fmt.Sprintf("minimum %.0f (full %s flushes: %.1f MiB of records each); %.0f expected at this rate and linger; %.2f commits per flush; %.1f%% of PUTs were hedges",
					minPuts, sizeString(cfg.MaxFlushBytes), full/(1<<20), expected, p.CommitsPerFlush, 100*p.Hedges/p.Puts)})
		}
	}
	for _, f := range rep.Fetch {
		switch f.Name {
		case "fetch-cached":
			if fl != nil && fl.GetMiBps > 0 {
				r := f.MiBps / fl.GetMiBps
				add(Target{Name: "cached fetch binary vs raw GET bandwidth", Figure: f.MiBps, Bound: 0.8 * fl.GetMiBps, Unit: "MiB/s", Ratio: r, Want: ">= 0.8x", Pass: r >= 0.8})
			}
			add(Target{Name: "second reader GETs per 4 MiB", Figure: f.GetsPer4Mi, Bound: 0.05, Unit: "GETs/4MiB", Ratio: f.GetsPer4Mi, Want: "~0", Pass: f.GetsPer4Mi <= 0.05})
		case "fetch-cold":
			t := Target{Name: "first reader GETs per 4 MiB", Figure: f.GetsPer4Mi, Bound: 1, Unit: "GETs/4MiB", Ratio: f.GetsPer4Mi, Want: "<= 1", Pass: f.GetsPer4Mi <= 1}
			if f.Objects > 0 {
				t.Note = fmt.Sprintf("objects average %s: one GET each is %.2f per 4 MiB; %s fetched from the store for %s served",
					sizeString(roundSize(int64(f.Objects))), float64(4<<20)/f.Objects, sizeString(roundSize(int64(f.GetBytes))), sizeString(roundSize(f.Bytes)))
			}
			add(t)
		}
	}
	if sc := rep.Scale; sc != nil {
		add(Target{Name: fmt.Sprintf("fetch p50 at %s vs %s records", countString(sc.LargeRecords), countString(sc.SmallRecords)),
			Figure: sc.Large.P50, Bound: 1.2 * sc.Small.P50, Unit: "ms", Ratio: sc.P50Ratio, Want: "<= 1.2x", Pass: sc.P50Ratio <= 1.2,
			Note: fmt.Sprintf("%d chunk rows seeded in %.1fs (%s)", sc.RowsSeeded, sc.SeedSeconds, sc.CatalogKind)})
	}
	b.memoryTargets(add)
}
