package catalog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Share groups (KIP-932, docs/design.md "Share groups"): queues on the log. Any number
// of members read the same partitions; each record is acquired under a time-limited
// lock and acknowledged on its own. Per share-partition the catalog keeps a start
// offset (everything below it is done) and the in-flight records as offset ranges with
// their state. The rules are the engine's (catalog/internal/engine/share*.go), each call
// one catalog transaction; the broker core authorizes and decides what a front end may
// ask.

// ShareGroups is the share groups' part of the catalog, implemented by both backends
// and proved by catalogtest.RunShareGroups.
type ShareGroups interface {
	// ShareHeartbeat joins (MemberEpoch 0), keeps (its epoch) or leaves (-1) a member.
	// Joining creates the group; a group id that is a consumer group's is
	// ErrGroupTypeMismatch. A member not in the group (or whose session expired) is
	// ErrUnknownMember; a member that leaves has its acquired records released.
	ShareHeartbeat(ctx context.Context, hb ShareHeartbeat) (ShareMember, error)
	// ShareAcquire acquires, for the member, up to MaxRecords available records of the
	// partitions, in one catalog transaction that writes nothing when it finds nothing.
	// The member must be in the group (ErrUnknownMember).
	ShareAcquire(ctx context.Context, req ShareAcquire) (ShareAcquireResult, error)
	// ShareAcknowledge applies acknowledgements in one catalog transaction. Each
	// partition is all or nothing: its answer is nil or the reason nothing of it
	// changed (ErrShareRecordState, ErrShareAckOutOfRange, ErrInvalidShareAck).
	ShareAcknowledge(ctx context.Context, req ShareAck) ([]error, error)
	// DescribeShareGroup describes a share group: ErrGroupNotFound when there is none.
	DescribeShareGroup(ctx context.Context, group string) (ShareGroupDescription, error)
	// ListShareGroups lists the share groups by name.
	ListShareGroups(ctx context.Context) ([]string, error)
	// DeleteShareGroup deletes a share group with its share-partition state:
	// ErrGroupNotEmpty while it has live members, ErrGroupNotFound when there is none.
	DeleteShareGroup(ctx context.Context, group string) error
	// ShareOffsets lists a share group's share-partitions (live topics only).
	ShareOffsets(ctx context.Context, group string) ([]ShareOffset, error)
	// AlterShareOffsets sets start offsets (dropping what was in flight), creating the
	// group when there is none: ErrGroupNotEmpty while it has live members.
	AlterShareOffsets(ctx context.Context, group string, offsets []ShareOffset) error
	// DeleteShareOffsets drops the share-partition state of topics (by id):
	// ErrGroupNotEmpty while the group has live members.
	DeleteShareOffsets(ctx context.Context, group string, topicIDs []int64) error
	// IsShareGroup answers whether group is a share group.
	IsShareGroup(ctx context.Context, group string) (bool, error)
	// GroupConfigs answers the configs set on a group id (a group need not exist).
	GroupConfigs(ctx context.Context, group string) (map[string]string, error)
	// SetGroupConfigs replaces a group id's configs, validated by
	// ValidateShareGroupConfigs (ErrInvalidConfig).
	SetGroupConfigs(ctx context.Context, group string, configs map[string]string) error
	ShareDLQ
}

var (
	// ErrGroupTypeMismatch: the group id is a consumer group's, asked for as a share
	// group (or the reverse).
	ErrGroupTypeMismatch = errors.New("group id belongs to a group of another type")
	// ErrShareRecordState: an acknowledgement names a record the member does not hold
	// now (never acquired, held by another member, its lock expired, already
	// acknowledged).
	ErrShareRecordState = errors.New("record is not acquired by this member")
	// ErrShareAckOutOfRange: an acknowledgement names offsets past what was ever
	// acquired.
	ErrShareAckOutOfRange = errors.New("acknowledged offsets were never acquired")
	// ErrInvalidShareAck: an acknowledgement is malformed (ranges out of order, types
	// unknown or not one per offset).
	ErrInvalidShareAck = errors.New("invalid acknowledgement")
	// ErrShareAcquisitionStale: an acknowledgement that names its acquisition (an
	// AckBatch with a DeliveryCount, as HTTP's acquisition ids carry) finds the records
	// no longer held under it: the lock expired, they were delivered again (even to
	// the same member), or they were acknowledged already.
	ErrShareAcquisitionStale = errors.New("the acquisition no longer holds the records")
)

// Share-group defaults (Kafka's).
const (
	DefaultShareLockDuration  = 30 * time.Second // share.record.lock.duration.ms
	DefaultShareDeliveryLimit = 5                // share.delivery.count.limit
	DefaultShareMaxLocks      = 2000             // group.share.partition.max.record.locks
	DefaultShareSession       = 45 * time.Second // group.share.session.timeout.ms
)

// ShareTP names a partition by topic name.
type ShareTP struct {
	Topic     string
	Partition int32
}

