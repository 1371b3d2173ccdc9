package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/crc32c"
	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/internal/sendbody"
	"github.com/strata-io/strata/objstore"
)

// A request body is built once and re-sent: rebuilding 500 records per request would
// spend on the bench's side the CPU the node is being measured with. Each record
// carries a header "t" holding its send time (unix nanoseconds, 19 digits) for the
// end-to-end latency; in the half-load phase, whose tails measure it, the digits are
// rewritten in place before each send, and a binary body's batch CRC recomputed. At
// maximum load the placeholder goes as it is (as in franz-go's records): stamping cost
// the producers a CRC pass over every byte they sent, CPU taken from the cores the
// nodes' paths are measured on (the bare Kafka producers' fell from 0.61 to 0.45
// CPU-seconds per GiB without it).

// tsDigits is the width of the send-time header value.
const tsDigits = 19

var tsPlaceholder = strings.Repeat("0", tsDigits)

// body is a reusable request body.
type body struct {
	buf   []byte
	slots []int // positions of the send-time digits
	crc   bool  // buf is one record batch: recompute its CRC after stamping
	recs  int
	bytes int64 // payload: keys and values
}

// stamp writes now into every send-time slot.
func (b *body) stamp(now time.Time) {
	var d [tsDigits]byte
	v := now.UnixNano()
	for i := tsDigits - 1; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
	for _, s := range b.slots {
		copy(b.buf[s:], d[:])
	}
	if b.crc {
		binary.BigEndian.PutUint32(b.buf[17:], crc32c.Checksum(b.buf[21:]))
	}
}

// payload returns n bytes of printable filler for record i (no JSON escapes needed).
func payload(i, n int) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	v := make([]byte, n)
	x := uint32(i)*2654435761 + 1
	for j := range v {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		v[j] = alphabet[x%uint32(len(alphabet))]
	}
	return v
}

func slotsOf(buf []byte) []int {
	var out []int
	needle := []byte(`"` + tsPlaceholder + `"`)
	raw := []byte(tsPlaceholder)
	if bytes.Contains(buf, needle) {
		for i := 0; ; {
			j := bytes.Index(buf[i:], needle)
			if j < 0 {
				return out
			}
			out = append(out, i+j+1)
			i += j + len(needle)
		}
	}
	for i := 0; ; {
		j := bytes.Index(buf[i:], raw)
		if j < 0 {
			return out
		}
		out = append(out, i+j)
		i += j + len(raw)
	}
}

// binaryBody is n records of size-byte values as one Kafka v2 batch.
func binaryBody(n, size, seed int) (*body, error) {
	recs := make([]client.RawRecord, n)
	var bytes int64
	for i := range recs {
		k := []byte(fmt.Sprintf("key-%07d", seed*n+i))
		recs[i] = client.RawRecord{Key: k, Value: payload(seed*n+i, size), Headers: []client.RawHeader{{Key: "t", Value: []byte(tsPlaceholder)}}}
		bytes += int64(len(k) + size)
	}
	buf, err := client.EncodeBatch(nil, recs, client.BatchOptions{})
	if err != nil {
		return nil, err
	}
	b := &body{buf: buf, crc: true, recs: n, bytes: bytes}
	b.slots = slotsOf(buf)
	if len(b.slots) != n {
		return nil, fmt.Errorf("bench: %d send-time slots in a batch of %d records", len(b.slots), n)
	}
	return b, nil
}

// jsonBody is n records of size-byte string values for one partition, as a JSON
// produce body (the bench topic's key and value formats are string).
func jsonBody(n, size, seed int, partition int32) (*body, error) {
	var w bytes.Buffer
	var total int64
	w.WriteString(`{"records":[`)
	for i := range n {
		if i > 0 {
			w.WriteByte(',')
		}
		k := fmt.Sprintf("key-%07d", seed*n+i)
		fmt.Fprintf(&w, `{"partition":%d,"key":"%s","value":"%s","headers":{"t":"%s"}}`, partition, k, payload(seed*n+i, size), tsPlaceholder)
		total += int64(len(k) + size)
	}
	w.WriteString(`]}`)
	b := &body{buf: w.Bytes(), recs: n, bytes: total}
	b.slots = slotsOf(b.buf)
	if len(b.slots) != n {
		return nil, fmt.Errorf("bench: %d send-time slots in a JSON body of %d records", len(b.slots), n)
	}
	return b, nil
}

