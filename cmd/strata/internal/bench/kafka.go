package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Kafka protocol's phases, when the nodes serve it (Config.KafkaNodes):
//
//   - produce-kafka: franz-go producers (idempotent, five requests in flight per node, as
//     a Kafka client runs by default) through the listeners at maximum load, the same
//     records as the binary HTTP path's, measured beside it in the same run;
//   - produce-kafka-bare: the binary HTTP path's producers, bodies and load sent as
//     Kafka Produce requests by a bare client, so that only the nodes' path differs;
//   - fetch-kafka-cached: the data the fetch phases read, read again with Kafka Fetch
//     requests from the node that cached it, beside the raw GET floor and the cached
//     binary HTTP fetch.

// kafkaProducersPerClient: a franz-go client batches every partition's records into
// one request per node, so a client stands for several HTTP producers.
const kafkaProducersPerClient = 4

// kafkaClients is how many franz-go clients stand for the HTTP producers: one per
// kafkaProducersPerClient, but no more than there are partitions, since each client
// writes partitions of its own (two clients sharing one would split its batches).
func kafkaClients(cfg *Config) int {
	return max(1, min(cfg.Partitions, cfg.Producers/kafkaProducersPerClient))
}

// produceKafka is produceMax for franz-go through the Kafka listeners.
func (b *runner) produceKafka(ctx context.Context) (Produce, error) {
	cfg := &b.cfg
	name := "produce-kafka"
	clients := kafkaClients(cfg)
	b.log.Info("phase: maximum load", "path", "kafka", "clients", clients, "seconds", cfg.Duration.Seconds())
	var cls []*kgo.Client
	var batches atomic.Int64
	defer func() {
		for _, cl := range cls {
			cl.Close()
		}
	}()
	for range clients {
		cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.KafkaNodes...), kgo.DefaultProduceTopic(cfg.Topic),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), // Record.Partition, below
			// Batches the size of the HTTP path's requests (at most Kafka's default
			// 1 MB, and well under a flush: a larger request is refused).
			kgo.ProducerBatchMaxBytes(int32(min(1_000_000, cfg.MaxFlushBytes/4, int64(cfg.BatchRecords*(cfg.RecordSize+40)+61)))),
			// As many records outstanding as the HTTP producers keep in flight
			// (Producers requests of BatchRecords), so ack latency compares.
			kgo.MaxBufferedRecords(max(1, cfg.Producers*cfg.BatchRecords/clients)),
			kgo.WithHooks(batchCounter{&batches}), kgo.WithLogger(kgoLog{b.log}))
		if err != nil {
			return Produce{}, fmt.Errorf("bench: kafka client: %w", err)
		}
		cls = append(cls, cl)
	}
	// The binary path's records: keys, values and a header, 1 KiB values by default.
	n := cfg.BatchRecords * cfg.Partitions
	keys, vals := make([][]byte, n), make([][]byte, n)
	for i := range n {
		keys[i], vals[i] = fmt.Appendf(nil, "key-%07d", i), payload(i, cfg.RecordSize)
	}
	p := Produce{Name: name, Path: "kafka", Mode: "closed"}
	var c counters
	ack := newRecorder(time.Now())
	// Records are reused once answered (franz-go is done with a record when its promise
	// returns), and every record shares one header slice and one promise: allocated per
	// record, they kept the clients' collector busy on the cores the nodes use.
	headers := []kgo.RecordHeader{{Key: "t", Value: []byte(tsPlaceholder)}}
	records := sync.Pool{New: func() any { return new(kgo.Record) }}
	promise := func(r *kgo.Record, err error) {
		defer records.Put(r)
		if err != nil {
			c.fail(err)
			return
		}
		c.bytes.Add(int64(len(r.Key) + len(r.Value)))
		// One record in a request's worth is timed, as the HTTP producers time one
		// answer per request: timing every record took a tenth of the clients' CPU.
		if c.records.Add(1)%int64(cfg.BatchRecords) == 0 {
			ack.add(r.Timestamp, time.Since(r.Timestamp))
		}
	}
	err := b.phase(ctx, name, &p, &c, ack, func(ctx context.Context) {
		var wg sync.WaitGroup
		for ci, cl := range cls {
			wg.Go(func() {
				// The client's own partitions, as each HTTP producer writes one: with
				// every client writing every partition, the records it may buffer
				// (MaxBufferedRecords) were spread over all of them, and its batches
				// averaged 165 records instead of 500, each costing the node its
				// per-batch work. Partition p is client p%clients's.
				var parts []int32
				for p := range int32(cfg.Partitions) {
					if int(p)%clients == ci {
						parts = append(parts, p)
					}
				}
				for i := ci; ctx.Err() == nil; i += clients {
					r := records.Get().(*kgo.Record)
					*r = kgo.Record{Key: keys[i%n], Value: vals[i%n], Partition: parts[i%len(parts)], Headers: headers}
					// Not ctx: records buffered when the phase ends are still answered.
					cl.Produce(context.Background(), r, promise)
				}
				// The phase includes answering what was buffered at its end (bounded:
				// a client that cannot get its records answered fails the phase).
				fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				if err := cl.Flush(fctx); err != nil {
					c.fail(fmt.Errorf("flush the records buffered at the end: %w", err))
				}
				cancel()
			})
		}
		wg.Wait()
	})
	p.Requests = batches.Load()
	return p, err
}

