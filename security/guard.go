// Package security is a node's view of who may do what: it authenticates the
// credentials the front ends receive (API keys, by flag or from the catalog; SASL/PLAIN
// with a key's id and secret; client certificates through a mapping) into principals,
// answers the broker core's authorization questions from the catalog's ACLs (package
// acl decides) and superusers, and cuts the open connections, streams and long polls of
// a key once it is revoked or expires. Keys and ACLs are cached: refreshed on the
// catalog's notifications, with the security version polled as the fallback, so a change
// reaches every node within Config.PollInterval at worst (250ms by default).
package security

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/ctxwait"
)

// BootstrapPrincipal is the principal of the keys given by flag (--api-keys): the
// operator's own, a superuser, to create the first catalog keys and ACLs with.
const BootstrapPrincipal = "User:bootstrap"

// AnonymousPrincipal names the caller of a node without authentication, in the audit
// log, as Kafka names it.
const AnonymousPrincipal = "User:ANONYMOUS"

// DefaultPollInterval is Config.PollInterval when it is zero.
const DefaultPollInterval = 250 * time.Millisecond

// ErrAuthFailed is wrapped by every refusal of credentials.
var ErrAuthFailed = errors.New("authentication failed")

// Config configures a Guard.
type Config struct {
	// StaticKeys are the bootstrap keys (--api-keys): each acts as BootstrapPrincipal.
	// They are not revocable but by a restart; their SASL username is StaticKeyID.
	StaticKeys []string
	// Required turns authentication on without static keys: catalog keys and client
	// certificates only.
	Required bool
	// Superusers may do everything, whatever the ACLs say ("User:NAME").
	Superusers []string
	// CertRules maps a client certificate's subject to a principal (ParseCertRules);
	// nil: DEFAULT, "User:" and the subject's distinguished name.
	CertRules *CertRules
	// PollInterval bounds how stale the cached keys and ACLs may get when notifications
	// are lost. Default DefaultPollInterval.
	PollInterval time.Duration
	// OAuth accepts JWT access tokens: OAUTHBEARER on the Kafka listener, and
	// Authorization: Bearer over HTTP. Zero: none.
	OAuth OAuthConfig
	Log   *slog.Logger
}

// Enabled says whether callers must authenticate (and ACLs are enforced).
func (c Config) Enabled() bool { return len(c.StaticKeys) > 0 || c.Required }

// Validate says what is wrong with c, for the flags' messages.
func (c Config) Validate() error {
	for _, s := range c.Superusers {
		if err := acl.ValidatePrincipal(s, false); err != nil {
			return fmt.Errorf("superuser: %w", err)
		}
	}
	return c.OAuth.ValidateOAuth(c.Enabled())
}

// Catalog is what a Guard reads (catalog.Security has it).
type Catalog interface {
	Keys(ctx context.Context) ([]catalog.APIKey, error)
	ACLs(ctx context.Context) ([]acl.Binding, error)
	ScramCredentials(ctx context.Context) ([]catalog.ScramCredential, error)
	SecurityVersion(ctx context.Context) (int64, time.Time, error)
	WatchSecurity(ctx context.Context, fn func()) error
}

// Guard is a node's security view. Its methods are safe for concurrent use.
type Guard struct {
	cfg        Config
	cat        Catalog // nil: static keys only
	log        *slog.Logger
	static     map[string][sha256.Size]byte // static key id → digest
	superusers map[string]bool

	view atomic.Pointer[view]
	// running is set while Run refreshes in the background; without it (Lambda, where
	// nothing runs between invocations) a stale view is refreshed on use.
	running atomic.Bool
	// lastMiss is when (unix ns) an unknown key last made the guard look again.
	lastMiss atomic.Int64
	refresh  sync.Mutex // one refresh at a time
	mu       sync.Mutex
	tracked  map[string]map[*tracker]struct{} // key id → its connections
	oauth    *oauth                           // nil: no OAUTHBEARER
	watchers map[*func()]struct{}             // WatchSecurity's callers, under mu
}

// view is one immutable snapshot of the catalog's keys and ACLs.
type view struct {
	version  int64
	byDigest map[[sha256.Size]byte]catalog.APIKey // keys not revoked
	byID     map[string]catalog.APIKey
	acls     *acl.Set
	scram    map[scramKey]catalog.ScramCredential
	// skew is the database clock minus the node clock when it was read: keys expire by
	// the database clock (docs/design.md "Catalog").
	skew time.Duration
	at   time.Time // node clock of the refresh
}

type tracker struct{ cut func() }

