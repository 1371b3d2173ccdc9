// Package murmur2 is Kafka's default partitioner for keyed records, reproduced bit for
// bit so that a key lands where a Kafka client would put it, whichever side chooses:
// the writer (a record without a partition) and the Go client (which names every
// record's partition, so that a retry lands where the first attempt did). A leaf
// package with no dependencies, so that client/ — a library for applications — shares
// it without importing any part of the server.
package murmur2

// Hash is Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2): 32-bit
// MurmurHash2 with Kafka's seed, returning the Java int Kafka computes.
func Hash(data []byte) int32 {
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

// Partition is Kafka's DefaultPartitioner/BuiltInPartitioner for a keyed record:
// toPositive(murmur2(key)) % partitions. toPositive masks the sign bit rather than
// taking the absolute value, so that math.MinInt32 maps to 0 as in Kafka. A nil key is
// not hashed by the callers (sticky partitioning instead); an empty, non-nil key is, as
// Kafka does.
func Partition(key []byte, partitions int32) int32 {
	return (Hash(key) & 0x7fffffff) % partitions
}
