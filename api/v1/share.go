package v1

import "encoding/json"

// Share groups (queues on the log, KIP-932): any number of members acquire records of
// the same partitions, each record held by one member under a time-limited lock until
// it is acknowledged — accepted, released for redelivery, or rejected.

// ShareRecordsRequest is POST /v1/share-groups/{group}/records: acquire records.
type ShareRecordsRequest struct {
	// MemberID is the id a first acquisition answered; omitted joins the group under a
	// new one. Every acquisition keeps the member in the group (its session restarts).
	MemberID string `json:"member_id,omitempty"`
	// Topics is the subscription: records are acquired from every partition of each.
	Topics []string `json:"topics"`
	// MaxRecords bounds the records acquired (1 to 10000; omitted: 500).
	MaxRecords int `json:"max_records,omitempty"`
	// WaitMs is how long to wait for records when none are available (a long-poll).
	WaitMs int64 `json:"wait_ms,omitempty"`
}

// ShareRecordsResponse answers an acquisition.
type ShareRecordsResponse struct {
	// MemberID is the member's id: send it with every later call.
	MemberID string `json:"member_id"`
	// LockDurationMs is how long the records are held unless acknowledged or renewed.
	LockDurationMs int64 `json:"lock_duration_ms"`
	// Partitions holds one entry per partition records were acquired from (none: the
	// wait ended without any).
	Partitions []ShareAcquisition `json:"partitions"`
}

// ShareAcquisition is the records acquired from one partition, and the id to
// acknowledge them by.
type ShareAcquisition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// AcquisitionID names this acquisition in acknowledgements. Once the records'
	// lock passed or they were delivered again, it is refused (acquisition_not_held),
	// even from the same member.
	AcquisitionID string `json:"acquisition_id"`
	// LockDeadline is when the records return to the group (unix milliseconds).
	LockDeadline Timestamp     `json:"lock_deadline"`
	Records      []ShareRecord `json:"records"`
}

// ShareRecord is an acquired record: a Record and its delivery count.
type ShareRecord struct {
	Offset        int64           `json:"offset"`
	Timestamp     Timestamp       `json:"timestamp"`
	Key           json.RawMessage `json:"key"`
	KeyEncoding   string          `json:"key_encoding,omitempty"`
	Value         json.RawMessage `json:"value"`
	ValueEncoding string          `json:"value_encoding,omitempty"`
	Headers       Headers         `json:"headers"`
	// DeliveryCount is 1 on the first delivery, one more on each redelivery.
	DeliveryCount int `json:"delivery_count"`
}

// Acknowledgement types.
const (
	AckAccept  = "accept"
	AckRelease = "release"
	AckReject  = "reject"
	AckRenew   = "renew"
)

// ShareAckRequest is POST /v1/share-groups/{group}/acks: acknowledge acquired records,
// all or nothing.
type ShareAckRequest struct {
	MemberID string     `json:"member_id"`
	Acks     []ShareAck `json:"acks"`
}

// ShareAck acknowledges records of one acquisition.
type ShareAck struct {
	AcquisitionID string          `json:"acquisition_id"`
	Ranges        []ShareAckRange `json:"ranges"`
}

// ShareAckRange acknowledges offsets first to last (omitted: just first) with one type:
// accept (done), release (deliver again), reject (archive: never delivered again) or
// renew (hold the lock for another lock duration).
type ShareAckRange struct {
	First *int64 `json:"first"`
	Last  *int64 `json:"last,omitempty"`
	Type  string `json:"type"`
}

// ShareGroupList answers GET /v1/share-groups: the share groups the caller may
// describe, by name.
type ShareGroupList struct {
	ShareGroups []ShareGroupSummary `json:"share_groups"`
}

// ShareGroupSummary is a share group in the list: empty or stable (live members).
type ShareGroupSummary struct {
	Name    string `json:"name"`
	State   string `json:"state"`
	Members int    `json:"members"`
}

// ShareGroup is GET /v1/share-groups/{group}.
type ShareGroup struct {
	Name       string             `json:"name"`
	Epoch      int32              `json:"epoch"`
	Members    []ShareGroupMember `json:"members"`
	Partitions []SharePartition   `json:"partitions"`
	// DeadLettered is the running total of the group's records copied to its
	// dead-letter topic.
	DeadLettered int64 `json:"dead_lettered"`
	// Configs are the group's configs with their defaults, when the caller may
	// describe them (describe-configs on the group).
	Configs map[string]string `json:"configs,omitempty"`
}

// ShareGroupMember is a live member and its subscription.
type ShareGroupMember struct {
	MemberID    string   `json:"member_id"`
	MemberEpoch int32    `json:"member_epoch"`
	Topics      []string `json:"topics"`
}

// SharePartition is a share-partition's state: everything below StartOffset is done;
// the in-flight records from there are counted by state; Lag is what is not done yet.
type SharePartition struct {
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	StartOffset  int64  `json:"start_offset"`
	Lag          int64  `json:"lag"`
	Available    int64  `json:"available"`
	Acquired     int64  `json:"acquired"`
	Acknowledged int64  `json:"acknowledged"`
	Archived     int64  `json:"archived"`
	// DeadLetterPending counts records archived but not yet copied to the group's
	// dead-letter topic.
	DeadLetterPending int64 `json:"dead_letter_pending"`
}

// ShareGroupConfigs is PUT /v1/share-groups/{group} (the configs to set, replacing
// those set before) and its answer (every config, defaults included).
type ShareGroupConfigs struct {
	Configs map[string]string `json:"configs"`
}
