package connect

import (
	"encoding/json"
	"errors"
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
	c, err := h.connector(r)
	if err != nil {
		return err
	}
	out := offsetsBody{Offsets: []offsetEntry{}}
	if c.Type == catalog.ConnectorSink {
		offs, err := h.store.GroupOffsets(r.Context(), sinkGroup(c.Name))
		if err != nil && !errors.Is(err, catalog.ErrGroupNotFound) {
			return err
		}
		for _, o := range offs {
			out.Offsets = append(out.Offsets, offsetEntry{
				Partition: map[string]any{"kafka_topic": o.Topic, "kafka_partition": o.Partition},
				Offset:    map[string]any{"kafka_offset": o.Offset}})
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	offs, err := h.store.ConnectorOffsets(r.Context(), c.Name)
	if err != nil {
		return err
	}
	for _, o := range offs {
		d, err := decodeOffset(o)
		if err != nil {
			return fmt.Errorf("stored offset of %s: %w", c.Name, err)
		}
		out.Offsets = append(out.Offsets, offsetEntry{Partition: d.Partition, Offset: d.Offset})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *REST) stoppedConnector(r *http.Request) (catalog.Connector, error) {
	c, err := h.connector(r)
	if err == nil {
		err = catalog.CheckOffsetEdit(c)
	}
	return c, err
}

func (h *REST) alterOffsets(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Offsets []struct {
			Partition map[string]any  `json:"partition"`
			Offset    json.RawMessage `json:"offset"`
		} `json:"offsets"`
	}
	if err := readBody(r, &body); err != nil {
		return err
	}
	if len(body.Offsets) == 0 {
		return errorf(http.StatusBadRequest, "The offsets to be altered may not be null or empty")
	}
	c, err := h.stoppedConnector(r)
	if err != nil {
		return err
	}
	if c.Type == catalog.ConnectorSink {
		return h.alterSinkOffsets(w, r, c, body.Offsets)
	}
	edits := make([]catalog.SourceOffset, 0, len(body.Offsets))
	for _, e := range body.Offsets {
		if e.Partition == nil {
			return errorf(http.StatusBadRequest, "Source partitions may not be null")
		}
		p, err := encodeOffset(Offset{Partition: e.Partition, Offset: map[string]any{}})
		if err != nil {
			return errorf(http.StatusBadRequest, "%s", err.Error())
		}
		so := catalog.SourceOffset{Partition: p.Partition}
		if string(e.Offset) != "null" && len(e.Offset) > 0 {
			var off map[string]any
			if decodeJSON(string(e.Offset), &off) != nil || off == nil {
				return errorf(http.StatusBadRequest, "Source offset for partition %s must be a JSON object or null", p.Partition)
			}
			o, err := encodeOffset(Offset{Partition: e.Partition, Offset: off})
			if err != nil {
				return errorf(http.StatusBadRequest, "%s", err.Error())
			}
			so.Offset = o.Offset
		}
		edits = append(edits, so)
	}
	if err := h.store.AlterConnectorOffsets(r.Context(), c.Name, edits, false); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": msgAltered})
	return nil
}

// alterSinkOffsets sets the group's offsets; a null offset resets the partition to its
// log start (where a sink without a committed offset begins).
func (h *REST) alterSinkOffsets(w http.ResponseWriter, r *http.Request, c catalog.Connector, entries []struct {
	Partition map[string]any  `json:"partition"`
	Offset    json.RawMessage `json:"offset"`
}) error {
	offs := make([]catalog.CommitOffset, 0, len(entries))
	for _, e := range entries {
		topic, _ := e.Partition["kafka_topic"].(string)
		part, ok := e.Partition["kafka_partition"].(float64)
		if topic == "" || !ok || part < 0 || part != float64(int32(part)) {
			return errorf(http.StatusBadRequest, "Kafka partitions must be given as {\"kafka_topic\": TOPIC, \"kafka_partition\": N}")
		}
		o := catalog.CommitOffset{Topic: topic, Partition: int32(part)}
		if string(e.Offset) == "null" || len(e.Offset) == 0 {
			start, err := h.core.ListOffset(r.Context(), h.principal(r), topic, o.Partition, broker.Earliest)
			if err != nil {
				return errorf(http.StatusBadRequest, "%s/%d: %v", topic, o.Partition, err)
			}
			o.Offset = start
		} else {
			var off struct {
				KafkaOffset *int64 `json:"kafka_offset"`
			}
			if json.Unmarshal(e.Offset, &off) != nil || off.KafkaOffset == nil || *off.KafkaOffset < 0 {
				return errorf(http.StatusBadRequest, "Kafka offsets must be given as {\"kafka_offset\": N} with N ≥ 0, or null")
			}
			o.Offset = *off.KafkaOffset
		}
		offs = append(offs, o)
	}
	if err := h.store.ResetOffsets(r.Context(), sinkGroup(c.Name), offs); err != nil {
		return sinkOffsetsError(c, err)
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": msgAltered})
	return nil
}

func sinkOffsetsError(c catalog.Connector, err error) error {
	switch {
	case errors.Is(err, catalog.ErrGroupNotEmpty):
		return errorf(http.StatusConflict, "The group %s of sink connector %s still has live members (a stopped task's session has not ended yet): retry in a moment", sinkGroup(c.Name), c.Name)
	case errors.Is(err, catalog.ErrTopicNotFound), errors.Is(err, catalog.ErrPartitionOutOfRange), errors.Is(err, catalog.ErrInvalidOffset):
		return errorf(http.StatusBadRequest, "%s", err.Error())
	}
	return err
}

func (h *REST) resetOffsets(w http.ResponseWriter, r *http.Request) error {
	c, err := h.stoppedConnector(r)
	if err != nil {
		return err
	}
	if c.Type == catalog.ConnectorSink {
		if err := h.store.DeleteGroup(r.Context(), sinkGroup(c.Name)); err != nil && !errors.Is(err, catalog.ErrGroupNotFound) {
			return sinkOffsetsError(c, err)
		}
	} else if err := h.store.AlterConnectorOffsets(r.Context(), chi.URLParam(r, "name"), nil, true); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": msgReset})
	return nil
}
