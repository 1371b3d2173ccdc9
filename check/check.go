// Package check compares the catalog with the object store, as `strata check` does:
// every live segment row's object exists, has the row's size, and its footer agrees
// with the row's chunks; no two chunk rows claim one offset; and no object that the
// catalog does not know is older than the sweep age (an upload whose commit never
// landed, and which the compactor's orphan sweep should have removed). It only reads.
package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/segment"
)

// Bucket is the part of the object store a check reads.
type Bucket interface {
	Get(ctx context.Context, key string) ([]byte, error)
	List(ctx context.Context, prefix string, fn func(objstore.Info) error) error
}

var _ Bucket = objstore.Store(nil)

// Kind names a class of difference.
type Kind string

const (
	// MissingObject: a live segment row whose object is not in the store.
	MissingObject Kind = "missing_object"
	// SizeMismatch: the object's size differs from the row's.
	SizeMismatch Kind = "size_mismatch"
	// CorruptObject: the object's footer (or, with Verify, a batch) does not decode.
	CorruptObject Kind = "corrupt_object"
	// ChunkMismatch: a chunk row's byte range, offsets or timestamps disagree with the
	// object's footer.
	ChunkMismatch Kind = "chunk_mismatch"
	// ChunkOverlap: two chunk rows of one partition claim the same offset.
	ChunkOverlap Kind = "chunk_overlap"
	// StrayObject: an object without a segment row, older than the sweep age.
	StrayObject Kind = "stray_object"
)

// Problem is one difference found.
type Problem struct {
	Kind   Kind   `json:"kind"`
	Key    string `json:"key"`
	Detail string `json:"detail"`
}

func (p Problem) String() string { return fmt.Sprintf("%s %s: %s", p.Kind, p.Key, p.Detail) }

// Options tune a check. Zero values take the defaults.
type Options struct {
	// SweepAge is how old an object without a row must be to count as stray: younger
	// ones may be uploads whose commit is still in flight. Default
	// catalog.SettleAge(catalog.DefaultCommitTimeout), what the orphan sweep waits.
	SweepAge time.Duration
	// Verify decodes every batch of every live object (segment.Verify), not only the
	// footer.
	Verify bool
	Log    *slog.Logger
}

// Report is a check's result.
type Report struct {
	// Catalog rows seen: segments, the live ones among them, chunk rows.
	Segments int `json:"segments"`
	Live     int `json:"live_segments"`
	Chunks   int `json:"chunks"`
	Objects  int `json:"objects"`       // objects listed
	Unknown  int `json:"young_objects"` // objects without a row, younger than the sweep age
	// Problems is every difference found (never null in JSON: [] when none).
	Problems []Problem `json:"problems"`
}

// OK reports whether nothing differs.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Count returns the problems of kind k.
func (r *Report) Count(k Kind) int {
	n := 0
	for _, p := range r.Problems {
		if p.Kind == k {
			n++
		}
	}
	return n
}

// WriteText writes the report for a person.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "catalog: %d segments (%d live), %d chunk rows; bucket: %d objects (%d young, not yet committed or swept)\n",
		r.Segments, r.Live, r.Chunks, r.Objects, r.Unknown)
	if r.OK() {
		fmt.Fprintln(w, "OK: the catalog and the bucket agree")
		return
	}
	fmt.Fprintf(w, "%d problems:\n", len(r.Problems))
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
}

type partKey struct {
	topic     int64
	partition int32
}

type span struct {
	base, last int64
	key        string
}

