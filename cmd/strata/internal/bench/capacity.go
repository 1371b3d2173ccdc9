package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/cputime"
	"github.com/strata-io/strata/segment"
)

// CapacityCatalog is what the capacity phase drives: the catalog itself (the nodes'
// database through catalog/postgres or catalog/sqlite), not a node, so the figures are
// the catalog's ceiling with nothing else in the way.
type CapacityCatalog interface {
	CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (catalog.Topic, error)
	DeleteTopic(ctx context.Context, name string) error
	Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error)
	Heartbeat(ctx context.Context, hb catalog.Heartbeat) (catalog.HeartbeatResult, error)
	CommitOffsets(ctx context.Context, c catalog.OffsetCommit) error
}

// Capacity is the catalog capacity phase: how many flush commits, heartbeats and
// offset commits a second the catalog database sustains with this schema, with how
// many concurrent callers, and what each costs the database server. A flush commit is
// a node's one transaction per object (catalog.Catalog.Commit: every partition of the
// flush locked, offsets assigned, chunk rows inserted); writers are nodes' in-flight
// flushes. Writers of one topic contend for its partition rows, so "one topic"
// measures the row-lock ceiling (1 / lock hold time) and "a topic each" the database's.
type Capacity struct {
	CatalogKind string  `json:"catalog_kind"`
	CellSeconds float64 `json:"cell_seconds"`
	// ServerCPU says whether the database server's CPU per operation was measured:
	// only when its processes run on this machine (read from /proc).
	ServerCPU bool           `json:"server_cpu"`
	Cells     []CapacityCell `json:"cells"`
}

// CapacityCell is one measurement: Workers callers running Op back to back for the
// cell's time, each Op touching Partitions partitions (or, for heartbeats, one member
// of a group of Partitions members).
type CapacityCell struct {
	Name       string  `json:"name"`
	Op         string  `json:"op"`
	Workers    int     `json:"workers"`
	Partitions int     `json:"partitions"`
	Ops        int     `json:"ops"`
	PerSec     float64 `json:"per_s"`
	Latency    Latency `json:"latency"`
	// ServerCPUms is the database server's CPU per operation (all its processes);
	// ClientCPUms is this process's — what a node spends calling the catalog.
	ServerCPUms float64 `json:"server_cpu_ms_per_op,omitempty"`
	ClientCPUms float64 `json:"client_cpu_ms_per_op"`
}

