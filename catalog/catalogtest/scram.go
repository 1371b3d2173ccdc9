package catalogtest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/strata-io/strata/catalog"
)

// runScram runs the conformance suite of catalog.Scram: credentials are stored per user
// and mechanism, replaced in place, deleted one at a time; every change bumps the
// security version and writes its audit record; invalid credentials and deletes of
// nothing change nothing.
func runScram(t *testing.T, open func(t *testing.T) catalog.Backend) {
	t.Run("lifecycle", func(t *testing.T) { testScramLifecycle(t, open(t)) })
	t.Run("bad_input_changes_nothing", func(t *testing.T) { testScramBadInput(t, open(t)) })
}

func testScramCred(user string, m catalog.ScramMechanism, fill byte) catalog.ScramCredential {
	return catalog.ScramCredential{User: user, Mechanism: m, Salt: bytes.Repeat([]byte{fill}, 24), Iterations: 4096,
		StoredKey: bytes.Repeat([]byte{fill + 1}, m.KeyLen()), ServerKey: bytes.Repeat([]byte{fill + 2}, m.KeyLen())}
}

func testScramLifecycle(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	v0, _, err := c.SecurityVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	audited := catalog.WithAudit(ctx, catalog.Audit{Principal: "User:admin", Action: "scram.upsert", ResourceType: "user", Resource: "alice"})
	a256 := testScramCred("alice", catalog.ScramSHA256, 1)
	a512 := testScramCred("alice", catalog.ScramSHA512, 2)
	b256 := testScramCred("bob", catalog.ScramSHA256, 3)
	for _, cr := range []catalog.ScramCredential{b256, a512, a256} {
		if err := c.UpsertScramCredential(audited, cr); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.ScramCredentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []catalog.ScramCredential{a256, a512, b256}
	if !scramEqual(got, want) {
		t.Fatalf("ScramCredentials = %+v, want %+v", got, want)
	}
	// Replacing changes the row in place.
	a256b := testScramCred("alice", catalog.ScramSHA256, 7)
	a256b.Iterations = 8192
	if err := c.UpsertScramCredential(ctx, a256b); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteScramCredential(audited, "bob", catalog.ScramSHA256); err != nil {
		t.Fatal(err)
	}
	got, err = c.ScramCredentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []catalog.ScramCredential{a256b, a512}; !scramEqual(got, want) {
		t.Fatalf("after replace and delete: %+v, want %+v", got, want)
	}
	v1, _, err := c.SecurityVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v1-v0 != 5 {
		t.Fatalf("security version moved by %d over 5 changes", v1-v0)
	}
	recs, err := c.AuditLog(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 { // three audited upserts and the audited delete
		t.Fatalf("%d audit records, want 4: %+v", len(recs), recs)
	}
}

func testScramBadInput(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	if err := c.UpsertScramCredential(ctx, testScramCred("alice", catalog.ScramSHA256, 1)); err != nil {
		t.Fatal(err)
	}
	v0, _, err := c.SecurityVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	few := testScramCred("alice", catalog.ScramSHA256, 9)
	few.Iterations = 4095
	many := testScramCred("alice", catalog.ScramSHA256, 9)
	many.Iterations = 16385
	shortKey := testScramCred("alice", catalog.ScramSHA512, 9)
	shortKey.StoredKey = shortKey.StoredKey[:32]
	noUser := testScramCred("", catalog.ScramSHA256, 9)
	ctrl := testScramCred("al\nice", catalog.ScramSHA256, 9)
	badMech := testScramCred("alice", catalog.ScramMechanism(3), 9)
	shortSalt := testScramCred("alice", catalog.ScramSHA256, 9)
	shortSalt.Salt = shortSalt.Salt[:4]
	for name, cr := range map[string]catalog.ScramCredential{"too few iterations": few, "too many iterations": many,
		"key of the wrong length": shortKey, "no user": noUser, "control character": ctrl, "unknown mechanism": badMech,
		"short salt": shortSalt} {
		if err := c.UpsertScramCredential(ctx, cr); !errors.Is(err, catalog.ErrScramInvalid) {
			t.Errorf("%s: %v, want ErrScramInvalid", name, err)
		}
	}
	audited := catalog.WithAudit(ctx, catalog.Audit{Principal: "User:admin", Action: "scram.delete", ResourceType: "user", Resource: "alice"})
	if err := c.DeleteScramCredential(audited, "alice", catalog.ScramSHA512); !errors.Is(err, catalog.ErrScramNotFound) {
		t.Errorf("deleting a mechanism the user has not: %v, want ErrScramNotFound", err)
	}
	if err := c.DeleteScramCredential(ctx, "nobody", catalog.ScramSHA256); !errors.Is(err, catalog.ErrScramNotFound) {
		t.Errorf("deleting an unknown user: %v, want ErrScramNotFound", err)
	}
	got, err := c.ScramCredentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []catalog.ScramCredential{testScramCred("alice", catalog.ScramSHA256, 1)}; !scramEqual(got, want) {
		t.Fatalf("after refused changes: %+v, want %+v", got, want)
	}
	if v1, _, err := c.SecurityVersion(ctx); err != nil || v1 != v0 {
		t.Fatalf("security version %d after refused changes, was %d (%v)", v1, v0, err)
	}
	if recs, err := c.AuditLog(ctx, 0, 100); err != nil || len(recs) != 0 {
		t.Fatalf("audit records of refused changes: %+v, %v", recs, err)
	}
}

func scramEqual(a, b []catalog.ScramCredential) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.User != y.User || x.Mechanism != y.Mechanism || x.Iterations != y.Iterations || !bytes.Equal(x.Salt, y.Salt) ||
			!bytes.Equal(x.StoredKey, y.StoredKey) || !bytes.Equal(x.ServerKey, y.ServerKey) {
			return false
		}
	}
	return true
}
