package client

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// The producer chooses partitions on the client, so that every request names its
// records' partitions and a retry lands where the first attempt did. A key lands where
// the server (and a Kafka client) would put it: murmur2 of the key's stored bytes.

// murmur2 is Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), as the
// server's writer computes it.
func murmur2(data []byte) int32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	n := len(data)
	h := uint32(seed) ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// KeyPartition is the partition of a key's stored bytes among partitions, as Kafka's
// default partitioner computes it (the sign bit masked, not negated).
func KeyPartition(key []byte, partitions int32) int32 {
	return (murmur2(key) & 0x7fffffff) % partitions
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