// produceKafkaBare is produceMax's binary path over the Kafka protocol: the same
// closed loop, in which producer i keeps a connection to a Kafka listener (dialled
// again when an answer is lost) and sends the binary path's body for partition
// i%Partitions (the same Kafka record batch) as the one batch of a Produce request
// with acks=all. Clients and load are then the binary path's, so the two phases
// compare the nodes' two produce paths; franz-go's phase compares them with a real
// client's own CPU, which shares this machine's cores with the nodes.
func (b *runner) produceKafkaBare(ctx context.Context) (Produce, error) {
	cfg := &b.cfg
	name := "produce-kafka-bare"
	b.log.Info("phase: maximum load", "path", "kafka-bare", "producers", cfg.Producers, "seconds", cfg.Duration.Seconds())
	bodies, err := b.producerBodies("binary", cfg.Producers)
	if err != nil {
		return Produce{}, err
	}
	conns := make([]*kafkaConn, cfg.Producers)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		if conns[i], err = dialKafka(ctx, cfg.KafkaNodes[i%len(cfg.KafkaNodes)]); err != nil {
			return Produce{}, err
		}
	}
	p := Produce{Name: name, Path: "kafka-bare", Mode: "closed"}
	var c counters
	ack := newRecorder(time.Now())
	send := func(ctx context.Context, i int, body *body, part int32) (time.Duration, error) {
		if conns[i] == nil { // its last answer was lost: the connection is out of step
			nc, err := dialKafka(ctx, cfg.KafkaNodes[i%len(cfg.KafkaNodes)])
			if err != nil {
				return 0, err
			}
			conns[i] = nc
		}
		err := conns[i].produce(ctx, cfg.Topic, part, body.buf)
		var answered *kerr.Error // an error code: the connection is still in step
		if err != nil && !errors.Is(err, errBackPressure) && !errors.As(err, &answered) {
			conns[i].Close()
			conns[i] = nil
		}
		return 20 * time.Millisecond, err
	}
	err = b.phase(ctx, name, &p, &c, ack, func(ctx context.Context) {
		closedLoop(ctx, cfg.Producers, bodies, cfg.Partitions, send, &c, ack)
	})
	return p, err
}

// produce sends batch to topic/p with acks=all and waits for the answer; a full
// writer buffer (NOT_ENOUGH_REPLICAS, the listener's back-pressure) is errBackPressure.
func (c *kafkaConn) produce(ctx context.Context, topic string, p int32, batch []byte) error {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if err := c.roundTrip(ctx, req, resp, maxProduceVersion); err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("produce %s/%d: malformed answer", topic, p)
	}
	switch code := resp.Topics[0].Partitions[0].ErrorCode; code {
	case 0:
		return nil
	case kerr.NotEnoughReplicas.Code:
		return errBackPressure
	default:
		return fmt.Errorf("produce %s/%d: %w", topic, p, kerr.ErrorForCode(code))
	}
}

// batchCounter counts the record batches franz-go writes.
type batchCounter struct{ n *atomic.Int64 }

func (h batchCounter) OnProduceBatchWritten(kgo.BrokerMetadata, string, int32, kgo.ProduceBatchMetrics) {
	h.n.Add(1)
}

var _ kgo.HookProduceBatchWritten = batchCounter{}

