// Package jepsen is Strata's reliability harness in the manner of Jepsen: a concurrent
// workload whose every operation is recorded in a history while faults are injected,
// and a checker that proves the log's promises from the history alone.
//
// The workload (workload.go) runs producers that write values unique across the run,
// plain or idempotent; consumers that read every partition by assignment; members of a
// consumer group; and, once every fault is healed, a final catch-up read of every
// partition. Each produce is recorded with its outcome — ok with its offset, failed
// (the server said definitely nothing was written) or unknown (a broken connection, a
// timeout, a 5xx that does not promise anything) — and each poll with the offsets and
// values it returned.
//
// The checker (checker.go) reports lost writes, inconsistent offsets, duplicates,
// nonmonotonic or skipping reads, records visible although their produce was refused,
// acknowledged records missing from the final read, and group-offset anomalies.
// Faults (nemesis.go, cluster.go) act on real processes, the object store and Postgres;
// the run (torture.go) ties them together and prints a summary table per fault.
package jepsen

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Outcome is what a client knows about an operation once it has returned.
type Outcome string

const (
	// OK: the server acknowledged the operation.
	OK Outcome = "ok"
	// Failed: the server answered that nothing was done (a 4xx, or a 503 whose code
	// promises nothing was written), or the request never left the client.
	Failed Outcome = "failed"
	// Unknown: the operation may or may not have taken effect.
	Unknown Outcome = "unknown"
	// Aborted: a transaction the client aborted (the abort was answered): none of
	// its records or offsets may ever be visible to a read_committed reader.
	Aborted Outcome = "aborted"
)

// Send is one record of one produce request.
type Send struct {
	Request    int64  `json:"request"` // records of one request share it
	Producer   string `json:"producer"`
	Idempotent bool   `json:"idempotent,omitempty"`
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Value      string `json:"value"` // unique across the run
	// Attempts is how many times the request was sent (idempotent producers resend an
	// unknown request byte for byte).
	Attempts int     `json:"attempts"`
	Outcome  Outcome `json:"outcome"`
	Offset   int64   `json:"offset"` // when OK
	Err      string  `json:"err,omitempty"`
	// Start and End bound the request, first attempt to last answer.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// ReadRecord is one record a poll returned.
type ReadRecord struct {
	Offset int64  `json:"offset"`
	Value  string `json:"value"`
}

// Read modes.
const (
	ReadAssign = "assign" // a consumer reading a partition by assignment
	ReadGroup  = "group"  // a batch handed to a consumer-group member
	ReadFinal  = "final"  // the final catch-up read after healing
)

// Read is one poll of one partition.
type Read struct {
	Consumer  string       `json:"consumer"`
	Mode      string       `json:"mode"`
	Group     string       `json:"group,omitempty"`
	Topic     string       `json:"topic"`
	Partition int32        `json:"partition"`
	From      int64        `json:"from"` // the offset asked for; -1 when unknown (group batches)
	Records   []ReadRecord `json:"records,omitempty"`
	Next      int64        `json:"next"` // the answer's next offset
	HWM       int64        `json:"hwm"`
	Err       string       `json:"err,omitempty"` // a failed poll returns no records
	At        time.Time    `json:"at"`
}

// GroupOffsets is one observation of a group's committed offsets.
type GroupOffsets struct {
	Group   string          `json:"group"`
	Topic   string          `json:"topic"`
	Offsets map[int32]int64 `json:"offsets"` // partition: committed (next) offset
	Final   bool            `json:"final,omitempty"`
	At      time.Time       `json:"at"`
}

// FinalState is what the final catch-up read established per partition.
type FinalState struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	LogStart  int64  `json:"log_start"`
	HWM       int64  `json:"hwm"`
	// Complete: every offset from the log start to the high watermark was read.
	Complete bool   `json:"complete"`
	Err      string `json:"err,omitempty"`
}

// TxnInput is a record a transaction consumed.
type TxnInput struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// TxnOutput is a record a transaction produced, to the output topic.
type TxnOutput struct {
	Partition int32  `json:"partition"`
	Value     string `json:"value"` // label|input partition|input offset|input value
}

