package security

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xdg-go/scram"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// scramStub is a Catalog with SCRAM credentials and nothing else (a fake for the
// logic's unit tests; the catalog's own behaviour is catalogtest's).
type scramStub struct{ creds []catalog.ScramCredential }

func (s *scramStub) Keys(context.Context) ([]catalog.APIKey, error) { return nil, nil }
func (s *scramStub) ACLs(context.Context) ([]acl.Binding, error)    { return nil, nil }
func (s *scramStub) ScramCredentials(context.Context) ([]catalog.ScramCredential, error) {
	return s.creds, nil
}
func (s *scramStub) SecurityVersion(context.Context) (int64, time.Time, error) {
	return int64(len(s.creds)), time.Now(), nil
}
func (s *scramStub) WatchSecurity(ctx context.Context, _ func()) error { <-ctx.Done(); return nil }

func credential(t testing.TB, h scram.HashGeneratorFcn, m catalog.ScramMechanism, user, pass string, iters int) catalog.ScramCredential {
	t.Helper()
	cl, err := h.NewClient(user, pass, "")
	if err != nil {
		t.Fatal(err)
	}
	salt := []byte("sixteen-byte-salt-for-tests")
	sc := cl.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: iters})
	return catalog.ScramCredential{User: user, Mechanism: m, Salt: salt, Iterations: int32(iters), StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}
}

// login runs a whole exchange between xdg-go/scram's client and the guard.
func login(g *Guard, h scram.HashGeneratorFcn, mech, user, pass string) (Identity, error) {
	cl, err := h.NewClient(user, pass, "")
	if err != nil {
		return Identity{}, err
	}
	conv := cl.NewConversation()
	l, err := g.StartScram(context.Background(), mech)
	if err != nil {
		return Identity{}, err
	}
	msg, _ := conv.Step("")
	for {
		out, id, done, err := l.Step([]byte(msg))
		if err != nil {
			return Identity{}, err
		}
		if done {
			if _, err := conv.Step(string(out)); err != nil || !conv.Valid() {
				return Identity{}, errors.New("the server's signature does not verify")
			}
			return id, nil
		}
		if msg, err = conv.Step(string(out)); err != nil {
			return Identity{}, err
		}
	}
}

func TestScramLogin(t *testing.T) {
	cat := &scramStub{creds: []catalog.ScramCredential{credential(t, scram.SHA512, catalog.ScramSHA512, "alice", "pw-a", 4096)}}
	g := New(Config{}, cat)
	if err := g.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	id, err := login(g, scram.SHA512, "SCRAM-SHA-512", "alice", "pw-a")
	if err != nil || id.Principal != "User:alice" || !isScramTrackID(id.KeyID) {
		t.Fatalf("login: %+v, %v", id, err)
	}
	release, ok := g.Track(id.KeyID, func() {})
	if !ok {
		t.Fatal("a live credential is not trackable")
	}
	release()
	for _, tc := range []struct{ name, mech, user, pass string }{
		{"wrong password", "SCRAM-SHA-512", "alice", "pw-b"},
		{"unknown user", "SCRAM-SHA-512", "bob", "pw-a"},
		{"other mechanism", "SCRAM-SHA-256", "alice", "pw-a"},
	} {
		h := scram.SHA512
		if tc.mech == "SCRAM-SHA-256" {
			h = scram.SHA256
		}
		if _, err := login(g, h, tc.mech, tc.user, tc.pass); !errors.Is(err, ErrAuthFailed) {
			t.Errorf("%s: %v, want ErrAuthFailed", tc.name, err)
		}
	}
	// A new password replaces the stored key: the old login's track id is dead.
	cut := make(chan struct{}, 1)
	if _, ok := g.Track(id.KeyID, func() { cut <- struct{}{} }); !ok {
		t.Fatal("not tracked")
	}
	cat.creds = append(cat.creds[:0], credential(t, scram.SHA512, catalog.ScramSHA512, "alice", "pw-new", 4096), catalog.ScramCredential{User: "x"})
	if err := g.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cut:
	default:
		t.Fatal("replacing the credential did not cut the connection")
	}
}

// BenchmarkScramLogin is the CPU one SCRAM login costs the node: the whole exchange
// with the client's work included (the PBKDF2 of 4096 iterations is the client's; the
// server's is two HMACs and a hash). Run: go test ./security -run - -bench ScramLogin
func BenchmarkScramLogin(b *testing.B) {
	for _, bc := range []struct {
		mech string
		h    scram.HashGeneratorFcn
		m    catalog.ScramMechanism
	}{{"SCRAM-SHA-256", scram.SHA256, catalog.ScramSHA256}, {"SCRAM-SHA-512", scram.SHA512, catalog.ScramSHA512}} {
		b.Run(bc.mech, func(b *testing.B) {
			g := New(Config{}, &scramStub{creds: []catalog.ScramCredential{credential(b, bc.h, bc.m, "alice", "pw", 4096)}})
			if err := g.Refresh(context.Background()); err != nil {
				b.Fatal(err)
			}
			// The client's salted password is cached by xdg-go's client across
			// conversations, as a real client's would be: what remains per login is
			// the server's side and the client's proof.
			cl, err := bc.h.NewClient("alice", "pw", "")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				conv := cl.NewConversation()
				l, err := g.StartScram(context.Background(), bc.mech)
				if err != nil {
					b.Fatal(err)
				}
				first, _ := conv.Step("")
				out, _, _, err := l.Step([]byte(first))
				if err != nil {
					b.Fatal(err)
				}
				final, err := conv.Step(string(out))
				if err != nil {
					b.Fatal(err)
				}
				if _, _, done, err := l.Step([]byte(final)); err != nil || !done {
					b.Fatal(err)
				}
			}
		})
	}
}