// ShareHeartbeat is a share member's heartbeat.
type ShareHeartbeat struct {
	Group    string
	MemberID string
	// MemberEpoch: JoinEpoch (0) joins, LeaveEpoch (-1) leaves, else the member's.
	MemberEpoch int32
	// Topics is the subscription (nil: unchanged).
	Topics         []string
	SessionTimeout time.Duration // 0: DefaultShareSession
}

// ShareMember is a member as the catalog keeps it.
type ShareMember struct {
	ID     string
	Epoch  int32
	Topics []string
}

// ShareAcquire asks for records.
type ShareAcquire struct {
	Group      string
	MemberID   string
	Partitions []ShareTP // by topic name; sorted by the engine
	MaxRecords int       // across the partitions, > 0
	// MaxLocks bounds each share-partition's in-flight records
	// (group.share.partition.max.record.locks; 0: DefaultShareMaxLocks).
	MaxLocks int
	// Overrides of the group's configs (read in the same transaction) for tests and
	// tools: 0 and false take the group's.
	LockDuration  time.Duration
	DeliveryLimit int
	ResetEarliest bool
}

// ShareAcquireResult answers ShareAcquire: every partition asked for that exists, and
// the lock duration the acquisition took.
type ShareAcquireResult struct {
	Partitions   []ShareAcquired
	LockDuration time.Duration
	// ReadCommitted: the group reads committed records only
	// (share.isolation.level=read_committed). Acquisitions stop at the last stable
	// offset, but records of aborted transactions below it are acquired like the
	// others: the reader of the records answers their offsets as gaps.
	ReadCommitted bool
}

// ShareAcquired is one partition's acquisition: its ranges, in offset order (none when
// nothing was available), and Next, the first offset never acquired (a long-poll waits
// for records there).
type ShareAcquired struct {
	ShareTP
	Ranges []AcquiredRange
	Next   int64
}

// AcquiredRange is a run of acquired offsets delivered for the same time.
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int16
	Deadline      time.Time
}

// Acknowledgement types (Kafka's numbers).
const (
	AckGap     int8 = 0
	AckAccept  int8 = 1
	AckRelease int8 = 2
	AckReject  int8 = 3
	AckRenew   int8 = 4
)

// ShareAck is a member's acknowledgements.
type ShareAck struct {
	Group      string
	MemberID   string
	Partitions []ShareAckPartition
	// Overrides of the group's configs (0: the group's): the lock a renewal sets, the
	// limit a release meets.
	LockDuration  time.Duration
	DeliveryLimit int
	// AllOrNothing applies the acknowledgements only if every partition's is accepted:
	// otherwise nothing changes and the answers say which were refused (HTTP's, one
	// request one outcome).
	AllOrNothing bool
	// Requeue makes AckRelease give back the delivery its acquisition counted: the
	// records return to available at the count they had before, never archived (the
	// push role's calls that got no answer, which did not reach a handler's
	// decision). Kafka's and HTTP members' releases never set it.
	Requeue bool
}

// ShareAckPartition acknowledges ranges of one partition.
type ShareAckPartition struct {
	ShareTP
	Batches []AckBatch
}

// AckBatch is one acknowledgement batch: Types holds one type for the whole range,
// or one per offset.
type AckBatch struct {
	First, Last int64
	Types       []int8
	// DeliveryCount, when not 0, names the acquisition acknowledged: every offset must
	// still be held by the member at this delivery count (each acquisition of a record
	// counts one more), else ErrShareAcquisitionStale. 0: whatever the member holds
	// now (Kafka's rule).
	DeliveryCount int16
	// Rejection, when not nil, is why the batch's rejected records were rejected (a
	// push target's answer): kept with them while they are pending dead-lettering and
	// written in their copies' headers. Ignored without a dead-letter topic.
	Rejection *ShareRejection
}

// ShareOffset is a share-partition's start offset.
type ShareOffset struct {
	ShareTP
	TopicID     int64
	StartOffset int64
	// Lag is what is not yet done: the high watermark less the start offset, less the
	// records done past it (ShareOffsets only).
	Lag int64
}

// ShareGroupDescription describes a share group.
type ShareGroupDescription struct {
	Name       string
	Epoch      int32
	Members    []ShareMember
	Partitions []SharePartitionState
	// DeadLettered is the running total of the group's records copied to its
	// dead-letter topic (added to by each copy's commit); kept for the group id when the
	// group is deleted.
	DeadLettered int64
}

// SharePartitionState counts a share-partition's in-flight records by state.
type SharePartitionState struct {
	ShareTP
	StartOffset                                 int64
	Available, Acquired, Acknowledged, Archived int64
	// DeadLetterPending counts records archived but not yet copied to the group's
	// dead-letter topic.
	DeadLetterPending int64
}

// Share group configs (Kafka's names) and their validation.
const (
	ShareAutoOffsetReset = "share.auto.offset.reset"
	ShareLockDurationMs  = "share.record.lock.duration.ms"
	ShareDeliveryLimit   = "share.delivery.count.limit"
	ShareIsolationLevel  = "share.isolation.level"
)

