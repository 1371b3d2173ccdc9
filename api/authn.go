package api

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/security"
)

// AuthConfig turns authentication on. Without it every route is open and every caller
// is anonymous (no ACL is enforced).
//
// With it, a request reaches a route only as a principal: a verified TLS client
// certificate (mapped by the Authenticator's rules), or "Authorization: Bearer KEY" with
// a key given by flag or kept in the catalog (or HTTP Basic with the key's id and
// secret, as schema registry clients send them); anything else gets 401 unauthorized with a
// WWW-Authenticate challenge, before its body is read, so it changes nothing. What the
// principal may do is the broker core's decision (403 forbidden). The health probes
// (/healthz, /readyz) stay open because load balancers and orchestrators call them
// without credentials; /metrics stays private unless PublicMetrics, since it names
// topics and request rates.
type AuthConfig struct {
	// Authenticator maps credentials to principals (*security.Guard); nil with Keys
	// empty: no authentication.
	Authenticator Authenticator
	// Keys, when Authenticator is nil, are static keys checked by a guard of their own
	// (tests and embedders). Check them with ValidateAPIKey.
	Keys []string
	// PublicMetrics serves /metrics without a key (a scraper inside the network).
	PublicMetrics bool
}

// Authenticator maps credentials to principals and cuts what a revoked key opened
// (*security.Guard).
type Authenticator interface {
	Enabled() bool
	Authenticate(ctx context.Context, secret string) (security.Identity, error)
	// AuthenticatePlain checks a key's id and secret (HTTP Basic, as schema registry
	// clients send them).
	AuthenticatePlain(ctx context.Context, id, secret string) (security.Identity, error)
	CertPrincipal(cert *x509.Certificate) (string, error)
	// Track registers cut, called once key id is revoked or expires; ok is false when
	// it already is.
	Track(id string, cut func()) (release func(), ok bool)
}

var _ Authenticator = (*security.Guard)(nil)

func (c AuthConfig) authenticator() Authenticator {
	if c.Authenticator != nil {
		return c.Authenticator
	}
	if len(c.Keys) > 0 {
		return security.New(security.Config{StaticKeys: c.Keys}, nil)
	}
	return nil
}

type principalKey struct{}

// caller is the request's authenticated identity, set by authMiddleware; the access log
// reads it after the handler.
type caller struct {
	who   broker.Principal
	keyID string
}

// principal is who calls: the principal authMiddleware authenticated, from its host;
// anonymous on a server without authentication.
func principal(r *http.Request) broker.Principal {
	who := broker.Anonymous
	if c, ok := r.Context().Value(principalKey{}).(*caller); ok {
		who = c.who
	}
	if id := r.Header.Get(v1.HeaderClientID); id != "" {
		who.ClientID = id[:min(len(id), maxClientID)]
	}
	return who
}

// maxClientID bounds the client id a request names (quotas may name client ids).
const maxClientID = 255

// Principal is who a request served under the API's middleware calls (a mounted
// handler's request too: the connect REST API creates connectors as their caller).
func Principal(r *http.Request) broker.Principal { return principal(r) }

// remoteHost is the request's peer address without its port (ACLs may name hosts).
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// bearerToken returns the token of an "Authorization: Bearer TOKEN" header (the scheme
// is case-insensitive, RFC 9110), and whether the header was there at all.
func bearerToken(r *http.Request) (token string, present bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(tok), true
}

// errRevoked cancels the requests of a key revoked while they ran.
var errRevoked = errors.New("the API key was revoked")

// public says whether r is for a public mount (Mount.Public): its path, decoded and
// as sent (the one the router matches when they differ), both under the mount's.
func (a *API) public(r *http.Request) bool {
	under := func(p, prefix string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }
	for _, m := range a.mounts {
		if m.Public && !strings.HasPrefix(m.Path, "/v1/") && under(r.URL.Path, m.Path) &&
			(r.URL.RawPath == "" || under(r.URL.RawPath, m.Path)) {
			return true
		}
	}
	return false
}