// Txn is one consume-transform-produce transaction (txn.go): the records it consumed,
// the records it produced and committed the consumed offsets with, and how it ended —
// OK (committed), Aborted, or Unknown.
type Txn struct {
	Transactor string      `json:"transactor"`
	Label      string      `json:"label"` // unique across the run
	Inputs     []TxnInput  `json:"inputs"`
	Outputs    []TxnOutput `json:"outputs"`
	Outcome    Outcome     `json:"outcome"`
	Err        string      `json:"err,omitempty"`
	Start      time.Time   `json:"start"`
	End        time.Time   `json:"end"`
}

// Event is a fault starting or stopping, kept in the history for the reader's sake.
type Event struct {
	Fault string    `json:"fault"`
	What  string    `json:"what"` // "start", "stop", or what was done
	At    time.Time `json:"at"`
}

// History is everything a run recorded. Recorder fills it concurrently.
type History struct {
	Topic      string         `json:"topic"`
	Partitions int32          `json:"partitions"`
	Sends      []Send         `json:"sends"`
	Reads      []Read         `json:"reads"`
	Groups     []GroupOffsets `json:"groups"`
	Final      []FinalState   `json:"final"`
	// The transactional workload (txn.go): its output topic and group, its
	// transactions, the read_committed reads of the output topic (during the run, and
	// the final one: Mode ReadFinal) and the final read's state per partition.
	TxnTopic string       `json:"txn_topic,omitempty"`
	TxnGroup string       `json:"txn_group,omitempty"`
	Txns     []Txn        `json:"txns,omitempty"`
	TxnReads []Read       `json:"txn_reads,omitempty"`
	TxnFinal []FinalState `json:"txn_final,omitempty"`
	// The share-group workload (share.go): its group and delivery-count limit, every
	// delivery, and whether the final member drained the group.
	ShareGroup   string          `json:"share_group,omitempty"`
	ShareLimit   int             `json:"share_limit,omitempty"`
	Shares       []ShareDelivery `json:"shares,omitempty"`
	ShareDrained bool            `json:"share_drained,omitempty"`
	// The dead-letter topic and what the final read found in it.
	ShareDLQTopic string           `json:"share_dlq_topic,omitempty"`
	ShareDLQ      []ShareDLQRecord `json:"share_dlq,omitempty"`
	ShareDLQRead  bool             `json:"share_dlq_read,omitempty"`
	Events        []Event          `json:"events"`
	Start         time.Time        `json:"start"`
	End           time.Time        `json:"end"`

	mu       sync.Mutex
	requests int64
}

// NewHistory returns an empty history of a run on topic.
func NewHistory(topic string, partitions int32) *History {
	return &History{Topic: topic, Partitions: partitions, Start: time.Now()}
}

// NextRequest returns a fresh request number.
func (h *History) NextRequest() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests++
	return h.requests
}

// AddSends records the records of one request.
func (h *History) AddSends(s ...Send) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Sends = append(h.Sends, s...)
}

// AddRead records a poll.
func (h *History) AddRead(r Read) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Reads = append(h.Reads, r)
}

// AddGroupOffsets records an observation of a group's committed offsets.
func (h *History) AddGroupOffsets(g GroupOffsets) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Groups = append(h.Groups, g)
}

// AddFinal records the final read's state of a partition.
func (h *History) AddFinal(f FinalState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Final = append(h.Final, f)
}

// AddTxn records a transaction.
func (h *History) AddTxn(t Txn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Txns = append(h.Txns, t)
}

// AddTxnRead records a read of the transactional output topic.
func (h *History) AddTxnRead(r Read) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.TxnReads = append(h.TxnReads, r)
}

// AddTxnFinal records the final read's state of an output partition.
func (h *History) AddTxnFinal(f FinalState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.TxnFinal = append(h.TxnFinal, f)
}

// AddEvent records a fault event.
func (h *History) AddEvent(fault, what string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Events = append(h.Events, Event{Fault: fault, What: what, At: time.Now()})
}

// WriteJSON writes the history as one JSON document, for a post-mortem.
func (h *History) WriteJSON(w io.Writer) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(h)
}

// ReadHistory reads a history written by WriteJSON, to check it again.
func ReadHistory(r io.Reader) (*History, error) {
	h := &History{}
	if err := json.NewDecoder(r).Decode(h); err != nil {
		return nil, fmt.Errorf("jepsen: read history: %w", err)
	}
	return h, nil
}
