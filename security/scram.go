package security

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/xdg-go/scram"

	"github.com/strata-io/strata/catalog"
)

// SCRAM logins (RFC 5802, RFC 7677) against the catalog's credentials. The exchange —
// parsing the client's messages, the nonce, verifying the proof in constant time,
// the server signature — is github.com/xdg-go/scram's server conversation: a
// maintained implementation with the RFC's test vectors, which MongoDB's Go driver
// uses; written here it would be the code most likely to be subtly wrong. This file
// only looks the credential up and says who logged in.

// ScramLogin is one SCRAM exchange in progress. It is not safe for concurrent use (a
// connection's SASL requests are served in order).
type ScramLogin struct {
	g    *Guard
	ctx  context.Context
	mech catalog.ScramMechanism
	conv *scram.ServerConversation
	cred catalog.ScramCredential
}

// ScramMechanisms are the SASL mechanisms StartScram serves.
var ScramMechanisms = []string{catalog.ScramSHA256.String(), catalog.ScramSHA512.String()}

// StartScram begins a login with mechanism (SCRAM-SHA-256 or SCRAM-SHA-512). ctx bounds
// the credential lookups of the exchange.
func (g *Guard) StartScram(ctx context.Context, mechanism string) (*ScramLogin, error) {
	m, ok := catalog.ParseScramMechanism(mechanism)
	if !ok {
		return nil, fmt.Errorf("%w: unknown SCRAM mechanism %q", ErrAuthFailed, mechanism)
	}
	hash := scram.SHA256
	if m == catalog.ScramSHA512 {
		hash = scram.SHA512
	}
	l := &ScramLogin{g: g, ctx: ctx, mech: m}
	srv, err := hash.NewServer(l.lookup)
	if err != nil {
		return nil, fmt.Errorf("scram: new server: %w", err)
	}
	l.conv = srv.NewConversation()
	return l, nil
}

func (l *ScramLogin) lookup(user string) (scram.StoredCredentials, error) {
	c, ok := l.g.scramCredential(l.ctx, user, l.mech)
	if !ok {
		return scram.StoredCredentials{}, errors.New("unknown user")
	}
	l.cred = c
	return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
		StoredKey: c.StoredKey, ServerKey: c.ServerKey}, nil
}

// Step answers the client's message. done is set with the identity once the client has
// proved its password (out is then the server's final message, which the client
// checks). An error wraps ErrAuthFailed: the exchange is over.
func (l *ScramLogin) Step(msg []byte) (out []byte, id Identity, done bool, err error) {
	resp, err := l.conv.Step(string(msg))
	if err != nil {
		return nil, Identity{}, false, fmt.Errorf("%w: %s: %v", ErrAuthFailed, l.mech, err)
	}
	if !l.conv.Done() {
		return []byte(resp), Identity{}, false, nil
	}
	if !l.conv.Valid() {
		return nil, Identity{}, false, fmt.Errorf("%w: %s: invalid proof", ErrAuthFailed, l.mech)
	}
	user := l.conv.Username()
	if z := l.conv.AuthzID(); z != "" && z != user {
		return nil, Identity{}, false, fmt.Errorf("%w: %s: authorization id differs from the user", ErrAuthFailed, l.mech)
	}
	return []byte(resp), Identity{Principal: "User:" + user, KeyID: scramTrackID(l.cred)}, true, nil
}

// scramTrackID names a SCRAM login's credential for Track: its connections are cut
// once the credential is deleted or replaced (a new password: its stored key changes).
// The user comes last: it may contain ':'.
func scramTrackID(c catalog.ScramCredential) string {
	return "scram:" + c.Mechanism.String() + ":" + hex.EncodeToString(c.StoredKey[:8]) + ":" + c.User
}

// scramLive says whether the credential a track id names is still the stored one.
func (v *view) scramLive(id string) bool {
	parts := strings.SplitN(id, ":", 4)
	if len(parts) != 4 {
		return false
	}
	m, ok := catalog.ParseScramMechanism(parts[1])
	if !ok {
		return false
	}
	c, ok := v.scram[scramKey{user: parts[3], mech: m}]
	return ok && hex.EncodeToString(c.StoredKey[:8]) == parts[2]
}

func isScramTrackID(id string) bool { return strings.HasPrefix(id, "scram:") }

type scramKey struct {
	user string
	mech catalog.ScramMechanism
}

// scramCredential finds user's credential of mechanism m, looking again (as for keys)
// when it is not known: a credential made a moment ago on another node works at once.
func (g *Guard) scramCredential(ctx context.Context, user string, m catalog.ScramMechanism) (catalog.ScramCredential, bool) {
	k := scramKey{user: user, mech: m}
	v := g.current(ctx)
	c, ok := v.scram[k]
	if !ok {
		c, ok = g.afterMiss(ctx).scram[k]
	}
	return c, ok
}
