package segment

import "encoding/binary"

// SetLeaderEpoch rewrites a raw batch's partition leader epoch in place (not covered by
// the CRC). It panics if batch is shorter than 16 bytes: callers pass batches
// SplitBatches checked.
func SetLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[offLeaderEpoch:], uint32(epoch))
}

// ResetLeaderEpochs sets the partition leader epoch of every batch of data (back to
// back, as a produce request carries them) to -1, the value Strata stores. Kafka
// clients fill it as they please (franz-go -1, librdkafka and Sarama 0); the broker owns
// it, and the CRC does not cover it. It stops at the first batch whose framing is
// wrong, leaving the refusal to the validation that follows.
func ResetLeaderEpochs(data []byte) {
	for pos := 0; pos < len(data); {
		end, err := batchEnd(data, pos)
		if err != nil {
			return
		}
		SetLeaderEpoch(data[pos:end], -1)
		pos = end
	}
}
