package kafka

import (
	"crypto/sha256"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/catalog"
)

// Kafka keeps committed offsets in an internal topic, __consumer_offsets, which every
// cluster that has served a group lists in Metadata. Strata keeps them in the catalog,
// so the topic has no records. It is listed (internal, one partition) for the clients and
// tools that look for it — franz-go's regex consumers skip internal topics by that flag —
// without existing; it is made, empty, only when a KIP-848 member's subscription pattern
// names it (Kafka's coordinator assigns internal topics a pattern matches, and the member
// then fetches from it). A topic of that name is always listed as internal.
const offsetsTopic = "__consumer_offsets"

// offsetsTopicID is its topic id: fixed, so that every node answers the same.
var offsetsTopicID = func() catalog.UUID {
	sum := sha256.Sum256([]byte("strata:" + offsetsTopic))
	var u catalog.UUID
	copy(u[:], sum[:16])
	u[6], u[8] = u[6]&0x0f|0x50, u[8]&0x3f|0x80 // a name-based (v5-like) UUID
	return u
}()

func offsetsTopicMetadata(m *membership) kmsg.MetadataResponseTopic {
	rt := topicMetadata(m, catalog.Topic{Name: offsetsTopic, UUID: offsetsTopicID, Partitions: 1})
	rt.IsInternal = true
	return rt
}
