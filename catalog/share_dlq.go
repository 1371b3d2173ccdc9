package catalog

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"
)

// Dead-letter topics for share groups (KIP-1191, docs/design.md "Share groups"). A
// record rejected, or found over share.delivery.count.limit, is archived; when its
// group names a dead-letter topic (errors.deadletterqueue.topic.name) it is first
// marked pending in its share-partition's in-flight ranges, and a leased mover copies
// it to that topic: the copy's flush commits the pending→archived transition in its own
// catalog transaction (Request.ShareDLQ), so a copy is never lost and never made twice.

// Dead-letter configs (Kafka's names).
const (
	// ShareDLQTopic is the group config naming the dead-letter topic.
	ShareDLQTopic = "errors.deadletterqueue.topic.name"
	// TopicDLQGroupEnable is the topic config by which a topic opts in to being a
	// share group's dead-letter topic.
	TopicDLQGroupEnable = "errors.deadletterqueue.group.enable"
	// DefaultShareDLQPrefix is the prefix a dead-letter topic's name must start with
	// (errors.deadletterqueue.topic.name.prefix; a node's --share-dlq-prefix).
	DefaultShareDLQPrefix = "dlq."
)

// Why a record was dead-lettered (the reason header).
const (
	ShareDLQRejected      = "rejected"
	ShareDLQDeliveryLimit = "delivery_limit"
)

var (
	// ErrShareDLQFenced: a dead-letter commit names a lease that is no longer the
	// group's (another mover took it over).
	ErrShareDLQFenced = errors.New("the dead-letter lease was taken over")
	// ErrShareDLQNotPending: a dead-letter commit names records that are not (or no
	// longer) pending dead-lettering: another mover copied them, or they were never.
	ErrShareDLQNotPending = errors.New("records are not pending dead-lettering")
)

// ShareDLQ is the dead-letter part of ShareGroups, implemented by both backends and
// proved by catalogtest.RunShareGroups.
type ShareDLQ interface {
	// ShareDLQPending lists share-partitions with records pending dead-lettering, at
	// most max of them (0: all), with their group's dead-letter topic ("" when the
	// group no longer names one).
	ShareDLQPending(ctx context.Context, max int) ([]ShareDLQWork, error)
	// AcquireShareDLQLease leases a group's dead-lettering to holder for ttl, timed by
	// the database clock: when no one holds it, its lease expired, or holder holds it
	// already (then it is extended, its token unchanged). A new holder gets a greater
	// token. ok is false when another holds it.
	AcquireShareDLQLease(ctx context.Context, group, holder string, ttl time.Duration) (l ShareDLQLease, ok bool, err error)
	// ReleaseShareDLQLease frees l if it is still l.
	ReleaseShareDLQLease(ctx context.Context, l ShareDLQLease) error
	// ArchiveShareDLQ archives pending records without copies, under the same checks
	// as a copy's commit (ErrShareDLQFenced, ErrShareDLQNotPending): for a group that
	// no longer names a dead-letter topic, or offsets that hold no record to copy.
	ArchiveShareDLQ(ctx context.Context, c ShareDLQCommit) error
}

// ShareDLQLease is a mover's claim on dead-lettering a group's records. Token grows
// with every new holder: a commit names it, so a holder whose lease was taken over is
// refused (ErrShareDLQFenced).
type ShareDLQLease struct {
	Group  string
	Holder string
	Token  int64
}

// ShareDLQRange is a run of records pending dead-lettering: delivered Count times,
// dead-lettered for Reason (ShareDLQRejected, ShareDLQDeliveryLimit), with the
// rejecting answer when one was given.
type ShareDLQRange struct {
	First, Last int64
	Count       int16
	Reason      string
	Rejection   ShareRejection
}

// MaxRejectionBody bounds a rejection's body excerpt, in bytes: it is kept in the
// share-partition's state until the copy is made, once per run of records.
const MaxRejectionBody = 256

// ShareRejection is a push target's answer that rejected records (issue 36): its
// HTTP status and an excerpt of its body (or, for a record rejected one by one in a
// 2xx batch answer, that record's reason). Zero: none (a consumer's reject, the
// delivery limit).
type ShareRejection struct {
	Status int
	Body   string
}

// Bounded answers r with its body cut to MaxRejectionBody bytes of valid UTF-8 (a
// character cut in half is dropped whole), its status in 0-999.
func (r ShareRejection) Bounded() ShareRejection {
	if r.Status < 0 || r.Status > 999 {
		r.Status = 0
	}
	b := strings.ToValidUTF8(r.Body, "\uFFFD")
	if len(b) > MaxRejectionBody {
		b = b[:MaxRejectionBody]
		for len(b) > 0 && !utf8.ValidString(b) {
			b = b[:len(b)-1]
		}
	}
	r.Body = b
	return r
}

// ShareDLQWork is one share-partition's records pending dead-lettering.
type ShareDLQWork struct {
	Group    string
	DLQTopic string
	TopicID  int64
	ShareTP
	Ranges []ShareDLQRange
}

// ShareDLQCommit rides a flush (Request.ShareDLQ): the request's records are the
// copies of Ranges of one share-partition, and the commit moves those ranges from
// pending to archived in the same transaction — refusing the whole request when the
// lease is not the group's (ErrShareDLQFenced) or any offset is not pending
// (ErrShareDLQNotPending).
type ShareDLQCommit struct {
	Lease     ShareDLQLease
	TopicID   int64
	Partition int32
	Ranges    []ShareDLQRange
}