// fetchKafka reads each partition up to until[p] with Kafka Fetch requests of
// maxBytes, from the Kafka listener of the node that read it in the HTTP fetch phases
// (caches are per node), and returns the record batch bytes received.
func (b *runner) fetchKafka(ctx context.Context, until map[int32]int64, maxBytes int32) (Fetch, error) {
	cfg := &b.cfg
	name := "fetch-kafka-cached"
	b.log.Info("phase: " + name)
	// One connection per partition, as the HTTP fetch phases read each partition on a
	// connection of its own, and as lean a client as theirs: a response is read into a
	// reused buffer and decoded by kmsg, nothing more (franz-go's client allocates and
	// zeroes every response, work the HTTP reader does not do).
	conns := map[int32]*kafkaConn{}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for part := range until {
		c, err := dialKafka(ctx, cfg.KafkaNodes[int(part)%len(cfg.KafkaNodes)])
		if err != nil {
			return Fetch{}, err
		}
		conns[part] = c
	}
	before, err := scrape(ctx, b.hc, cfg.Nodes)
	if err != nil {
		return Fetch{}, err
	}
	cfg.Phase(name, false)
	start := time.Now()
	var wg sync.WaitGroup
	var read atomic.Int64
	errs := make(chan error, len(until))
	for part, end := range until {
		c := conns[part]
		wg.Go(func() {
			n, err := kafkaFetchRange(ctx, c, cfg.Topic, part, 0, end, maxBytes)
			read.Add(n)
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	cfg.Phase(name, true)
	close(errs)
	if err := <-errs; err != nil {
		return Fetch{}, fmt.Errorf("bench: %s: %w", name, err)
	}
	after, err := scrape(ctx, b.hc, cfg.Nodes)
	if err != nil {
		return Fetch{}, err
	}
	d := delta(before, after)
	f := Fetch{Name: name, Path: "kafka", Bytes: read.Load(), Seconds: secs, MiBps: float64(read.Load()) / (1 << 20) / secs,
		Gets: d.sum("strata_objstore_requests_total", `op="get`), GetBytes: d.sum("strata_objstore_bytes_total", `op="get`), Objects: b.meanObject}
	if f.Bytes > 0 {
		f.GetsPer4Mi = f.Gets / (float64(f.Bytes) / (4 << 20))
	}
	b.log.Info("phase done", "phase", name, "mib_per_s", fmt.Sprintf("%.1f", f.MiBps), "gets", f.Gets)
	return f, nil
}

// kafkaFetchRange reads partition p from offset from until until with Fetch requests
// of maxBytes, and returns the record batch bytes received. The next offset comes from
// the last batch's header (base offset and last offset delta): nothing is decoded.
func kafkaFetchRange(ctx context.Context, c *kafkaConn, topic string, p int32, from, until int64, maxBytes int32) (int64, error) {
	var total int64
	for off := from; off < until; {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, maxBytes
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, maxBytes
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		if err := c.roundTrip(ctx, req, resp, maxFetchVersion); err != nil {
			return total, err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return total, fmt.Errorf("fetch %s/%d at %d: malformed answer", topic, p, off)
		}
		rpr := &resp.Topics[0].Partitions[0]
		if rpr.ErrorCode != 0 {
			return total, fmt.Errorf("fetch %s/%d at %d: error code %d", topic, p, off, rpr.ErrorCode)
		}
		data := rpr.RecordBatches
		total += int64(len(data))
		next := off
		for pos := 0; pos+61 <= len(data); {
			length := int(int32(binary.BigEndian.Uint32(data[pos+8:])))
			if length < 49 || pos+12+length > len(data) {
				break
			}
			next = int64(binary.BigEndian.Uint64(data[pos:])) + int64(int32(binary.BigEndian.Uint32(data[pos+23:]))) + 1
			pos += 12 + length
		}
		if next <= off {
			break // the high watermark
		}
		off = next
	}
	return total, nil
}

// kgoLog passes franz-go's warnings and errors to the bench's log.
type kgoLog struct{ log *slog.Logger }

func (l kgoLog) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l kgoLog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelDebug
	switch level {
	case kgo.LogLevelError:
		lv = slog.LevelError
	case kgo.LogLevelWarn:
		lv = slog.LevelWarn
	case kgo.LogLevelInfo:
		lv = slog.LevelInfo
	}
	l.log.Log(context.Background(), lv, "franz-go: "+msg, keyvals...)
}

// kafkaTargets adds the Kafka phases' targets: franz-go producing beside the binary
// HTTP path, and the cached Kafka fetch beside the raw GET floor.
func (b *runner) kafkaTargets(byName map[string]*Produce, add func(Target)) {
	cfg, rep := &b.cfg, &b.rep
	if k, p := byName["produce-kafka"], byName["produce-binary"]; k != nil && p != nil && p.MiBps > 0 {
		r := k.MiBps / p.MiBps
		add(Target{Name: "produce Kafka (franz-go) vs HTTP binary", Figure: k.MiBps, Bound: 0.9 * p.MiBps, Unit: "MiB/s", Ratio: r, Want: ">= 0.9x", Pass: r >= 0.9,
			Note: fmt.Sprintf("%d franz-go clients (idempotent, uncompressed) vs %d HTTP producers of %d-record batches, same run; "+
				"node CPU s/GiB %.2f vs %.2f, the bench's producers' %.2f vs %.2f (they share the machine's cores)",
				kafkaClients(cfg), cfg.Producers, cfg.BatchRecords,
				k.CPUSecPerGiB, p.CPUSecPerGiB, k.ClientCPUSecPerGiB, p.ClientCPUSecPerGiB)})
		// The node's own cost of the two paths, which the throughput ratio above mixes
		// with the clients' on a machine whose cores they share.
		if p.CPUSecPerGiB > 0 && k.CPUSecPerGiB > 0 {
			r := k.CPUSecPerGiB / p.CPUSecPerGiB
			add(Target{Name: "node CPU per GiB, Kafka vs HTTP binary", Figure: k.CPUSecPerGiB, Bound: 1.1 * p.CPUSecPerGiB, Unit: "CPU s/GiB", Ratio: r, Want: "<= 1.1x", Pass: r <= 1.1})
		}
	}
	// The same producers, bodies and load on both protocols: the nodes' paths compared
	// with the clients' cost equal.
	if k, p := byName["produce-kafka-bare"], byName["produce-binary"]; k != nil && p != nil && p.MiBps > 0 {
		r := k.MiBps / p.MiBps
		add(Target{Name: "produce Kafka (bare client, the binary path's batches) vs HTTP binary", Figure: k.MiBps, Bound: 0.9 * p.MiBps, Unit: "MiB/s", Ratio: r, Want: ">= 0.9x", Pass: r >= 0.9,
			Note: fmt.Sprintf("%d producers of %d-record batches on each protocol, same run; node CPU s/GiB %.2f vs %.2f, the bench's producers' %.2f vs %.2f",
				cfg.Producers, cfg.BatchRecords, k.CPUSecPerGiB, p.CPUSecPerGiB, k.ClientCPUSecPerGiB, p.ClientCPUSecPerGiB)})
	}
	var kafka, http *Fetch
	for i := range rep.Fetch {
		switch rep.Fetch[i].Name {
		case "fetch-kafka-cached":
			kafka = &rep.Fetch[i]
		case "fetch-cached":
			http = &rep.Fetch[i]
		}
	}
	if fl := rep.Floor; kafka != nil && fl != nil && fl.GetMiBps > 0 {
		r := kafka.MiBps / fl.GetMiBps
		t := Target{Name: "cached fetch Kafka vs raw GET bandwidth", Figure: kafka.MiBps, Bound: 0.8 * fl.GetMiBps, Unit: "MiB/s", Ratio: r, Want: ">= 0.8x", Pass: r >= 0.8}
		if http != nil && http.MiBps > 0 {
			t.Note = fmt.Sprintf("the cached binary HTTP fetch of the same data: %.1f MiB/s (%.2fx)", http.MiBps, kafka.MiBps/http.MiBps)
		}
		add(t)
	}
}

// The highest Fetch and Produce versions the listener serves.
const (
	maxFetchVersion   = 12
	maxProduceVersion = 12
)

// kafkaConn is a bare Kafka connection for the fetch and bare produce phases: requests
// framed by kmsg, responses read into one reused buffer and decoded by kmsg.
type kafkaConn struct {
	net.Conn
	corr int32
	out  []byte
	in   []byte
}

func dialKafka(ctx context.Context, addr string) (*kafkaConn, error) {
	nc, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bench: dial Kafka listener %s: %w", addr, err)
	}
	return &kafkaConn{Conn: nc}, nil
}

// roundTrip sends req (at most at version maxVersion) and decodes the answer into resp,
// whose byte fields then refer to the connection's buffer until the next roundTrip.
func (c *kafkaConn) roundTrip(ctx context.Context, req kmsg.Request, resp kmsg.Response, maxVersion int16) error {
	req.SetVersion(min(req.MaxVersion(), maxVersion))
	resp.SetVersion(req.GetVersion())
	c.corr++
	c.out = kmsg.NewRequestFormatter(kmsg.FormatterClientID("strata-bench")).AppendRequest(c.out[:0], req, c.corr)
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	if _, err := c.Write(c.out); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if cap(c.in) < n {
		c.in = make([]byte, n)
	}
	c.in = c.in[:n]
	if _, err := io.ReadFull(c, c.in); err != nil {
		return err
	}
	body := c.in[4:] // the correlation id
	if resp.IsFlexible() {
		body = body[1:] // no tagged fields in the response header
	}
	return resp.ReadFrom(body)
}