// New returns a guard over cat (nil: the static keys only). Call Refresh (or Run)
// before it answers for catalog keys.
func New(cfg Config, cat Catalog) *Guard {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Guard{
		cfg:        cfg,
		cat:        cat,
		log:        log.With("component", "security"),
		static:     make(map[string][sha256.Size]byte, len(cfg.StaticKeys)),
		superusers: map[string]bool{BootstrapPrincipal: true},
		tracked:    map[string]map[*tracker]struct{}{},
	}
	for _, k := range cfg.StaticKeys {
		g.static[StaticKeyID(k)] = sha256.Sum256([]byte(k))
	}
	for _, s := range cfg.Superusers {
		g.superusers[s] = true
	}
	if cfg.OAuth.Enabled() {
		g.oauth = newOAuth(cfg.OAuth, g.log)
	}
	g.view.Store(&view{acls: acl.NewSet(nil)})
	return g
}

// Enabled says whether callers must authenticate.
func (g *Guard) Enabled() bool { return g.cfg.Enabled() }

// StaticKeyID is a static key's id, its SASL/PLAIN username: the first 16 hex digits of
// its SHA-256 (printf %s "$KEY" | sha256sum | cut -c1-16). It names the key without
// revealing it. Catalog keys have ids of their own ("key-…").
func StaticKeyID(key string) string {
	d := sha256.Sum256([]byte(key))
	return hex.EncodeToString(d[:8])
}

// Identity is who a credential authenticated.
type Identity struct {
	Principal string
	// KeyID names the key used ("" for a certificate or a token; a SCRAM credential's
	// track id): its connections are cut when it is revoked.
	KeyID string
	// Expires, for an OAUTHBEARER token, is when the token expires: a connection it
	// authenticated must re-authenticate by then or be closed.
	Expires time.Time
}

// Authenticate maps a bearer secret to its key's identity. Static keys are compared in
// constant time against every digest; catalog keys are found by their digest's value
// (the digest of a secret of 256 random bits gives a timing attacker nothing).
func (g *Guard) Authenticate(ctx context.Context, secret string) (Identity, error) {
	if g.oauth != nil && looksLikeJWT(secret) {
		return g.AuthenticateToken(ctx, secret)
	}
	d := sha256.Sum256([]byte(secret))
	if id, ok := g.staticByDigest(d); ok {
		return Identity{Principal: BootstrapPrincipal, KeyID: id}, nil
	}
	v := g.current(ctx)
	k, ok := v.byDigest[d]
	if !ok {
		v = g.afterMiss(ctx)
		if k, ok = v.byDigest[d]; !ok {
			return Identity{}, fmt.Errorf("%w: unknown key", ErrAuthFailed)
		}
	}
	if !k.Live(v.dbNow()) {
		return Identity{}, fmt.Errorf("%w: key %s has expired", ErrAuthFailed, k.ID)
	}
	return Identity{Principal: k.Principal, KeyID: k.ID}, nil
}

// AuthenticatePlain checks SASL/PLAIN credentials: the username is a key's id, the
// password its secret. A secret that is a valid key under another id is refused: the
// username names the key.
func (g *Guard) AuthenticatePlain(ctx context.Context, username, password string) (Identity, error) {
	d := sha256.Sum256([]byte(password))
	if want, ok := g.static[username]; ok {
		if subtle.ConstantTimeCompare(want[:], d[:]) == 1 {
			return Identity{Principal: BootstrapPrincipal, KeyID: username}, nil
		}
	} else {
		v := g.current(ctx)
		if _, ok := v.byID[username]; !ok {
			v = g.afterMiss(ctx)
		}
		if k, ok := v.byID[username]; ok && subtle.ConstantTimeCompare(k.Digest[:], d[:]) == 1 {
			if !k.Live(v.dbNow()) {
				return Identity{}, fmt.Errorf("%w: key %s has expired", ErrAuthFailed, k.ID)
			}
			return Identity{Principal: k.Principal, KeyID: k.ID}, nil
		}
	}
	if _, err := g.Authenticate(ctx, password); err == nil {
		return Identity{}, fmt.Errorf("%w: the username is not the id of the key given as password", ErrAuthFailed)
	}
	return Identity{}, fmt.Errorf("%w: unknown key", ErrAuthFailed)
}

func (g *Guard) staticByDigest(d [sha256.Size]byte) (string, bool) {
	found := ""
	match := 0
	for id, k := range g.static {
		if subtle.ConstantTimeCompare(k[:], d[:]) == 1 {
			found, match = id, 1
		}
	}
	return found, match == 1
}

