package kafka

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/security"
)

// Authenticator checks credentials (*security.Guard): SASL/PLAIN, whose username is a
// key's id and password its secret (a password that is a valid key under another id is
// refused: the username names the key), and a verified TLS client certificate. Track
// registers a connection to cut when its key is revoked or expires.
type Authenticator interface {
	AuthenticatePlain(ctx context.Context, username, password string) (security.Identity, error)
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
		var id security.Identity
		if id, err = s.cfg.Auth.AuthenticatePlain(ctx, user, pass); err == nil {
			err = c.authenticated(id.Principal, id.KeyID)
		}
		if err == nil {
			s.log.Debug("authenticated", "remote", c.remote, "principal", id.Principal, "key", id.KeyID)
			return nil
		}
	}
	s.metrics.authFailures.Inc()
	// The username is not logged: a client that mixed up the fields would have its
	// secret written to the log.
	s.log.Info("SASL authentication refused", "remote", c.remote, "err", err)
	return err
}

// authenticated makes the connection act as principal from now on; with a key, it is
// closed once the key is revoked or expires (at once if that has just happened).
func (c *conn) authenticated(principal, keyID string) error {
	if keyID != "" {
		release, ok := c.s.cfg.Auth.Track(keyID, func() {
			c.s.metrics.closed.WithLabelValues("revoked").Inc()
			c.s.log.Info("closing connection: its key was revoked or expired", "remote", c.remote, "key", keyID)
			c.close()
		})
		if !ok {
			return fmt.Errorf("%w: key %s was revoked", ErrAuthFailed, keyID)
		}
		c.untrack = release
	}
	c.authed, c.principal = true, principal
	c.admitted()
	return nil
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
