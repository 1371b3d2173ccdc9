package kafka

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authenticator checks SASL/PLAIN credentials: the username is a key's id, the password
// its secret. It returns the principal the connection then acts as, or an error
// (wrapping ErrAuthFailed for a refusal) — the connection is closed either way. A
// password that is a valid key under another key's id (or any other username) is
// refused: the username names the key.
type Authenticator interface {
	Authenticate(ctx context.Context, username, password string) (principal string, err error)
}

// ErrAuthFailed: the credentials were refused.
var ErrAuthFailed = errors.New("authentication failed")

// StaticKeys authenticates against the API keys given at start-up (--api-keys), until
// keys live in the catalog with ids of their own. A static key's id is KeyID(key).
type StaticKeys struct {
	digests map[string][sha256.Size]byte // id → SHA-256 of the key
}

// NewStaticKeys returns an Authenticator over keys.
func NewStaticKeys(keys []string) *StaticKeys {
	s := &StaticKeys{digests: make(map[string][sha256.Size]byte, len(keys))}
	for _, k := range keys {
		s.digests[KeyID(k)] = sha256.Sum256([]byte(k))
	}
	return s
}

// KeyID is a static key's id, its SASL/PLAIN username: the first 16 hex digits of the
// key's SHA-256 (printf %s "$KEY" | sha256sum | cut -c1-16). It names the key without
// revealing it.
func KeyID(key string) string {
	d := sha256.Sum256([]byte(key))
	return hex.EncodeToString(d[:8])
}

// Authenticate checks that password is a configured key and username its id. The
// digest comparison is constant-time; the answer says nothing about which part was
// wrong.
func (s *StaticKeys) Authenticate(_ context.Context, username, password string) (string, error) {
	want, ok := s.digests[username]
	got := sha256.Sum256([]byte(password))
	if subtle.ConstantTimeCompare(want[:], got[:]) != 1 || !ok {
		if s.isKey(got) {
			return "", fmt.Errorf("%w: the username is not the id of the key given as password", ErrAuthFailed)
		}
		return "", fmt.Errorf("%w: unknown key", ErrAuthFailed)
	}
	return "key:" + username, nil
}

func (s *StaticKeys) isKey(d [sha256.Size]byte) bool {
	found := 0
	for _, k := range s.digests {
		found |= subtle.ConstantTimeCompare(k[:], d[:])
	}
	return found == 1
}

// parsePlain splits a SASL/PLAIN message (RFC 4616): [authzid] NUL authcid NUL passwd.
// An authorization id other than the username is refused: a key acts only as itself.
func parsePlain(msg []byte) (user, pass string, err error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 || len(parts[2]) == 0 {
		return "", "", fmt.Errorf("%w: malformed PLAIN message", ErrAuthFailed)
	}
	if len(parts[0]) > 0 && !bytes.Equal(parts[0], parts[1]) {
		return "", "", fmt.Errorf("%w: authorization id differs from the username", ErrAuthFailed)
	}
	return string(parts[1]), string(parts[2]), nil
}

const mechanismPlain = "PLAIN"

// saslHandshake picks the mechanism: PLAIN only.
func (s *Server) saslHandshake(_ context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = []string{mechanismPlain}
	c := r.conn
	if c.authed || c.mechanism != "" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, errAnswerThenClose
	}
	if in.Mechanism != mechanismPlain {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, errAnswerThenClose
	}
	c.mechanism = mechanismPlain
	// v0: the SASL exchange follows as bare frames, not SaslAuthenticate requests.
	c.rawToken = r.header.version == 0
	return resp, nil
}

// saslAuthenticate checks the PLAIN credentials; a refusal is answered, then the
// connection is closed.
func (s *Server) saslAuthenticate(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := r.conn
	if c.authed || c.mechanism == "" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate must follow a SaslHandshake, once"
		resp.ErrorMessage = &msg
		return resp, errAnswerThenClose
	}
	if err := s.authenticate(ctx, c, in.SASLAuthBytes); err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "authentication failed: invalid username or password (the username is the key's id)"
		resp.ErrorMessage = &msg
		return resp, errAnswerThenClose
	}
	return resp, nil
}

// rawSASL serves the bare PLAIN token that follows a v0 SaslHandshake: success is an
// empty token back; a refusal closes the connection without an answer, as Kafka does.
func (c *conn) rawSASL(sl *slot, token []byte) bool {
	start := time.Now()
	err := c.s.authenticate(c.ctx, c, token)
	c.s.metrics.observe("SaslRawToken", 0, true, time.Since(start), err != nil)
	if err != nil {
		sl.closeAfter = true
	} else {
		sl.out = []byte{0, 0, 0, 0}
	}
	close(sl.done)
	return err == nil
}

func (s *Server) authenticate(ctx context.Context, c *conn, token []byte) error {
	user, pass, err := parsePlain(token)
	if err == nil {
		var principal string
		principal, err = s.cfg.Auth.Authenticate(ctx, user, pass)
		if err == nil {
			c.authed, c.principal = true, principal
			s.log.Debug("authenticated", "remote", c.remote, "principal", principal)
			return nil
		}
	}
	s.metrics.authFailures.Inc()
	// The username is not logged: a client that mixed up the fields would have its
	// secret written to the log.
	s.log.Info("SASL authentication refused", "remote", c.remote, "err", err)
	return err
}