// Allowed answers the broker core: superusers may do everything; anyone else what the
// catalog's ACLs allow (package acl's rule), from the host they connect from.
func (g *Guard) Allowed(who broker.Principal, op acl.Operation, r acl.Resource) bool {
	if g.superusers[who.Name] {
		return true
	}
	host := who.Host
	if host == "" {
		host = acl.Wildcard
	}
	return g.view.Load().acls.Allowed(who.Name, host, op, r)
}

// Superuser says whether principal is one.
func (g *Guard) Superuser(principal string) bool { return g.superusers[principal] }

// Track registers cut to be called once key id is revoked or expires: a connection, a
// stream or a long poll authenticated by it. ok is false when the key is already not
// live (it was revoked between authentication and now): the caller refuses. release
// unregisters.
func (g *Guard) Track(id string, cut func()) (release func(), ok bool) {
	t := &tracker{cut: cut}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, static := g.static[id]; !static {
		if !g.view.Load().live(id) {
			return func() {}, false
		}
	}
	set := g.tracked[id]
	if set == nil {
		set = map[*tracker]struct{}{}
		g.tracked[id] = set
	}
	set[t] = struct{}{}
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if set := g.tracked[id]; set != nil {
			delete(set, t)
			if len(set) == 0 {
				delete(g.tracked, id)
			}
		}
	}, true
}

// cutDead cuts every tracked connection of a catalog key that is no longer live in v.
func (g *Guard) cutDead(v *view) {
	var cuts []func()
	var ids []string
	g.mu.Lock()
	now := v.dbNow()
	for id, set := range g.tracked {
		if _, static := g.static[id]; static {
			continue
		}
		if v.liveAt(id, now) {
			continue
		}
		for t := range set {
			cuts = append(cuts, t.cut)
		}
		ids = append(ids, id)
		delete(g.tracked, id)
	}
	g.mu.Unlock()
	for _, cut := range cuts {
		cut()
	}
	if len(cuts) > 0 {
		g.log.Info("cut the connections of revoked or expired keys", "keys", ids, "connections", len(cuts))
	}
}

func (v *view) dbNow() time.Time { return time.Now().Add(v.skew) }

// live says whether the catalog key or SCRAM credential a track id names still
// authenticates.
func (v *view) live(id string) bool { return v.liveAt(id, v.dbNow()) }

func (v *view) liveAt(id string, now time.Time) bool {
	if isScramTrackID(id) {
		return v.scramLive(id)
	}
	k, ok := v.byID[id]
	return ok && k.Live(now)
}

// current is the view to answer from: refreshed first when no Run loop keeps it fresh
// and it is older than the poll interval.
func (g *Guard) current(ctx context.Context) *view {
	v := g.view.Load()
	if g.cat != nil && !g.running.Load() && time.Since(v.at) > g.cfg.PollInterval {
		if err := g.Refresh(ctx); err != nil {
			g.log.Warn("refresh keys and ACLs", "err", err)
		}
		v = g.view.Load()
	}
	return v
}

// missInterval spaces the refreshes an unknown key triggers: a key made a moment ago
// on another node works at once, and a stream of wrong keys costs the catalog a
// version read per interval at most.
const missInterval = 100 * time.Millisecond

// afterMiss is the view to look an unknown key up in again: one refreshed (if the
// catalog's version moved: the key may be new) by a look that began after the miss.
// Looks are at most one per missInterval; a miss inside the interval waits for the
// next look rather than answer from a view that may predate its key — a credential made
// just after another caller's miss must still work at once — so a stream of wrong keys
// waits up to an interval each and costs the catalog a version read per interval.
func (g *Guard) afterMiss(ctx context.Context) *view {
	if g.cat == nil {
		return g.view.Load()
	}
	missed := time.Now().UnixNano()
	for {
		last := g.lastMiss.Load()
		if last >= missed {
			// A look began after this miss: wait for it to end.
			g.refresh.Lock()
			g.refresh.Unlock()
			return g.view.Load()
		}
		now := time.Now().UnixNano()
		if wait := time.Duration(last + int64(missInterval) - now); wait > 0 {
			if ctxwait.Sleep(ctx, wait) != nil {
				return g.view.Load()
			}
			continue
		}
		// The look is claimed under the refresh lock, so a caller that sees the claim
		// and waits on the lock waits for the look itself.
		g.refresh.Lock()
		if !g.lastMiss.CompareAndSwap(last, time.Now().UnixNano()) {
			g.refresh.Unlock()
			continue
		}
		err := g.load(ctx, g.view.Load().version)
		g.refresh.Unlock()
		if err != nil {
			g.log.Warn("refresh keys and ACLs", "err", err)
		}
		return g.view.Load()
	}
}

