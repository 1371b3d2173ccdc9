package kafka

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/security"
)

// Authenticator checks credentials (*security.Guard): SASL/PLAIN, whose username is a
// key's id and password its secret (a password that is a valid key under another id is
// refused: the username names the key); SCRAM-SHA-256 and -512 against the catalog's
// credentials; OAUTHBEARER JWTs (when OAuthEnabled); and a verified TLS client
// certificate. Track registers a connection to cut when its key or SCRAM credential is
// revoked or expires.
type Authenticator interface {
	AuthenticatePlain(ctx context.Context, username, password string) (security.Identity, error)
	StartScram(ctx context.Context, mechanism string) (*security.ScramLogin, error)
	OAuthEnabled() bool
	AuthenticateToken(ctx context.Context, token string) (security.Identity, error)
	CertPrincipal(cert *x509.Certificate) (string, error)
	Track(id string, cut func()) (release func(), ok bool)
}

var _ Authenticator = (*security.Guard)(nil)

// ErrAuthFailed: the credentials were refused.
var ErrAuthFailed = security.ErrAuthFailed

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

// parseOAuthBearer reads the client's first OAUTHBEARER message (RFC 7628 section 3.1,
// as KIP-255 uses it): a GS2 header without channel binding, then \x01-separated
// key=value pairs, "auth=Bearer TOKEN" among them, ended by \x01\x01. SASL extensions
// (KIP-342) are accepted and ignored.
func parseOAuthBearer(msg []byte) (string, error) {
	s := string(msg)
	gs2, rest, ok := strings.Cut(s, ",")
	if !ok || (gs2 != "n" && gs2 != "y") {
		return "", fmt.Errorf("%w: OAUTHBEARER: malformed GS2 header", security.ErrInvalidToken)
	}
	if _, rest, ok = strings.Cut(rest, ","); !ok || !strings.HasPrefix(rest, "\x01") || !strings.HasSuffix(rest, "\x01\x01") {
		return "", fmt.Errorf("%w: OAUTHBEARER: malformed message", security.ErrInvalidToken)
	}
	for kv := range strings.SplitSeq(strings.Trim(rest, "\x01"), "\x01") {
		if v, ok := strings.CutPrefix(kv, "auth="); ok {
			scheme, tok, ok := strings.Cut(v, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
				return "", fmt.Errorf("%w: OAUTHBEARER: auth is not \"Bearer TOKEN\"", security.ErrInvalidToken)
			}
			return tok, nil
		}
	}
	return "", fmt.Errorf("%w: OAUTHBEARER: no auth=Bearer TOKEN", security.ErrInvalidToken)
}

const (
	mechanismPlain  = "PLAIN"
	mechanismOAuth  = "OAUTHBEARER"
	mechanismSHA256 = "SCRAM-SHA-256"
	mechanismSHA512 = "SCRAM-SHA-512"
)

// mechanisms are the SASL mechanisms served: PLAIN and SCRAM always (with a catalog
// behind the guard; SCRAM users are its credentials), OAUTHBEARER when tokens are
// configured.
func (s *Server) mechanisms() []string {
	ms := []string{mechanismPlain, mechanismSHA256, mechanismSHA512}
	if s.cfg.Auth.OAuthEnabled() {
		ms = append(ms, mechanismOAuth)
	}
	return ms
}

