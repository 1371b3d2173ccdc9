package kafka

import (
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/broker"
)

// Every code the core answers with has a Kafka code, and a retriable one maps to a
// Kafka code clients retry.
func TestEveryCoreCodeMapped(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	for _, c := range broker.Codes() {
		ke, ok := kafkaCodes[c]
		if !ok {
			t.Errorf("core code %s has no Kafka code", c)
			continue
		}
		if code, msg := s.kafkaError(&broker.Error{Code: c, Message: "m"}); code != ke.Code || msg == nil || *msg != "m" {
			t.Errorf("%s: %d %v", c, code, msg)
		}
		// (The other way round Kafka is looser: it calls CORRUPT_MESSAGE and
		// UNKNOWN_TOPIC_OR_PARTITION retriable, and clients deal with that.)
		if c.Retriable() && !ke.Retriable {
			t.Errorf("%s is retriable, but maps to %s, which clients do not retry", c, ke.Message)
		}
	}
	if code, _ := s.kafkaError(&broker.Error{Code: broker.CodeInvalidRecord, Details: map[string]any{"field": "key"}}); code != kerr.InvalidRecord.Code {
		t.Errorf("a missing key: %d, want INVALID_RECORD", code)
	}
	if code, _ := s.kafkaError(errString("not the core's")); code != kerr.UnknownServerError.Code {
		t.Errorf("a foreign error: %d, want UNKNOWN_SERVER_ERROR", code)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