// ShareGroupConfigNames lists the group configs a share group takes, with their defaults.
var ShareGroupConfigNames = map[string]string{
	ShareAutoOffsetReset: "latest",
	ShareLockDurationMs:  "30000",
	ShareDeliveryLimit:   "5",
	ShareIsolationLevel:  "read_uncommitted",
	ShareDLQTopic:        "",
}

// ValidateShareGroupConfigs checks group configs: known names and values in range.
func ValidateShareGroupConfigs(configs map[string]string) error {
	for k, v := range configs {
		bad := func(why string) error {
			return fmt.Errorf("%w: %s=%q: %s", ErrInvalidConfig, k, v, why)
		}
		switch k {
		case ShareAutoOffsetReset:
			if v != "latest" && v != "earliest" {
				d, ok := strings.CutPrefix(v, "by_duration:")
				if !ok {
					return bad("want latest, earliest or by_duration:<ISO-8601 duration>")
				}
				if _, err := ParseISODuration(d); err != nil {
					return bad(err.Error())
				}
			}
		case ShareLockDurationMs:
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1000 || n > 3_600_000 {
				return bad("want milliseconds from 1000 to 3600000")
			}
		case ShareDeliveryLimit:
			n, err := strconv.Atoi(v)
			if err != nil || n < 2 || n > 10 {
				return bad("want 2 to 10")
			}
		case ShareIsolationLevel:
			if v != "read_uncommitted" && v != "read_committed" {
				return bad("want read_uncommitted or read_committed")
			}
		case ShareDLQTopic:
			// The node's prefix and the topic's opt-in are the broker core's checks.
			if v != "" {
				if err := ValidateTopicName(v); err != nil {
					return bad(err.Error())
				}
			}
		default:
			return fmt.Errorf("%w: unknown group config %q", ErrInvalidConfig, k)
		}
	}
	return nil
}

// ShareSettings are a share group's configs as the rules use them.
type ShareSettings struct {
	LockDuration  time.Duration
	DeliveryLimit int
	ResetEarliest bool
	// ResetBefore, when not 0, starts a new share-partition at the first record at
	// most this old (share.auto.offset.reset=by_duration:…, Kafka's rule).
	ResetBefore   time.Duration
	ReadCommitted bool
	// DLQTopic is the dead-letter topic's name ("": none).
	DLQTopic string
}

// ParseShareSettings reads group configs (validated ones; a value it cannot read takes
// the default).
func ParseShareSettings(configs map[string]string) ShareSettings {
	s := ShareSettings{LockDuration: DefaultShareLockDuration, DeliveryLimit: DefaultShareDeliveryLimit}
	if n, err := strconv.ParseInt(configs[ShareLockDurationMs], 10, 64); err == nil && n > 0 {
		s.LockDuration = time.Duration(n) * time.Millisecond
	}
	if n, err := strconv.Atoi(configs[ShareDeliveryLimit]); err == nil && n > 0 {
		s.DeliveryLimit = n
	}
	r := configs[ShareAutoOffsetReset]
	s.ResetEarliest = r == "earliest"
	if d, ok := strings.CutPrefix(r, "by_duration:"); ok {
		s.ResetBefore, _ = ParseISODuration(d)
	}
	s.ReadCommitted = configs[ShareIsolationLevel] == "read_committed"
	s.DLQTopic = configs[ShareDLQTopic]
	return s
}

// ParseISODuration reads an ISO-8601 duration as Java's Duration.parse does (Kafka's
// share.auto.offset.reset=by_duration:…): P, then days, then T and hours, minutes and
// seconds (decimal), each optional but at least one: P1D, PT1H30M, P2DT0.5S. It must
// be positive.
func ParseISODuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("duration %q: want ISO-8601, as PT1H, P1D or P1DT12H30M", s)
	rest, ok := strings.CutPrefix(strings.ToUpper(s), "P")
	if !ok || rest == "" {
		return 0, bad
	}
	var total time.Duration
	inTime, units, last := false, 0, -1
	for rest != "" {
		if rest[0] == 'T' {
			if inTime || len(rest) == 1 {
				return 0, bad
			}
			inTime, rest = true, rest[1:]
			continue
		}
		i := strings.IndexAny(rest, "DHMS")
		if i <= 0 {
			return 0, bad
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil || n < 0 || (rest[i] != 'S' && strings.Contains(rest[:i], ".")) {
			return 0, bad
		}
		if o := strings.IndexByte("DHMS", rest[i]); o <= last {
			return 0, bad // each unit once, in order
		} else {
			last = o
		}
		var unit time.Duration
		switch {
		case rest[i] == 'D' && !inTime:
			unit = 24 * time.Hour
		case rest[i] == 'H' && inTime:
			unit = time.Hour
		case rest[i] == 'M' && inTime:
			unit = time.Minute
		case rest[i] == 'S' && inTime:
			unit = time.Second
		default:
			return 0, bad
		}
		if n*float64(unit) > float64(1<<62) {
			return 0, bad
		}
		total += time.Duration(n * float64(unit))
		rest, units = rest[i+1:], units+1
	}
	if units == 0 || total <= 0 {
		return 0, bad
	}
	return total, nil
}