// Run checks the catalog against the bucket.
func Run(ctx context.Context, inv catalog.Inventory, b Bucket, o Options) (*Report, error) {
	if o.SweepAge <= 0 {
		o.SweepAge = catalog.SettleAge(catalog.DefaultCommitTimeout)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	r := &Report{Problems: []Problem{}}
	now, err := inv.Now(ctx)
	if err != nil {
		return nil, fmt.Errorf("check: database clock: %w", err)
	}
	known := make(map[string]catalog.SegmentState)
	spans := make(map[partKey][]span)
	var missing []string
	err = inv.InventorySegments(ctx, func(s catalog.SegmentRecord) error {
		r.Segments++
		r.Chunks += len(s.Chunks)
		known[s.Key] = s.State
		for _, c := range s.Chunks {
			k := partKey{c.TopicID, c.Partition}
			spans[k] = append(spans[k], span{c.BaseOffset, c.LastOffset, s.Key})
		}
		if s.State != catalog.SegmentLive {
			return nil
		}
		r.Live++
		obj, err := b.Get(ctx, s.Key)
		if errors.Is(err, objstore.ErrNotExist) {
			missing = append(missing, s.Key)
			return nil
		}
		if err != nil {
			return fmt.Errorf("check: get %s: %w", s.Key, err)
		}
		r.Problems = append(r.Problems, checkObject(s, obj, o.Verify)...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("check: read the catalog: %w", err)
	}
	if len(missing) > 0 {
		// A row read as live may have been compacted away, and its object deleted
		// after the grace period, while the check ran: only rows still live count.
		want := make(map[string]bool, len(missing))
		for _, k := range missing {
			want[k] = true
		}
		still := make(map[string]bool, len(missing))
		err := inv.InventorySegments(ctx, func(s catalog.SegmentRecord) error {
			if want[s.Key] && s.State == catalog.SegmentLive {
				still[s.Key] = true
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("check: read the catalog again: %w", err)
		}
		for _, k := range missing {
			if still[k] {
				r.Problems = append(r.Problems, Problem{MissingObject, k, "the segment row is live, the object is not in the bucket"})
			}
		}
	}
	if ov := overlaps(spans); len(ov) > 0 {
		// Pages of segments are separate snapshots: a compaction that swapped rows
		// between two pages shows both the old and the new rows. Only overlaps seen
		// again in a second pass count.
		again := make(map[partKey][]span)
		err := inv.InventorySegments(ctx, func(s catalog.SegmentRecord) error {
			for _, c := range s.Chunks {
				k := partKey{c.TopicID, c.Partition}
				again[k] = append(again[k], span{c.BaseOffset, c.LastOffset, s.Key})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("check: read the catalog again: %w", err)
		}
		seen := make(map[Problem]bool)
		for _, p := range overlaps(again) {
			seen[p] = true
		}
		for _, p := range ov {
			if seen[p] {
				r.Problems = append(r.Problems, p)
			}
		}
	}
	err = b.List(ctx, "", func(info objstore.Info) error {
		r.Objects++
		if _, ok := known[info.Key]; ok {
			return nil
		}
		born := info.Modified
		if t, err := segment.KeyTime(info.Key); err == nil {
			born = t
		}
		age := now.Sub(born)
		if age < o.SweepAge {
			r.Unknown++
			return nil
		}
		what := "a segment object"
		if !strings.HasPrefix(info.Key, "segments/") {
			what = "not a segment object"
		}
		r.Problems = append(r.Problems, Problem{StrayObject, info.Key, fmt.Sprintf(
			"%s without a catalog row, %s old (sweep age %s), %d bytes", what, age.Round(time.Second), o.SweepAge, info.Size)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("check: list the bucket: %w", err)
	}
	sort.SliceStable(r.Problems, func(i, j int) bool {
		if r.Problems[i].Kind != r.Problems[j].Kind {
			return r.Problems[i].Kind < r.Problems[j].Kind
		}
		return r.Problems[i].Key < r.Problems[j].Key
	})
	return r, nil
}

// overlaps reports chunk rows of one partition that claim the same offset.
func overlaps(spans map[partKey][]span) []Problem {
	var out []Problem
	for k, ss := range spans {
		sort.Slice(ss, func(i, j int) bool { return ss[i].base < ss[j].base })
		for i := 1; i < len(ss); i++ {
			if ss[i].base <= ss[i-1].last {
				out = append(out, Problem{ChunkOverlap, ss[i].key, fmt.Sprintf(
					"topic id %d partition %d: rows [%d, %d] (%s) and [%d, %d] overlap",
					k.topic, k.partition, ss[i-1].base, ss[i-1].last, ss[i-1].key, ss[i].base, ss[i].last)})
			}
		}
	}
	return out
}

// checkObject compares one live object with its row and chunk rows.
func checkObject(s catalog.SegmentRecord, obj []byte, verify bool) []Problem {
	var out []Problem
	if int64(len(obj)) != s.Size {
		out = append(out, Problem{SizeMismatch, s.Key, fmt.Sprintf("row says %d bytes, object has %d", s.Size, len(obj))})
	}
	var (
		f   segment.Footer
		err error
	)
	if verify {
		f, err = segment.Verify(obj)
	} else {
		f, err = segment.ReadFooter(obj)
	}
	if err != nil {
		return append(out, Problem{CorruptObject, s.Key, err.Error()})
	}
	for _, c := range s.Chunks {
		if msg := chunkAgrees(c, f.Batches); msg != "" {
			out = append(out, Problem{ChunkMismatch, s.Key, fmt.Sprintf("chunk topic id %d partition %d [%d, %d] at bytes [%d, +%d): %s",
				c.TopicID, c.Partition, c.BaseOffset, c.LastOffset, c.Pos, c.Len, msg)})
		}
	}
	return out
}

// chunkAgrees checks that the footer's batches of the chunk's partition tile its byte
// range exactly and hold its offsets; it returns what disagrees, or "".
func chunkAgrees(c catalog.Chunk, batches []segment.BatchInfo) string {
	var in []segment.BatchInfo
	for _, b := range batches {
		if b.Pos >= c.Pos && b.Pos < c.Pos+c.Len {
			in = append(in, b)
		}
	}
	if len(in) == 0 {
		return "no batch of the footer starts in the range"
	}
	pos := c.Pos
	var records, maxTS int64 = 0, catalog.NoTimestamp
	for _, b := range in {
		if b.TopicID != c.TopicID || b.Partition != c.Partition {
			return fmt.Sprintf("the batch at byte %d belongs to topic id %d partition %d", b.Pos, b.TopicID, b.Partition)
		}
		if b.Pos != pos {
			return fmt.Sprintf("batches do not tile the range: one starts at byte %d, expected %d", b.Pos, pos)
		}
		pos += b.Len
		records += int64(b.LastOffsetDelta) + 1
		maxTS = max(maxTS, b.MaxTimestamp)
		if c.RealOffsets && (b.BaseOffset < c.BaseOffset || b.BaseOffset+int64(b.LastOffsetDelta) > c.LastOffset) {
			return fmt.Sprintf("the batch at byte %d holds offsets [%d, %d], outside the row's", b.Pos, b.BaseOffset, b.BaseOffset+int64(b.LastOffsetDelta))
		}
	}
	if pos != c.Pos+c.Len {
		return fmt.Sprintf("the batches end at byte %d, the row at %d", pos, c.Pos+c.Len)
	}
	if !c.RealOffsets && records != c.LastOffset-c.BaseOffset+1 {
		return fmt.Sprintf("the batches hold %d offsets, the row %d", records, c.LastOffset-c.BaseOffset+1)
	}
	if maxTS != c.MaxTimestamp {
		return fmt.Sprintf("the batches' maximum timestamp is %d, the row's %d", maxTS, c.MaxTimestamp)
	}
	return ""
}
