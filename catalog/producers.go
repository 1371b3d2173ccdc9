package catalog

// Idempotent and transactional producers (docs/design.md "Write path"): the Producers
// interface, its errors and the transactional id's shape. The rules a commit checks
// idempotent requests with are the engine's (catalog/internal/engine/producers.go).

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Producers is the producer part of the catalog, implemented by both backends beside
// Catalog and proved by catalogtest (its "producers" suite).
type Producers interface {
	// InitProducer hands out a producer identity. Without a transactional id it is a
	// new id at epoch 0, unless current names a producer without a transactional id at
	// its current epoch: that producer is bumped to the next epoch and keeps its id
	// (KIP-360; engine.NextIdempotentEpoch decides). With one, a known id is returned again at
	// the next epoch, which fences every older instance (their requests get
	// ErrProducerFenced from then on); an unknown one (or one expired) gets a new id at
	// epoch 0. The epoch never wraps: past math.MaxInt16 the transactional id moves to
	// a new id at epoch 0. An invalid transactional id is ErrInvalidTransactionalID.
	//
	// current, when set, is the identity the caller holds now for this transactional
	// id: an instance bumping its own epoch (to restart its sequences after a refused
	// request) must not fence a newer instance that has taken the id over. The bump
	// then happens only if current is still the id's identity; otherwise
	// ErrProducerFenced (ErrUnknownProducer when the id has expired).
	//
	// InitProducer also forgets producers idle for longer than Options.ProducerExpiry.
	//
	// owner is the principal asking ("" for Anonymous): a new id is recorded as its
	// (Security.ProducerOwner); an existing id keeps the owner it was created with.
	InitProducer(ctx context.Context, transactionalID string, current *Producer, owner string) (Producer, error)
}

// ProducerOwner is whom a producer id belongs to (Security.ProducerOwner).
type ProducerOwner struct {
	// TransactionalID is the id's transactional id, if it has one: then whoever may
	// write to that transactional id may use it.
	TransactionalID string
	// Principal created the id ("" for Anonymous): the one principal that may use a
	// producer id without a transactional id.
	Principal string
	// Unowned: the id was handed out before owners were recorded (by a node that
	// predates them), so it has no principal.
	Unowned bool
}

var (
	// ErrProducerFenced: the request's epoch is older than the producer's current
	// epoch — a newer instance with the same transactional id has initialised. The
	// instance must stop; nothing it sends commits.
	ErrProducerFenced = errors.New("producer fenced")
	// ErrOutOfOrderSequence: a batch's base sequence is not the one the partition
	// expects from this producer (a gap, or a retry too old to be recognised). The
	// error is a *SequenceError saying which sequence was expected.
	ErrOutOfOrderSequence = errors.New("out of order sequence")
	// ErrUnknownProducer: the producer id was never handed out or has expired.
	// Initialise again.
	ErrUnknownProducer = errors.New("unknown producer id")
	// ErrInvalidTransactionalID: a transactional id that cannot exist.
	ErrInvalidTransactionalID = errors.New("invalid transactional id")
)

// SequenceError is an ErrOutOfOrderSequence refusal.
type SequenceError struct {
	TopicID   int64
	Partition int32
	// Expected is the base sequence the partition expects next from the producer at
	// this epoch (0 when it has no state there); Got is the batch's.
	Expected, Got int32
}

func (e *SequenceError) Error() string {
	return fmt.Sprintf("%s: topic id %d partition %d: base sequence %d, expected %d",
		ErrOutOfOrderSequence, e.TopicID, e.Partition, e.Got, e.Expected)
}

func (e *SequenceError) Unwrap() error { return ErrOutOfOrderSequence }

// DefaultProducerExpiry is Options.ProducerExpiry when it is zero.
const DefaultProducerExpiry = 7 * 24 * time.Hour

// maxTransactionalID bounds a transactional id's length in bytes.
const maxTransactionalID = 255

// ValidateTransactionalID accepts 1 to 255 bytes of UTF-8 without control characters:
// ids are chosen by applications (a service name and a shard) and show in listings.
func ValidateTransactionalID(id string) error {
	if id == "" || len(id) > maxTransactionalID || !utf8.ValidString(id) {
		return fmt.Errorf("%w: %q: use 1 to %d bytes of UTF-8", ErrInvalidTransactionalID, TruncateName(id), maxTransactionalID)
	}
	for _, r := range id {
		if r < ' ' || r == 0x7f {
			return fmt.Errorf("%w: %q: control characters are not allowed", ErrInvalidTransactionalID, TruncateName(id))
		}
	}
	return nil
}