// saslHandshake picks the mechanism. An authenticated connection may handshake again
// with its mechanism to re-authenticate (KIP-368), before its session expires.
func (s *Server) saslHandshake(_ context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = s.mechanisms()
	c := r.conn
	if c.saslActive || (c.authed && (c.saslMechanism == "" || in.Mechanism != c.saslMechanism || r.header.version == 0)) {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, errAnswerThenClose
	}
	if !containsString(resp.SupportedMechanisms, in.Mechanism) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, errAnswerThenClose
	}
	c.mechanism, c.saslActive, c.scram, c.oauthErr = in.Mechanism, true, nil, nil
	// v0: the SASL exchange follows as bare frames, not SaslAuthenticate requests.
	c.rawToken = r.header.version == 0
	return resp, nil
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// saslAuthenticate serves one step of the exchange; a refusal is answered
// SASL_AUTHENTICATION_FAILED, then the connection is closed — whether or not the node
// requires authentication.
func (s *Server) saslAuthenticate(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := r.conn
	if !c.saslActive {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate must follow a SaslHandshake"
		resp.ErrorMessage = &msg
		return resp, errAnswerThenClose
	}
	out, lifetime, err := c.saslStep(ctx, in.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := failureMessage(c.mechanism, err)
		resp.ErrorMessage = &msg
		return resp, errAnswerThenClose
	}
	resp.SASLAuthBytes = out
	if lifetime > 0 {
		resp.SessionLifetimeMillis = max(1, lifetime.Milliseconds())
	}
	return resp, nil
}

// failureMessage is what a refused client is told: Kafka's wording, which names no
// user and says nothing of why (the log does).
func failureMessage(mechanism string, err error) string {
	switch {
	case mechanism == mechanismOAuth:
		return `authentication failed: {"status":"invalid_token"}`
	case mechanism == mechanismPlain:
		return "authentication failed: invalid username or password (the username is the key's id)"
	case errors.Is(err, errReauthPrincipal):
		return "authentication failed: a re-authentication may not change the principal"
	}
	return "authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism
}

// rawSASL serves a bare token that follows a v0 SaslHandshake: each server message goes
// back as a bare size-prefixed frame (an empty one once PLAIN succeeds); a refusal
// closes the connection without an answer, as Kafka does.
func (c *conn) rawSASL(sl *slot, token []byte) bool {
	start := time.Now()
	out, _, err := c.saslStep(c.ctx, token)
	c.s.metrics.observe("SaslRawToken", 0, true, time.Since(start), err != nil)
	if err != nil {
		sl.closeAfter = true
	} else {
		frame := make([]byte, 4+len(out))
		frame[0], frame[1], frame[2], frame[3] = byte(len(out)>>24), byte(len(out)>>16), byte(len(out)>>8), byte(len(out))
		copy(frame[4:], out)
		sl.out = frame
		c.rawToken = c.saslActive // more tokens follow until the exchange is done
	}
	close(sl.done)
	return err == nil
}

// errReauthPrincipal: a re-authentication named another principal (KIP-368 forbids it).
var errReauthPrincipal = fmt.Errorf("%w: re-authentication changed the principal", ErrAuthFailed)

// saslStep serves one message of the client's exchange and answers the server's. Once
// the exchange succeeds the connection acts as its principal; lifetime is then how long
// its session lasts (an OAUTHBEARER token's expiry: 0 for the others). An error ends
// the exchange: the caller refuses and closes.
func (c *conn) saslStep(ctx context.Context, msg []byte) (out []byte, lifetime time.Duration, err error) {
	auth := c.s.cfg.Auth
	var (
		id   security.Identity
		done bool
	)
	switch c.mechanism {
	case mechanismPlain:
		var user, pass string
		if user, pass, err = parsePlain(msg); err == nil {
			id, err = auth.AuthenticatePlain(ctx, user, pass)
		}
		done = err == nil
	case mechanismSHA256, mechanismSHA512:
		if c.scram == nil {
			c.scram, err = auth.StartScram(ctx, c.mechanism)
		}
		if err == nil {
			out, id, done, err = c.scram.Step(msg)
		}
	case mechanismOAuth:
		switch {
		case c.oauthErr != nil:
			// The client's \x01 after our error challenge (RFC 7628 section 3.2.3):
			// now the exchange fails.
			err = c.oauthErr
		default:
			var tok string
			if tok, err = parseOAuthBearer(msg); err == nil {
				id, err = auth.AuthenticateToken(ctx, tok)
			}
			if err != nil {
				// RFC 7628: the error goes to the client as a challenge; it answers
				// \x01 and is then refused (franz-go and Kafka's clients expect this).
				c.oauthErr = err
				c.logRefusal(err)
				return []byte(`{"status":"invalid_token"}`), 0, nil
			}
			done = true
		}
	default:
		err = fmt.Errorf("%w: no mechanism chosen", ErrAuthFailed)
	}
	if err == nil && done {
		err = c.authenticated(id)
	}
	if err != nil {
		c.saslActive = false
		if c.mechanism != mechanismOAuth || c.oauthErr == nil {
			c.logRefusal(err)
		}
		c.s.metrics.authFailures.Inc()
		return nil, 0, err
	}
	if done {
		c.saslActive, c.scram, c.saslMechanism = false, nil, c.mechanism
		c.s.log.Debug("authenticated", "remote", c.remote, "mechanism", c.mechanism, "principal", id.Principal, "key", id.KeyID)
		if !id.Expires.IsZero() {
			lifetime = max(time.Until(id.Expires), time.Millisecond)
		}
	}
	return out, lifetime, nil
}

