package broker

import (
	"bytes"
	"context"
	"fmt"

	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
)

// A search is a fetch with a filter: the core reads a partition's records from an offset
// up to an end, a bounded stretch at a time, and answers only those that match — the
// client never pulls the range to filter it itself (the web console's record search).
// One call scans at most SearchRequest.MaxScanBytes of records; its NextOffset says
// where the scan stopped, to search on from there.

// Search bounds.
const (
	// DefaultSearchScanBytes is SearchRequest.MaxScanBytes' default: the record bytes
	// one call reads before it answers.
	DefaultSearchScanBytes = 64 << 20
	// MaxSearchScanBytes caps SearchRequest.MaxScanBytes.
	MaxSearchScanBytes = 1 << 30
	// DefaultSearchMatches is SearchRequest.MaxRecords' default.
	DefaultSearchMatches = 100
	// searchChunkBytes is what one read of the scan asks the reader for; each read's
	// memory is released before the next.
	searchChunkBytes   = 4 << 20
	searchChunkRecords = 10000
)

// SearchRequest is a search of one partition. Topic, Partition, Offset, MaxRecords (the
// matches answered at most), Isolation and Memory are as in a fetch; Wait and MaxBytes
// are not used.
type SearchRequest struct {
	FetchRequest
	// End is the offset the search stops before; 0, or beyond the readable end: the
	// end (the high watermark, or the last stable offset when read committed).
	End int64
	// Key, when not nil, matches records whose key is exactly these bytes.
	Key []byte
	// Contains, when not empty, matches records whose key, value or a header value
	// contains these bytes.
	Contains []byte
	// MaxScanBytes bounds the record bytes (keys, values and headers) read by one call:
	// 0 DefaultSearchScanBytes, capped at MaxSearchScanBytes.
	MaxScanBytes int64
}

// SearchResult is a search's answer: the matching records, and NextOffset, the offset
// after the last record scanned — equal to the end when the range was searched whole.
type SearchResult struct {
	Records          []segment.DecodedRecord
	NextOffset       int64
	Scanned          int64 // records read
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
}

// Matches says whether rec passes req's filter.
func (req *SearchRequest) Matches(rec *segment.DecodedRecord) bool {
	if req.Key != nil && (rec.Key == nil || !bytes.Equal(rec.Key, req.Key)) {
		return false
	}
	if len(req.Contains) == 0 {
		return true
	}
	if bytes.Contains(rec.Key, req.Contains) || bytes.Contains(rec.Value, req.Contains) {
		return true
	}
	for _, h := range rec.Headers {
		if bytes.Contains(h.Value, req.Contains) {
			return true
		}
	}
	return false
}

// Search reads req's range and answers the records that match, at most req.MaxRecords,
// scanning at most req.MaxScanBytes: it needs read on the topic, as a fetch does.
func (b *Broker) Search(ctx context.Context, who Principal, req SearchRequest) (SearchResult, error) {
	if e := b.check(CapFetch); e != nil {
		return SearchResult{}, e
	}
	if req.Key == nil && len(req.Contains) == 0 && req.End == 0 {
		return SearchResult{}, newError(CodeInvalidParameter, "a search needs a key, a text to look for or an end offset")
	}
	if req.End < 0 {
		return SearchResult{}, newError(CodeInvalidOffset, "the end offset %d is negative", req.End)
	}
	f, e := b.fetch(ctx, who, &req.FetchRequest)
	if e != nil {
		return SearchResult{}, e
	}
	want := req.MaxRecords
	if want <= 0 {
		want = DefaultSearchMatches
	}
	budget := req.MaxScanBytes
	if budget <= 0 {
		budget = DefaultSearchScanBytes
	}
	budget = min(budget, MaxSearchScanBytes)
	f.Wait, f.MaxRecords, f.MaxBytes = 0, searchChunkRecords, searchChunkBytes
	out := SearchResult{NextOffset: req.Offset}
	var scanned int64
	chunk := req.Memory.Sibling()
	defer chunk.Release()
	for {
		if req.End != 0 && out.NextOffset >= req.End {
			return out, nil
		}
		f.Offset, f.Memory = out.NextOffset, chunk
		res, err := b.d.Reader.Fetch(ctx, f)
		if err != nil {
			return SearchResult{}, fetchError(err, onPartition(req.Topic, req.Partition))
		}
		out.HighWatermark, out.LastStableOffset, out.LogStartOffset = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
		for i := range res.Records {
			rec := &res.Records[i]
			if req.End != 0 && rec.Offset >= req.End {
				out.NextOffset = req.End
				return out, nil
			}
			out.NextOffset = rec.Offset + 1
			out.Scanned++
			scanned += int64(len(rec.Key) + len(rec.Value))
			for _, h := range rec.Headers {
				scanned += int64(len(h.Key) + len(h.Value))
			}
			if req.Matches(rec) {
				kept := copyRecord(rec)
				if err := req.Memory.Reserve(ctx, recordBytes(&kept), 0, membudget.UseFetch); err != nil {
					return SearchResult{}, fetchError(fmt.Errorf("%w: %w", reader.ErrMemoryExhausted, err), onPartition(req.Topic, req.Partition))
				}
				out.Records = append(out.Records, kept)
				if len(out.Records) >= want {
					return out, nil
				}
			}
			if scanned >= budget {
				return out, nil
			}
		}
		chunk.Release()
		if res.NextOffset <= f.Offset {
			return out, nil // the readable end
		}
		// Offsets the fetch passed without records (transaction markers, aborted or
		// compacted records) are searched past, not again.
		out.NextOffset = max(out.NextOffset, res.NextOffset)
		if req.End != 0 {
			out.NextOffset = min(out.NextOffset, req.End)
		}
		if err := ctx.Err(); err != nil {
			return SearchResult{}, err
		}
	}
}

// copyRecord copies a record out of the reader's buffers, so that a search holds only
// its matches.
func copyRecord(r *segment.DecodedRecord) segment.DecodedRecord {
	c := *r
	c.Key = bytes.Clone(r.Key)
	c.Value = bytes.Clone(r.Value)
	if r.Headers != nil {
		c.Headers = make([]segment.Header, len(r.Headers))
		for i, h := range r.Headers {
			c.Headers[i] = segment.Header{Key: h.Key, Value: bytes.Clone(h.Value)}
		}
	}
	return c
}

func recordBytes(r *segment.DecodedRecord) int64 {
	n := int64(len(r.Key) + len(r.Value) + 64)
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value) + 16)
	}
	return n
}