// Refresh reads keys and ACLs from the catalog now, and cuts the connections of keys
// no longer live.
func (g *Guard) Refresh(ctx context.Context) error {
	if g.oauth != nil {
		if err := g.oauth.prime(ctx); err != nil {
			g.log.Warn("OAUTHBEARER: could not read the issuer's key set yet; tokens are refused until it is read", "err", err)
		}
	}
	if g.cat == nil {
		return nil
	}
	g.refresh.Lock()
	defer g.refresh.Unlock()
	return g.load(ctx, -1)
}

// load reads the catalog unless its version is still known (known >= 0); the caller
// holds g.refresh.
func (g *Guard) load(ctx context.Context, known int64) error {
	start := time.Now()
	version, dbNow, err := g.cat.SecurityVersion(ctx)
	if err != nil {
		return err
	}
	skew := dbNow.Sub(start.Add(time.Since(start) / 2))
	old := g.view.Load()
	if version == known {
		nv := *old
		nv.skew, nv.at = skew, time.Now()
		g.view.Store(&nv)
		g.cutDead(&nv) // expiries
		return nil
	}
	keys, err := g.cat.Keys(ctx)
	if err != nil {
		return err
	}
	bindings, err := g.cat.ACLs(ctx)
	if err != nil {
		return err
	}
	creds, err := g.cat.ScramCredentials(ctx)
	if err != nil {
		return err
	}
	v := &view{version: version, byDigest: map[[sha256.Size]byte]catalog.APIKey{}, byID: map[string]catalog.APIKey{},
		acls: acl.NewSet(bindings), scram: make(map[scramKey]catalog.ScramCredential, len(creds)), skew: skew, at: time.Now()}
	for _, c := range creds {
		v.scram[scramKey{user: c.User, mech: c.Mechanism}] = c
	}
	for _, k := range keys {
		if k.RevokedAt.IsZero() {
			v.byDigest[k.Digest] = k
			v.byID[k.ID] = k
		}
	}
	g.view.Store(v)
	g.cutDead(v)
	if old.version != version {
		g.mu.Lock()
		for fn := range g.watchers {
			(*fn)()
		}
		g.mu.Unlock()
	}
	if old.version != version {
		g.log.Debug("keys and ACLs refreshed", "version", version, "keys", len(v.byID), "acls", v.acls.Len())
	}
	return nil
}

// SecurityVersion answers the security version of the guard's view and the database
// clock as of its last refresh, without asking the catalog. With WatchSecurity it makes
// the guard the node's one feed of security changes: what else keeps a view of that
// state (the quota enforcer) follows the guard rather than listen and poll the catalog
// again.
func (g *Guard) SecurityVersion(context.Context) (int64, time.Time, error) {
	v := g.view.Load()
	return v.version, time.Now().Add(v.skew), nil
}

// WatchSecurity calls fn after every refresh that finds a new security version, until
// ctx ends (it returns nil then). fn runs on the refreshing goroutine and must not
// block.
func (g *Guard) WatchSecurity(ctx context.Context, fn func()) error {
	g.mu.Lock()
	if g.watchers == nil {
		g.watchers = map[*func()]struct{}{}
	}
	g.watchers[&fn] = struct{}{}
	g.mu.Unlock()
	<-ctx.Done()
	g.mu.Lock()
	delete(g.watchers, &fn)
	g.mu.Unlock()
	return nil
}

// Run keeps the view fresh until ctx ends: a refresh on every notification of a
// change, and a poll of the security version every PollInterval (which also cuts the
// connections of keys that expired). Catalog errors are logged and retried; it returns
// nil when ctx ends.
func (g *Guard) Run(ctx context.Context) error {
	if g.cat == nil {
		<-ctx.Done()
		return nil
	}
	g.running.Store(true)
	defer g.running.Store(false)
	changed := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	wg.Go(func() {
		err := g.cat.WatchSecurity(watchCtx, func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		})
		if err != nil && watchCtx.Err() == nil {
			g.log.Warn("security notifications ended; polling only", "err", err)
		}
	})
	t := time.NewTicker(g.cfg.PollInterval)
	defer t.Stop()
	failing := false
	for {
		known := g.view.Load().version
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			known = -1
		case <-t.C:
		}
		g.refresh.Lock()
		err := g.load(ctx, known)
		g.refresh.Unlock()
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			g.log.Warn("refresh keys and ACLs: keeping the last view", "err", err)
		case err == nil && failing:
			failing = false
			g.log.Info("refresh keys and ACLs: the catalog answers again")
		}
	}
}