// logRefusal logs a refused login. The user is not logged: a client that mixed up the
// fields would have its secret written to the log.
func (c *conn) logRefusal(err error) {
	c.s.log.Info("SASL authentication refused", "remote", c.remote, "mechanism", c.mechanism, "err", err)
}

// authenticated makes the connection act as id's principal from now on; with a key or
// a SCRAM credential, it is closed once that is revoked, replaced or expires (at once
// if that has just happened); with a token, at the token's expiry unless it
// re-authenticates first (KIP-368). A re-authentication must keep the principal.
func (c *conn) authenticated(id security.Identity) error {
	if c.authed && c.saslMechanism != "" && id.Principal != c.principal {
		return errReauthPrincipal
	}
	release := func() {}
	if id.KeyID != "" {
		var ok bool
		release, ok = c.s.cfg.Auth.Track(id.KeyID, func() {
			c.s.metrics.closed.WithLabelValues("revoked").Inc()
			c.s.log.Info("closing connection: its key or SCRAM credential was revoked or expired", "remote", c.remote, "key", id.KeyID)
			c.close()
		})
		if !ok {
			return fmt.Errorf("%w: %s was revoked", ErrAuthFailed, id.KeyID)
		}
	}
	c.untrack()
	c.untrack = release
	c.setSessionExpiry(id.Expires, id.Principal)
	c.authed, c.principal = true, id.Principal
	c.admitted()
	return nil
}

// setSessionExpiry closes the connection at expires (zero: never), replacing the
// deadline of an earlier login.
func (c *conn) setSessionExpiry(expires time.Time, principal string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessionTimer != nil {
		c.sessionTimer.Stop()
		c.sessionTimer = nil
	}
	if expires.IsZero() {
		return
	}
	c.sessionTimer = time.AfterFunc(time.Until(expires), func() {
		c.s.metrics.closed.WithLabelValues("session_expired").Inc()
		c.s.log.Info("closing connection: its token expired without re-authentication", "remote", c.remote, "principal", principal)
		c.close()
	})
}

// certificate authenticates a TLS connection by its verified client certificate, if it
// presented one; without, SASL is still required.
func (c *conn) certificate() {
	tc, ok := c.nc.(*tls.Conn)
	if !ok || c.s.cfg.Auth == nil {
		return
	}
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	err := tc.HandshakeContext(c.ctx)
	_ = tc.SetDeadline(time.Time{})
	if err != nil {
		c.s.log.Debug("TLS handshake", "remote", c.remote, "err", err)
		return // the first read fails too, and ends the connection
	}
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return
	}
	principal, err := c.s.cfg.Auth.CertPrincipal(st.PeerCertificates[0])
	if err != nil {
		c.s.metrics.authFailures.Inc()
		c.s.log.Info("client certificate refused", "remote", c.remote, "err", err)
		return
	}
	c.authed, c.principal = true, principal
	c.admitted()
}