// authMiddleware authenticates every request but the probes, the public mounts (the
// console's files) and /metrics when public. A request authenticated by a catalog key
// runs under a context that is cancelled if the key is revoked or expires meanwhile (a
// long poll, an SSE stream); its connection is then cut, not answered.
func (a *API) authMiddleware(next http.Handler) http.Handler {
	auth := a.auth
	if auth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.public(r) {
			next.ServeHTTP(w, dropBody(w, r))
			return
		}
		switch r.URL.Path {
		case "/healthz", "/readyz":
			next.ServeHTTP(w, dropBody(w, r))
			return
		case "/metrics":
			if a.cfg.Auth.PublicMetrics {
				next.ServeHTTP(w, dropBody(w, r))
				return
			}
		}
		c, present, err := authenticate(r, auth)
		if err != nil {
			a.unauthorized(w, r, present, err)
			return
		}
		c.who.Host = remoteHost(r)
		if info, ok := r.Context().Value(accessInfoKey{}).(*accessInfo); ok {
			info.who = c.who.Name
		}
		ctx := context.WithValue(r.Context(), principalKey{}, c)
		if c.keyID == "" {
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		var revoked atomic.Bool
		release, ok := auth.Track(c.keyID, func() {
			revoked.Store(true)
			cancel(errRevoked)
		})
		defer release()
		if !ok {
			a.unauthorized(w, r, true, errRevoked)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
		if revoked.Load() {
			// Cut the connection (HTTP/2: reset the stream): a revoked key's stream or
			// long poll ends without an answer that could look like an empty one.
			panic(http.ErrAbortHandler)
		}
	})
}

// authenticate finds the request's identity: a verified client certificate, else a
// bearer key. present says whether credentials were sent at all.
func authenticate(r *http.Request, auth Authenticator) (c *caller, present bool, err error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		name, err := auth.CertPrincipal(r.TLS.PeerCertificates[0])
		if err != nil {
			return nil, true, err
		}
		return &caller{who: broker.Principal{Name: name}}, true, nil
	}
	if user, pass, ok := r.BasicAuth(); ok {
		id, err := auth.AuthenticatePlain(r.Context(), user, pass)
		if err != nil {
			return nil, true, err
		}
		return &caller{who: broker.Principal{Name: id.Principal}, keyID: id.KeyID}, true, nil
	}
	token, present := bearerToken(r)
	if token == "" {
		return nil, present, errors.New("no API key")
	}
	id, err := auth.Authenticate(r.Context(), token)
	if err != nil {
		return nil, true, err
	}
	return &caller{who: broker.Principal{Name: id.Principal}, keyID: id.KeyID}, true, nil
}

// unauthorized answers 401 with the RFC 6750 challenge: a request without credentials
// gets the bare challenge; one with wrong credentials is told the token is invalid.
// The answer goes out at once, without a byte of the body read, and the connection is
// closed after it (dropBody): a caller not known has no claim on the node's time, and
// a connection kept open for its next request would be one more it could hold.
func (a *API) unauthorized(w http.ResponseWriter, r *http.Request, present bool, why error) {
	dropBody(w, r)
	w.Header().Set("Connection", "close")
	a.log.Debug("unauthenticated request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "why", why,
		"request_id", requestID(r.Context()))
	challenge := `Bearer realm="strata"`
	detail := "this server requires an API key: send Authorization: Bearer KEY"
	if present {
		challenge += `, error="invalid_token"`
		detail = "the API key is not valid: send Authorization: Bearer KEY with a key this server accepts"
	}
	w.Header().Set("WWW-Authenticate", challenge)
	writeProblem(w, r, newProblem(CodeUnauthorized, "%s", detail))
}

// dropBody makes sure a request answered without its body being read gets its answer
// at once and then loses its connection, without net/http reading the body first. By
// default the server, before it writes such an answer, reads up to 256 KiB of what is
// left of the body to keep the connection for another request — as long as the client
// takes to send it, without a deadline once the headers are in: an unauthenticated
// client that declared a Content-Length and sent nothing was never answered, and its
// connection held. "Connection: close" skips that read (the connection will not be
// reused); a read deadline already past makes the read that net/http still does when
// the handler returns, to close the body, fail at once. The request returned has no
// body, so that nothing downstream waits for it or lifts the deadline. Requests
// without a body are left alone: their connection is already being read in the
// background, which a deadline would cut.
func dropBody(w http.ResponseWriter, r *http.Request) *http.Request {
	if r.Body == nil || r.Body == http.NoBody {
		return r
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	r = r.WithContext(r.Context()) // a shallow copy: the caller's request is not changed
	r.Body, r.ContentLength = http.NoBody, 0
	return r
}