// capacity runs the phase's cells. Its topics are deleted at the end (their chunk rows
// point at objects that were never written; nothing reads them).
func (b *runner) capacity(ctx context.Context) (*Capacity, error) {
	cfg := &b.cfg
	c := cfg.Catalog
	d := cfg.CapacityDuration
	cp := &Capacity{CatalogKind: cfg.DB.Kind(), CellSeconds: d.Seconds()}
	if cp.CatalogKind == "postgres" {
		_, cp.ServerCPU = serverCPU()
	}
	b.log.Info("phase: catalog capacity", "seconds_per_cell", d.Seconds())
	prefix := cfg.Topic + "-capacity-"
	var topics []string
	defer func() {
		dctx := context.WithoutCancel(ctx)
		for _, t := range topics {
			if err := c.DeleteTopic(dctx, t); err != nil {
				b.log.Warn("capacity: delete topic", "topic", t, "err", err)
			}
		}
	}()
	newTopic := func(partitions int) (catalog.Topic, error) {
		name := prefix + strconv.Itoa(len(topics))
		tp, err := c.CreateTopic(ctx, name, int32(partitions), nil)
		if err != nil {
			return tp, fmt.Errorf("bench: capacity: create topic: %w", err)
		}
		topics = append(topics, name)
		return tp, nil
	}
	// flush commits a flush of one 10-record batch to each of parts of tp.
	flush := func(ctx context.Context, tp catalog.Topic, parts []int32) error {
		req := catalog.Request{Batches: make([]catalog.Batch, len(parts))}
		for i, p := range parts {
			req.Batches[i] = catalog.Batch{TopicID: tp.ID, Partition: p, Pos: int64(i) << 10, Len: 1 << 10, Records: 10,
				MaxTimestamp: time.Now().UnixMilli(), BaseSequence: -1}
		}
		res, err := c.Commit(ctx, catalog.Segment{Key: segment.NewKey(time.Now()), Size: int64(len(parts)) << 10, Requests: []catalog.Request{req}})
		if err == nil && len(res) == 1 && res[0].Err != nil {
			err = res[0].Err
		}
		return err
	}
	span := func(n int) []int32 {
		ps := make([]int32, n)
		for i := range ps {
			ps[i] = int32(i)
		}
		return ps
	}

	// Flush commits: every writer to the same partitions of one topic, then a topic
	// (its partitions) per writer, then wide flushes, then a large topic.
	for _, w := range []int{1, 4, 16} {
		tp, err := newTopic(8)
		if err != nil {
			return nil, err
		}
		cell, err := b.cell(ctx, fmt.Sprintf("flush commits, %d writers, one topic of 8 partitions", w), "flush commit", w, 8, func(ctx context.Context, _ int) error {
			return flush(ctx, tp, span(8))
		})
		if err != nil {
			return nil, err
		}
		cp.Cells = append(cp.Cells, cell)
	}
	for _, sh := range []struct{ writers, parts int }{{4, 8}, {16, 8}, {1, 64}, {16, 64}} {
		tps := make([]catalog.Topic, sh.writers)
		for i := range tps {
			var err error
			if tps[i], err = newTopic(sh.parts); err != nil {
				return nil, err
			}
		}
		cell, err := b.cell(ctx, fmt.Sprintf("flush commits, %d writers, a topic of %d partitions each", sh.writers, sh.parts), "flush commit", sh.writers, sh.parts, func(ctx context.Context, w int) error {
			return flush(ctx, tps[w], span(sh.parts))
		})
		if err != nil {
			return nil, err
		}
		cp.Cells = append(cp.Cells, cell)
	}
	big, err := newTopic(4096)
	if err != nil {
		return nil, err
	}
	cell, err := b.cell(ctx, "flush commits, 16 writers, 8 random partitions of one topic of 4,096", "flush commit", 16, 8, func(ctx context.Context, w int) error {
		ps := rand.Perm(4096)[:8]
		parts := make([]int32, 8)
		for i, p := range ps {
			parts[i] = int32(p)
		}
		slices.Sort(parts) // a node's flush locks its partitions in order
		return flush(ctx, big, parts)
	})
	if err != nil {
		return nil, err
	}
	cp.Cells = append(cp.Cells, cell)

	// Heartbeats: one group of 64 members, and 16 groups of 4 (a heartbeat holds its
	// group's lock, so many small groups go wider than one large one).
	for _, sh := range []struct{ groups, members int }{{1, 64}, {16, 4}} {
		tp, err := newTopic(sh.members)
		if err != nil {
			return nil, err
		}
		var ms []*capMember
		for g := range sh.groups {
			for m := range sh.members {
				ms = append(ms, &capMember{c: c, group: fmt.Sprintf("%s-g%d-%d", prefix, sh.groups, g), id: fmt.Sprintf("m%d", m), topic: tp.Name})
			}
		}
		// Join and settle (assignments stop changing) before measuring.
		for round := 0; round < 10; round++ {
			for _, m := range ms {
				if err := m.beat(ctx); err != nil {
					return nil, err
				}
			}
		}
		cell, err := b.cell(ctx, fmt.Sprintf("heartbeats, %d group(s) of %d members, every member at once", sh.groups, sh.members), "heartbeat", len(ms), sh.members, func(ctx context.Context, w int) error {
			return ms[w].beat(ctx)
		})
		if err != nil {
			return nil, err
		}
		cp.Cells = append(cp.Cells, cell)
	}

	// Offset commits from outside a group (no live members), a group per committer,
	// of offsets the partitions hold (10 records each, from one flush).
	tp, err := newTopic(8)
	if err != nil {
		return nil, err
	}
	if err := flush(ctx, tp, span(8)); err != nil {
		return nil, fmt.Errorf("bench: capacity: fill the offset commits' topic: %w", err)
	}
	var offset atomic.Int64
	cell, err = b.cell(ctx, "offset commits, 16 committers, 8 partitions, a group each", "offset commit", 16, 8, func(ctx context.Context, w int) error {
		oc := catalog.OffsetCommit{Group: fmt.Sprintf("%s-oc-%d", prefix, w)}
		o := offset.Add(1) % 11
		for p := range int32(8) {
			oc.Offsets = append(oc.Offsets, catalog.CommitOffset{Topic: tp.Name, Partition: p, Offset: o})
		}
		return c.CommitOffsets(ctx, oc)
	})
	if err != nil {
		return nil, err
	}
	cp.Cells = append(cp.Cells, cell)
	for _, cl := range cp.Cells {
		b.log.Info("capacity", "cell", cl.Name, "per_s", int(cl.PerSec), "p99_ms", cl.Latency.P99, "server_cpu_ms", cl.ServerCPUms)
	}
	return cp, nil
}

