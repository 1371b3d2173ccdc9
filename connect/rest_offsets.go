package connect

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// Offsets (KIP-875). A source connector's offsets are its source offsets in the catalog;
// editing them (only while STOPPED) is one transaction that also gives every task a new
// generation, so no instance of the connector can commit over the edit. A sink
// connector's offsets are its group's (connect-<name>): they are edited only while the
// group has no live members (the group's own check), which fences every sink instance.

const (
	msgAltered = "The Connect framework-managed offsets for this connector have been altered successfully. However, if this connector manages offsets externally, they will need to be manually altered in the system that the connector uses."
	msgReset   = "The Connect framework-managed offsets for this connector have been reset successfully. However, if this connector manages offsets externally, they will need to be manually reset in the system that the connector uses."
)

type offsetEntry struct {
	Partition map[string]any `json:"partition"`
	Offset    map[string]any `json:"offset"`
}

type offsetsBody struct {
	Offsets []offsetEntry `json:"offsets"`
}

func (h *REST) getOffsets(w http.ResponseWriter, r *http.Request) error {
	name := chi.URLParam(r, "name")
	offs, err := h.core.ConnectorOffsets(r.Context(), h.principal(r), name)
	if err != nil {
		return err
	}
	out := offsetsBody{Offsets: []offsetEntry{}}
	for _, o := range offs.Sink {
		out.Offsets = append(out.Offsets, offsetEntry{
			Partition: map[string]any{"kafka_topic": o.Topic, "kafka_partition": o.Partition},
			Offset:    map[string]any{"kafka_offset": o.Offset}})
	}
	for _, o := range offs.Source {
		d, err := decodeOffset(o)
		if err != nil {
			return fmt.Errorf("stored offset of %s: %w", name, err)
		}
		out.Offsets = append(out.Offsets, offsetEntry{Partition: d.Partition, Offset: d.Offset})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// offsetEdit is one entry of a PATCH body.
type offsetEdit struct {
	Partition map[string]any  `json:"partition"`
	Offset    json.RawMessage `json:"offset"`
}

func (h *REST) alterOffsets(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Offsets []offsetEdit `json:"offsets"`
	}
	if err := readBody(r, &body); err != nil {
		return err
	}
	// The body's shape is the connector type's, which the core knows once the caller
	// may edit it.
	decode := func(typ string) (broker.OffsetsEdit, error) {
		if len(body.Offsets) == 0 {
			return broker.OffsetsEdit{}, badRequest("The offsets to be altered may not be null or empty")
		}
		if typ == catalog.ConnectorSink {
			return sinkEdit(body.Offsets)
		}
		return sourceEdit(body.Offsets)
	}
	if err := h.core.AlterConnectorOffsets(r.Context(), h.principal(r), chi.URLParam(r, "name"), decode); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": msgAltered})
	return nil
}

func badRequest(format string, args ...any) *broker.Error {
	return &broker.Error{Code: broker.CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

// sourceEdit reads a source connector's entries: a null offset removes the partition's.
func sourceEdit(entries []offsetEdit) (broker.OffsetsEdit, error) {
	edits := make([]catalog.SourceOffset, 0, len(entries))
	for _, e := range entries {
		if e.Partition == nil {
			return broker.OffsetsEdit{}, badRequest("Source partitions may not be null")
		}
		p, err := encodeOffset(Offset{Partition: e.Partition, Offset: map[string]any{}})
		if err != nil {
			return broker.OffsetsEdit{}, badRequest("%s", err.Error())
		}
		so := catalog.SourceOffset{Partition: p.Partition}
		if string(e.Offset) != "null" && len(e.Offset) > 0 {
			var off map[string]any
			if decodeJSON(string(e.Offset), &off) != nil || off == nil {
				return broker.OffsetsEdit{}, badRequest("Source offset for partition %s must be a JSON object or null", p.Partition)
			}
			o, err := encodeOffset(Offset{Partition: e.Partition, Offset: off})
			if err != nil {
				return broker.OffsetsEdit{}, badRequest("%s", err.Error())
			}
			so.Offset = o.Offset
		}
		edits = append(edits, so)
	}
	return broker.OffsetsEdit{Source: edits}, nil
}

// sinkEdit reads a sink connector's entries; a null offset is the partition's log start
// (where a sink without a committed offset begins).
func sinkEdit(entries []offsetEdit) (broker.OffsetsEdit, error) {
	offs := make([]broker.SinkOffset, 0, len(entries))
	for _, e := range entries {
		topic, _ := e.Partition["kafka_topic"].(string)
		part, ok := e.Partition["kafka_partition"].(float64)
		if topic == "" || !ok || part < 0 || part != float64(int32(part)) {
			return broker.OffsetsEdit{}, badRequest("Kafka partitions must be given as {\"kafka_topic\": TOPIC, \"kafka_partition\": N}")
		}
		o := broker.SinkOffset{Topic: topic, Partition: int32(part), Offset: -1}
		if string(e.Offset) != "null" && len(e.Offset) > 0 {
			var off struct {
				KafkaOffset *int64 `json:"kafka_offset"`
			}
			if json.Unmarshal(e.Offset, &off) != nil || off.KafkaOffset == nil || *off.KafkaOffset < 0 {
				return broker.OffsetsEdit{}, badRequest("Kafka offsets must be given as {\"kafka_offset\": N} with N ≥ 0, or null")
			}
			o.Offset = *off.KafkaOffset
		}
		offs = append(offs, o)
	}
	return broker.OffsetsEdit{Sink: offs}, nil
}

func (h *REST) resetOffsets(w http.ResponseWriter, r *http.Request) error {
	if err := h.core.ResetConnectorOffsets(r.Context(), h.principal(r), chi.URLParam(r, "name")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": msgReset})
	return nil
}
