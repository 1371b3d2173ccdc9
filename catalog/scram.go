package catalog

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Scram keeps SCRAM credentials (RFC 5802/7677) for Kafka's SCRAM-SHA-256 and
// SCRAM-SHA-512 logins: per user and mechanism, the salt, the iteration count and the
// two keys derived from the salted password (StoredKey, ServerKey) — never the
// password, nor the salted password, which would log in as well as the password does.
// A change bumps the security version in its own transaction and notifies, as a change
// to keys or ACLs does (Security.WatchSecurity), so every node's view follows and the
// connections of a deleted or replaced credential are cut. The rules (what a valid
// credential is) are ValidateScram's; the statements are the engine's, once for both
// backends. Proved by catalogtest (its "scram" suite).
type Scram interface {
	// UpsertScramCredential stores c (checked with ValidateScram), replacing the user's
	// credential of the same mechanism.
	UpsertScramCredential(ctx context.Context, c ScramCredential) error
	// DeleteScramCredential deletes the user's credential of mechanism m; none:
	// ErrScramNotFound.
	DeleteScramCredential(ctx context.Context, user string, m ScramMechanism) error
	// ScramCredentials lists every credential, by user then mechanism.
	ScramCredentials(ctx context.Context) ([]ScramCredential, error)
}

// ScramMechanism is a SCRAM hash, numbered as Kafka's
// Describe/AlterUserScramCredentials number them.
type ScramMechanism int8

// The mechanisms.
const (
	ScramSHA256 ScramMechanism = 1
	ScramSHA512 ScramMechanism = 2
)

// String is the SASL mechanism name.
func (m ScramMechanism) String() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return fmt.Sprintf("SCRAM-UNKNOWN(%d)", int8(m))
}

// KeyLen is the length of the mechanism's hash, which its keys have.
func (m ScramMechanism) KeyLen() int {
	if m == ScramSHA512 {
		return 64
	}
	return 32
}

// ParseScramMechanism reads a SASL mechanism name (SCRAM-SHA-256, SCRAM-SHA-512).
func ParseScramMechanism(s string) (ScramMechanism, bool) {
	switch s {
	case "SCRAM-SHA-256":
		return ScramSHA256, true
	case "SCRAM-SHA-512":
		return ScramSHA512, true
	}
	return 0, false
}

// Bounds of a credential, Kafka's: fewer iterations than MinScramIterations make a
// stolen credential cheap to brute-force; more than MaxScramIterations make every
// login cost the node that much CPU.
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
	MaxScramUserLen    = 256
	MinScramSaltLen    = 8
	MaxScramSaltLen    = 128
)

// ScramCredential is what the catalog keeps for one user and mechanism.
type ScramCredential struct {
	// User is the SCRAM user name; the login's principal is "User:" and it.
	User       string
	Mechanism  ScramMechanism
	Salt       []byte
	Iterations int32
	// StoredKey is H(HMAC(SaltedPassword, "Client Key")), ServerKey HMAC(SaltedPassword,
	// "Server Key") (RFC 5802 section 3).
	StoredKey, ServerKey []byte
}

// Errors of Scram.
var (
	ErrScramNotFound = errors.New("no such SCRAM credential")
	// ErrScramInvalid wraps what ValidateScram refuses.
	ErrScramInvalid = errors.New("invalid SCRAM credential")
)

// ValidateScramUser says why name cannot be a SCRAM user, or nil: 1 to MaxScramUserLen
// bytes of UTF-8 without control characters (it is written into a principal and logs).
func ValidateScramUser(name string) error {
	if name == "" || len(name) > MaxScramUserLen || !utf8.ValidString(name) {
		return fmt.Errorf("%w: the user name must be 1 to %d bytes of UTF-8", ErrScramInvalid, MaxScramUserLen)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: the user name has a control character", ErrScramInvalid)
		}
	}
	return nil
}

// ValidateScram says why c cannot be stored, or nil.
func ValidateScram(c ScramCredential) error {
	if err := ValidateScramUser(c.User); err != nil {
		return err
	}
	switch {
	case c.Mechanism != ScramSHA256 && c.Mechanism != ScramSHA512:
		return fmt.Errorf("%w: unknown mechanism %d", ErrScramInvalid, c.Mechanism)
	case c.Iterations < MinScramIterations:
		return fmt.Errorf("%w: %d iterations is fewer than the minimum %d", ErrScramInvalid, c.Iterations, MinScramIterations)
	case c.Iterations > MaxScramIterations:
		return fmt.Errorf("%w: %d iterations is more than the maximum %d", ErrScramInvalid, c.Iterations, MaxScramIterations)
	case len(c.Salt) < MinScramSaltLen || len(c.Salt) > MaxScramSaltLen:
		return fmt.Errorf("%w: a salt of %d bytes: give %d to %d", ErrScramInvalid, len(c.Salt), MinScramSaltLen, MaxScramSaltLen)
	case len(c.StoredKey) != c.Mechanism.KeyLen() || len(c.ServerKey) != c.Mechanism.KeyLen():
		return fmt.Errorf("%w: keys of %s are %d bytes", ErrScramInvalid, c.Mechanism, c.Mechanism.KeyLen())
	}
	return nil
}