// counters are a phase's totals, updated by every producer.
type counters struct {
	requests, records, bytes atomic.Int64
	rejected                 atomic.Int64 // 429 buffer_full: back-pressure, retried
	failed                   atomic.Int64 // anything else
	firstErr                 atomic.Value // string
}

func (c *counters) fail(err error) {
	c.failed.Add(1)
	c.firstErr.CompareAndSwap(nil, err.Error())
}

// sender sends produce requests of one path to the nodes in turn.
type sender struct {
	hc    *http.Client
	nodes []string
	topic string
	path  string // "binary" or "json"
	next  atomic.Uint64
}

// send posts b to partition p (binary: the query names it; JSON: the body does) and
// reports whether it was accepted; a 429 reports retryAfter.
func (s *sender) send(ctx context.Context, _ int, b *body, p int32) (retryAfter time.Duration, err error) {
	node := s.nodes[int(s.next.Add(1))%len(s.nodes)]
	u := node + "/v1/topics/" + s.topic + "/records"
	ct := "application/json"
	if s.path == "binary" {
		u += "?partition=" + strconv.Itoa(int(p))
		ct = client.RecordBatchContentType
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return 0, err
	}
	// Written from memory by the bench's connections (sendbody.Dial): a body given as a
	// bytes.Reader was copied on its way out, by producers that share the nodes' cores.
	sendbody.SetBody(req, func() sendbody.Body { return objstore.NewPartsReader([][]byte{b.buf}) })
	req.Header.Set("Content-Type", ct)
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	ans, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusOK:
		return 0, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		// Back-pressure: retry soon. The server's Retry-After (a second) is for
		// clients that do not know better; a flush frees room within a linger.
		return 20 * time.Millisecond, errBackPressure
	}
	return 0, fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, ans)
}

var errBackPressure = errors.New("back-pressure")

// sendFunc sends body b to partition p for producer i and reports whether it was
// accepted; back-pressure is errBackPressure, with the wait before a retry.
type sendFunc func(ctx context.Context, i int, b *body, p int32) (retryAfter time.Duration, err error)

// ended reports whether ctx is done or past its deadline. A request cut off by the
// phase's deadline (a connection's deadline is the phase's end) may return before
// ctx says it is done, and is not a failure.
func ended(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(d)
}

