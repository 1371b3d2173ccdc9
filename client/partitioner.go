package client

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/strata-io/strata/internal/murmur2"
)

// The producer chooses partitions on the client, so that every request names its
// records' partitions and a retry lands where the first attempt did. A key lands where
// the server (and a Kafka client) would put it: murmur2 of the key's stored bytes.

// KeyPartition is the partition of a key's stored bytes among partitions, as Kafka's
// default partitioner computes it (the sign bit masked, not negated).
func KeyPartition(key []byte, partitions int32) int32 {
	return murmur2.Partition(key, partitions)
}

// storedKey returns the bytes the server stores for key (a JSON value as Record.Key
// holds it) under the topic's key.format: what it hashes. The JSON is first rendered
// as the request body carries it (encoding/json compacts and escapes it).
func storedKey(key json.RawMessage, format string) ([]byte, error) {
	b, err := json.Marshal(key)
	if err != nil {
		return nil, fmt.Errorf("key is not valid JSON: %w", err)
	}
	switch format {
	case "json":
		return b, nil
	case "binary":
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("key.format is binary: the key must be a base64 JSON string")
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("key.format is binary: %w", err)
		}
		return raw, nil
	default: // "string", the default
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("key.format is %s: the key must be a JSON string", format)
		}
		return []byte(s), nil
	}
}
