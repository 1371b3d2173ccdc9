package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
)

// fetch serves Fetch: the core reads every partition's stored batches, waiting up to
// MaxWait for MinBytes across them, and the batches go out as stored but for their base
// offset and partition leader epoch (bytes 0-7 and 12-15, outside the CRC), the epoch
// being Metadata's constant 0. Fetch sessions are not served: SessionID is always 0, a
// full answer every time (clients then stop asking); a session id the client believes
// in is FETCH_SESSION_ID_NOT_FOUND. Under read_committed (isolation level 1) a
// partition's answer stops at its last stable offset and carries the aborted
// transactions its batches may hold; the transaction markers come as control batches
// where their offsets fall.
func (s *Server) fetch(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if in.SessionID != 0 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil
	}
	pf := broker.PartitionsFetch{
		MaxBytes: int64(in.MaxBytes),
		MinBytes: int64(in.MinBytes),
		Wait:     time.Duration(max(in.MaxWaitMillis, 0)) * time.Millisecond,
	}
	if pf.MaxBytes < 0 {
		pf.MaxBytes = 0
	}
	iso := reader.ReadUncommitted
	if in.IsolationLevel == 1 {
		iso = reader.ReadCommitted
	}
	for _, t := range in.Topics {
		for _, p := range t.Partitions {
			pf.Partitions = append(pf.Partitions, broker.FetchRequest{
				Topic: t.Topic, Partition: p.Partition, Offset: p.FetchOffset, MaxBytes: int64(max(p.PartitionMaxBytes, 1)),
				Memory: r.mem, Isolation: iso, Markers: true,
			})
		}
	}
	got, err := s.deps.Core.FetchPartitions(ctx, r.who, pf)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		resp.ErrorCode, _ = s.kafkaError(err)
		return resp, nil
	}
	i := 0
	for _, t := range in.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			g := &got[i]
			i++
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.RecordBatches = p.Partition, []byte{}
			if g.Err != nil {
				rp.ErrorCode = s.code(g.Err)
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = g.HighWatermark, g.LastStableOffset, g.LogStartOffset
			if iso == reader.ReadCommitted {
				rp.AbortedTransactions = abortedTransactions(g.Aborted, g.NextOffset)
			}
			// The batches' copy and their place in the framed response are reserved
			// before they are made; without room the partition answers a retriable
			// error, and the client fetches it again.
			if n := batchesLen(g.Batches); !r.mem.TryReserve(2*n, membudget.UseKafka) {
				rp.ErrorCode = s.code(&broker.Error{Code: broker.CodeMemoryExhausted})
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rp.RecordBatches = kafkaBatches(g.Batches, g.BaseOffsets)
			r.sizeHint += len(rp.RecordBatches)
			r.release = append(r.release, rp.RecordBatches)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	resp.ThrottleMillis = throttleMillis(s.deps.Core.FetchThrottle(r.who, int64(r.sizeHint)))
	return resp, nil
}

// batchesLen is the bytes of batches back to back.
func batchesLen(batches [][]byte) int64 {
	var n int64
	for _, b := range batches {
		n += int64(len(b))
	}
	return n
}

// kafkaBatches copies stored batches (shared with the reader's cache: never written)
// back to back, each with its real base offset and partition leader epoch 0. No batches
// are empty bytes, never null: librdkafka refuses a null record set.
func kafkaBatches(batches [][]byte, bases []int64) []byte {
	n := 0
	for _, b := range batches {
		n += len(b)
	}
	out := getBuf(n)
	for i, b := range batches {
		start := len(out)
		out = segment.AppendServed(out, b, bases[i])
		// The leader epoch is the Kafka protocol's own: Metadata answers every
		// partition at epoch 0, and the batches say the same.
		segment.SetLeaderEpoch(out[start:], 0)
	}
	return out
}

// abortedTransactions lists the aborted transactions whose records an answer may hold
// (they began before next, the offset after its last batch), as Kafka clients want
// them: producer id and first offset. Empty, not null, under read_committed.
func abortedTransactions(aborted []catalog.AbortedTxn, next int64) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	out := []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	for _, a := range aborted {
		if a.FirstOffset >= next {
			continue
		}
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
		out = append(out, at)
	}
	return out
}
