package broker

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"hash"
	"slices"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// SCRAM credentials (catalog.Scram), managed as Kafka manages them: altering needs
// Alter on the cluster, describing Describe on it (Kafka's
// AlterUserScramCredentials/DescribeUserScramCredentials). The catalog keeps the salt,
// the iteration count and the keys derived from the salted password; the password
// itself reaches the core only from the HTTP API and the CLI, and is dropped once the
// keys are derived. A deleted or replaced credential stops authenticating, and the
// connections it opened are cut, as each node's guard follows the security version.

// Scram is the catalog's part that keeps SCRAM credentials (both backends).
type Scram = catalog.Scram

var _ Scram = catalog.Scram(nil)

// DefaultScramIterations is the iteration count of a credential set from a password
// without one.
const DefaultScramIterations = 8192

// scramSaltBytes is the salt made for a credential set from a password.
const scramSaltBytes = 32

// ScramUpsert sets a user's credential of one mechanism: from SaltedPassword (Kafka's
// AlterUserScramCredentials: the client salts the password) or from Password (HTTP,
// the CLI: the core draws the salt and salts it).
type ScramUpsert struct {
	User       string
	Mechanism  catalog.ScramMechanism
	Iterations int32
	// Salt and SaltedPassword, or Password (then Salt is drawn at random and Iterations
	// defaults to DefaultScramIterations).
	Salt           []byte
	SaltedPassword []byte
	Password       string
}

// ScramUser describes one user's credentials: the mechanisms and iteration counts
// (never a key or a salt).
type ScramUser struct {
	User        string
	Credentials []ScramInfo
}

// ScramInfo is one credential as DescribeUserScramCredentials shows it.
type ScramInfo struct {
	Mechanism  catalog.ScramMechanism
	Iterations int32
}

// UpsertScramCredential stores u's credential, replacing the user's credential of that
// mechanism (whose connections are then cut).
func (b *Broker) UpsertScramCredential(ctx context.Context, who Principal, u ScramUpsert) error {
	if e := b.scramCall(ctx, who, acl.OpAlter); e != nil {
		return e
	}
	c, e := scramCredential(u)
	if e != nil {
		return e
	}
	details := map[string]any{"mechanism": c.Mechanism.String(), "iterations": c.Iterations}
	err := b.d.Scram.UpsertScramCredential(withAuditOf(ctx, who, "scram.upsert", "user", c.User, details), c)
	if errors.Is(err, catalog.ErrScramInvalid) {
		return newError(CodeInvalidRequest, "%s", err.Error())
	}
	if err != nil {
		return catalogError("store SCRAM credential", err)
	}
	return nil
}

// DeleteScramCredential deletes user's credential of mechanism m; its connections are
// cut.
func (b *Broker) DeleteScramCredential(ctx context.Context, who Principal, user string, m catalog.ScramMechanism) error {
	if e := b.scramCall(ctx, who, acl.OpAlter); e != nil {
		return e
	}
	if e := checkScramTarget(user, m); e != nil {
		return e
	}
	err := b.d.Scram.DeleteScramCredential(withAuditOf(ctx, who, "scram.delete", "user", user,
		map[string]any{"mechanism": m.String()}), user, m)
	if errors.Is(err, catalog.ErrScramNotFound) {
		return newError(CodeCredentialNotFound, "user %q has no %s credential", truncate(user, 64), m).with("user", truncate(user, 64))
	}
	if err != nil {
		return catalogError("delete SCRAM credential", err)
	}
	return nil
}

// DescribeScramCredentials describes the users named (none: every user with a
// credential), in the order asked, or by name. A user named without credentials is
// answered with none (the front end says "not found" in its vocabulary).
func (b *Broker) DescribeScramCredentials(ctx context.Context, who Principal, users []string) ([]ScramUser, error) {
	if e := b.scramCall(ctx, who, acl.OpDescribe); e != nil {
		return nil, e
	}
	all, err := b.d.Scram.ScramCredentials(ctx)
	if err != nil {
		return nil, catalogError("list SCRAM credentials", err)
	}
	byUser := map[string][]ScramInfo{}
	var names []string
	for _, c := range all {
		if _, ok := byUser[c.User]; !ok {
			names = append(names, c.User)
		}
		byUser[c.User] = append(byUser[c.User], ScramInfo{Mechanism: c.Mechanism, Iterations: c.Iterations})
	}
	if users == nil {
		users = names
	}
	out := make([]ScramUser, 0, len(users))
	for _, u := range users {
		out = append(out, ScramUser{User: u, Credentials: byUser[u]})
	}
	return out, nil
}

func (b *Broker) scramCall(ctx context.Context, who Principal, op acl.Operation) *Error {
	if b.d.Scram == nil {
		return newError(CodeRoleUnavailable, "this node's catalog keeps no SCRAM credentials")
	}
	return b.securityCall(ctx, who, op)
}

// ParseScramMechanism reads a mechanism's name (SCRAM-SHA-256, SCRAM-SHA-512) for a
// front end; an unknown one is CodeInvalidRequest naming the field "mechanism".
func ParseScramMechanism(s string) (catalog.ScramMechanism, error) {
	m, ok := catalog.ParseScramMechanism(s)
	if !ok {
		return 0, newError(CodeInvalidRequest, "mechanism %q: SCRAM-SHA-256 or SCRAM-SHA-512", truncate(s, 32)).with("field", "mechanism")
	}
	return m, nil
}