// cell runs op from workers goroutines (op's second argument is the worker's index)
// for the phase's cell time and measures it.
func (b *runner) cell(ctx context.Context, name, op string, workers, partitions int, fn func(ctx context.Context, w int) error) (CapacityCell, error) {
	d := b.cfg.CapacityDuration
	if err := b.cfg.DB.analyze(ctx); err != nil {
		return CapacityCell{}, err
	}
	rec := newRecorder(time.Now())
	srv0, measure := serverCPU()
	measure = measure && b.cfg.DB.Kind() == "postgres"
	cli0 := cputime.Self()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil && time.Since(start) < d {
				t := time.Now()
				if err := fn(ctx, w); err != nil {
					errs <- fmt.Errorf("bench: capacity: %s: %w", name, err)
					return
				}
				rec.add(t, time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return CapacityCell{}, err
	}
	cell := CapacityCell{Name: name, Op: op, Workers: workers, Partitions: partitions, Latency: rec.summary()}
	cell.Ops = cell.Latency.N
	if cell.Ops == 0 {
		return cell, fmt.Errorf("bench: capacity: %s: no operation finished", name)
	}
	cell.PerSec = float64(cell.Ops) / elapsed.Seconds()
	cell.ClientCPUms = ms(cputime.Self()-cli0) / float64(cell.Ops)
	if srv1, ok := serverCPU(); ok && measure {
		cell.ServerCPUms = ms(srv1-srv0) / float64(cell.Ops)
	}
	return cell, nil
}

// capMember is a KIP-848 group member heartbeating as a client does.
type capMember struct {
	c         CapacityCatalog
	group, id string
	topic     string
	epoch     int32
	owned     []catalog.TopicPartitions
}

func (m *capMember) beat(ctx context.Context) error {
	hb := catalog.Heartbeat{Group: m.group, MemberID: m.id, MemberEpoch: m.epoch, Owned: m.owned, SessionTimeout: time.Minute}
	if m.epoch == catalog.JoinEpoch {
		hb.Topics = []string{m.topic}
	}
	res, err := m.c.Heartbeat(ctx, hb)
	if err != nil {
		return fmt.Errorf("heartbeat %s/%s: %w", m.group, m.id, err)
	}
	m.epoch, m.owned = res.MemberEpoch, res.Assignment
	return nil
}

// serverCPU is the CPU time of the database server's processes on this machine (every
// process named postgres, from /proc), and whether there are any. Linux's clock tick
// for /proc is 100 Hz on every architecture Go runs Strata on.
func serverCPU() (time.Duration, bool) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, false
	}
	var ticks int64
	found := false
	for _, dir := range dirs {
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: state is field 3, utime 14
		// and stime 15 of the whole line.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
		found = true
	}
	return time.Duration(ticks) * 10 * time.Millisecond, found
}