// closedLoop runs producers that each send their next request as soon as the last
// is answered, until ctx ends. Producer i writes partition i%partitions with
// bodies[i%len(bodies)], unstamped (see the top of this file), through send.
func closedLoop(ctx context.Context, producers int, bodies []*body, partitions int, send sendFunc, c *counters, ack *recorder) {
	var wg sync.WaitGroup
	for i := range producers {
		b := bodies[i%len(bodies)]
		p := int32(i % partitions)
		wg.Go(func() {
			for !ended(ctx) {
				start := time.Now()
				wait, err := send(ctx, i, b, p)
				switch {
				case err == nil:
					ack.add(start, time.Since(start))
					c.requests.Add(1)
					c.records.Add(int64(b.recs))
					c.bytes.Add(b.bytes)
				case errors.Is(err, errBackPressure):
					c.rejected.Add(1)
					_ = ctxwait.Sleep(ctx, wait)
				case !ended(ctx):
					c.fail(err)
					_ = ctxwait.Sleep(ctx, 100*time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
}

// openLoop sends rate records a second, in requests of the bodies' size, on a fixed
// schedule whatever the answers take (at most maxInflight outstanding), until ctx
// ends. Latency is from the scheduled send time, so a stall is charged to every
// request it delayed rather than hidden (no coordinated omission).
func openLoop(ctx context.Context, s *sender, bodies []*body, partitions int, rate float64, maxInflight int, c *counters, ack *recorder) {
	if rate <= 0 || len(bodies) == 0 {
		<-ctx.Done()
		return
	}
	interval := time.Duration(float64(time.Second) * float64(bodies[0].recs) / rate)
	free := make(chan *body, len(bodies))
	for _, b := range bodies {
		free <- b
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	start := time.Now()
	for k := 0; ; k++ {
		at := start.Add(time.Duration(k) * interval)
		if ctxwait.Sleep(ctx, time.Until(at)) != nil {
			return
		}
		var b *body
		select {
		case <-ctx.Done():
			return
		case b = <-free:
		}
		p := int32(k % partitions)
		wg.Go(func() {
			defer func() { free <- b }()
			for ctx.Err() == nil {
				b.stamp(time.Now())
				wait, err := s.send(ctx, 0, b, p)
				switch {
				case err == nil:
					ack.add(at, time.Since(at))
					c.requests.Add(1)
					c.records.Add(int64(b.recs))
					c.bytes.Add(b.bytes)
					return
				case errors.Is(err, errBackPressure):
					c.rejected.Add(1)
					_ = ctxwait.Sleep(ctx, wait)
				default:
					if !ended(ctx) {
						c.fail(err)
					}
					return
				}
			}
		})
	}
}

// tail follows one partition over Server-Sent Events from the high watermark and
// records, per record, now minus its send-time header, until ctx ends. ready is
// closed once the stream is open.
func tail(ctx context.Context, hc *http.Client, node, topic string, p int32, e2e *recorder, ready chan<- struct{}) error {
	u := node + "/v1/topics/" + topic + "/partitions/" + strconv.Itoa(int(p)) + "/records?offset=latest"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		close(ready)
		return err
	}
	defer resp.Body.Close()
	close(ready)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("tail %s/%d: HTTP %d: %s", topic, p, resp.StatusCode, b)
	}
	// The record's JSON is scanned for the header, not decoded: at tens of thousands
	// of records a second a full decode would compete with the node for the CPU.
	marker := []byte(`{"key":"t","value":"`)
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// Longer than the buffer: the header is near the end; keep the tail.
			var rest []byte
			for err == bufio.ErrBufferFull {
				rest = append(rest[:0], line[max(0, len(line)-256):]...)
				line, err = br.ReadSlice('\n')
			}
			line = append(rest, line...)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("tail %s/%d: %w", topic, p, err)
		}
		now := time.Now()
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		i := bytes.LastIndex(line, marker)
		if i < 0 || len(line) < i+len(marker)+tsDigits {
			continue
		}
		v, err := strconv.ParseInt(string(line[i+len(marker):i+len(marker)+tsDigits]), 10, 64)
		if err != nil || v == 0 {
			continue
		}
		sent := time.Unix(0, v)
		e2e.add(now, now.Sub(sent))
	}
}

// fetchRange reads partition p from offset from until until (or the high watermark)
// with fetches of maxBytes, binary or JSON, and returns the bytes received.
func fetchRange(ctx context.Context, hc *http.Client, node, topic string, p int32, from, until, maxBytes int64, binaryPath bool) (int64, error) {
	var total int64
	base := node + "/v1/topics/" + topic + "/partitions/" + strconv.Itoa(int(p)) + "/records?max_bytes=" + strconv.FormatInt(maxBytes, 10) + "&max_records=10000&offset="
	buf := make([]byte, 0, maxBytes+maxBytes/2)
	for off := from; off < until; {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+strconv.FormatInt(off, 10), nil)
		if err != nil {
			return total, err
		}
		if binaryPath {
			req.Header.Set("Accept", client.RecordBatchContentType)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return total, err
		}
		w := bytes.NewBuffer(buf[:0])
		_, err = w.ReadFrom(resp.Body)
		resp.Body.Close()
		buf = w.Bytes()
		if err != nil {
			return total, err
		}
		if resp.StatusCode != http.StatusOK {
			return total, fmt.Errorf("fetch %s/%d at %d: HTTP %d: %.300s", topic, p, off, resp.StatusCode, buf)
		}
		total += int64(len(buf))
		var next int64
		if binaryPath {
			next, err = strconv.ParseInt(resp.Header.Get("Strata-Next-Offset"), 10, 64)
		} else {
			next, err = jsonNextOffset(buf)
		}
		if err != nil {
			return total, fmt.Errorf("fetch %s/%d at %d: %w", topic, p, off, err)
		}
		if next <= off {
			break // the high watermark
		}
		off = next
	}
	return total, nil
}

// jsonNextOffset reads next_offset from the end of a JSON fetch answer, where the
// API puts it after the records.
func jsonNextOffset(b []byte) (int64, error) {
	const key = `"next_offset":`
	i := bytes.LastIndex(b, []byte(key))
	if i < 0 {
		return 0, fmt.Errorf("no next_offset in the answer")
	}
	rest := b[i+len(key):]
	j := bytes.IndexAny(rest, ",}")
	if j < 0 {
		return 0, fmt.Errorf("malformed next_offset")
	}
	return strconv.ParseInt(string(bytes.TrimSpace(rest[:j])), 10, 64)
}