// checkScramTarget refuses a user name or mechanism no credential can have.
func checkScramTarget(user string, m catalog.ScramMechanism) *Error {
	if err := catalog.ValidateScramUser(user); err != nil {
		return newError(CodeInvalidRequest, "%s", err.Error()).with("field", "user")
	}
	if m != catalog.ScramSHA256 && m != catalog.ScramSHA512 {
		return newError(CodeInvalidRequest, "unknown SCRAM mechanism %d: SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2)", int8(m)).with("field", "mechanism")
	}
	return nil
}

// scramCredential derives what the catalog keeps from u (RFC 5802 section 3):
// ClientKey = HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey), ServerKey =
// HMAC(SaltedPassword, "Server Key").
func scramCredential(u ScramUpsert) (catalog.ScramCredential, *Error) {
	if e := checkScramTarget(u.User, u.Mechanism); e != nil {
		return catalog.ScramCredential{}, e
	}
	h := scramHash(u.Mechanism)
	salted := u.SaltedPassword
	switch {
	case u.Password != "" && (len(u.SaltedPassword) > 0 || len(u.Salt) > 0):
		return catalog.ScramCredential{}, newError(CodeInvalidRequest, "give a password, or a salt and a salted password, not both").with("field", "password")
	case u.Password != "":
		if u.Iterations == 0 {
			u.Iterations = DefaultScramIterations
		}
		if u.Iterations < catalog.MinScramIterations || u.Iterations > catalog.MaxScramIterations {
			return catalog.ScramCredential{}, iterationsError(u.Iterations)
		}
		u.Salt = make([]byte, scramSaltBytes)
		rand.Read(u.Salt) // never fails (crypto/rand)
		var err error
		if salted, err = pbkdf2.Key(h, u.Password, u.Salt, int(u.Iterations), u.Mechanism.KeyLen()); err != nil {
			return catalog.ScramCredential{}, newError(CodeInvalidRequest, "salt the password: %v", err).with("field", "password")
		}
	case len(u.SaltedPassword) == 0:
		return catalog.ScramCredential{}, newError(CodeInvalidRequest, "a credential needs a password (or a salt and a salted password)").with("field", "password")
	case len(u.SaltedPassword) != u.Mechanism.KeyLen():
		return catalog.ScramCredential{}, newError(CodeInvalidRequest, "a %s salted password is %d bytes, not %d", u.Mechanism, u.Mechanism.KeyLen(), len(u.SaltedPassword)).with("field", "salted_password")
	}
	if u.Iterations < catalog.MinScramIterations || u.Iterations > catalog.MaxScramIterations {
		return catalog.ScramCredential{}, iterationsError(u.Iterations)
	}
	mac := func(msg string) []byte {
		m := hmac.New(h, salted)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac("Client Key")
	sh := h()
	sh.Write(clientKey)
	c := catalog.ScramCredential{User: u.User, Mechanism: u.Mechanism, Salt: slices.Clone(u.Salt), Iterations: u.Iterations,
		StoredKey: sh.Sum(nil), ServerKey: mac("Server Key")}
	if err := catalog.ValidateScram(c); err != nil {
		return catalog.ScramCredential{}, newError(CodeInvalidRequest, "%s", err.Error()).with("field", "salt")
	}
	return c, nil
}

func iterationsError(n int32) *Error {
	return newError(CodeInvalidRequest, "%d iterations: give %d to %d", n, catalog.MinScramIterations, catalog.MaxScramIterations).with("field", "iterations")
}

func scramHash(m catalog.ScramMechanism) func() hash.Hash {
	if m == catalog.ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

// AlterScramCredentials applies one user's changes of a Kafka
// AlterUserScramCredentials request: every change is checked before any is written,
// so a refused upsertion changes nothing; the deletions go first (a deletion of a
// credential that does not exist refuses the rest).
func (b *Broker) AlterScramCredentials(ctx context.Context, who Principal, user string, deletions []catalog.ScramMechanism, upserts []ScramUpsert) error {
	if e := b.scramCall(ctx, who, acl.OpAlter); e != nil {
		return e
	}
	for _, m := range deletions {
		if e := checkScramTarget(user, m); e != nil {
			return e
		}
	}
	creds := make([]catalog.ScramCredential, 0, len(upserts))
	for _, u := range upserts {
		u.User = user
		c, e := scramCredential(u)
		if e != nil {
			return e
		}
		creds = append(creds, c)
	}
	for _, m := range deletions {
		if err := b.DeleteScramCredential(ctx, who, user, m); err != nil {
			return err
		}
	}
	for _, c := range creds {
		details := map[string]any{"mechanism": c.Mechanism.String(), "iterations": c.Iterations}
		if err := b.d.Scram.UpsertScramCredential(withAuditOf(ctx, who, "scram.upsert", "user", c.User, details), c); err != nil {
			return catalogError("store SCRAM credential", err)
		}
	}
	return nil
}
