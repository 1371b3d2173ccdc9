package catalogtest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/strata-io/strata/catalog"
)

// runRegistry runs the conformance suite of catalog.Registry. open returns a fresh
// catalog for each subtest (ids and subjects are counted whole).
func runRegistry(t *testing.T, open func(t *testing.T) catalog.Backend) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c catalog.Backend)
	}{
		{"register/ids_and_versions", testRegisterIDs},
		{"register/check_sees_live_versions", testRegisterCheck},
		{"register/concurrent_one_id", testRegisterConcurrent},
		{"register/import", testRegisterImport},
		{"references", testReferences},
		{"delete/versions", testDeleteVersions},
		{"delete/subject", testDeleteSubject},
		{"config", testRegistryConfig},
		{"audit", testRegistryAudit},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func newSchema(subject, text string) catalog.NewSchema {
	return catalog.NewSchema{Subject: subject, Schema: catalog.Schema{Type: "AVRO", Text: text, Fingerprint: "fp:" + text}}
}

func pass([]catalog.SubjectSchema) error { return nil }

func mustRegister(t *testing.T, c catalog.Registry, s catalog.NewSchema) catalog.SubjectSchema {
	t.Helper()
	out, _, err := c.RegisterSchema(context.Background(), s, pass)
	if err != nil {
		t.Fatalf("register %s %q: %v", s.Subject, s.Text, err)
	}
	return out
}

func testRegisterIDs(t *testing.T, c catalog.Backend) {
	ctx := context.Background()
	a := mustRegister(t, c, newSchema("orders-value", `"string"`))
	if a.ID != 1 || a.Version != 1 || a.Subject != "orders-value" {
		t.Fatalf("first registration: %+v, want id 1 version 1", a)
	}
	again, created, err := c.RegisterSchema(ctx, newSchema("orders-value", `"string"`), func([]catalog.SubjectSchema) error {
		return errors.New("check must not run for a schema the subject holds")
	})
	if err != nil || created || again.ID != 1 || again.Version != 1 {
		t.Fatalf("same schema again: %+v created %v err %v, want id 1 version 1, not created", again, created, err)
	}
	b := mustRegister(t, c, newSchema("orders-value", `"long"`))
	if b.ID != 2 || b.Version != 2 {
		t.Fatalf("second schema: %+v, want id 2 version 2", b)
	}
	other := mustRegister(t, c, newSchema("payments-value", `"string"`))
	if other.ID != 1 || other.Version != 1 {
		t.Fatalf("the same schema under another subject: %+v, want id 1 version 1", other)
	}
	s, err := c.SchemaByID(ctx, 2)
	if err != nil || s.Text != `"long"` || s.Type != "AVRO" {
		t.Fatalf("SchemaByID(2) = %+v, %v", s, err)
	}
	if _, err := c.SchemaByID(ctx, 99); !errors.Is(err, catalog.ErrSchemaNotFound) {
		t.Fatalf("SchemaByID(99): %v, want ErrSchemaNotFound", err)
	}
	us, err := c.SchemaUsages(ctx, 1, false)
	if err != nil || len(us) != 2 || us[0].Subject != "orders-value" || us[1].Subject != "payments-value" {
		t.Fatalf("SchemaUsages(1) = %+v, %v", us, err)
	}
	subs, err := c.Subjects(ctx, false)
	if err != nil || !slices.Equal(subs, []string{"orders-value", "payments-value"}) {
		t.Fatalf("Subjects = %v, %v", subs, err)
	}
	vs, err := c.SubjectSchemas(ctx, "orders-value", false)
	if err != nil || len(vs) != 2 || vs[0].Text != `"string"` || vs[1].Version != 2 {
		t.Fatalf("SubjectSchemas = %+v, %v", vs, err)
	}
	if vs, err := c.SubjectSchemas(ctx, "nothing", true); err != nil || len(vs) != 0 {
		t.Fatalf("SubjectSchemas(unknown) = %+v, %v", vs, err)
	}
}

func testRegisterCheck(t *testing.T, c catalog.Backend) {
	ctx := context.Background()
	mustRegister(t, c, newSchema("s", `"a"`))
	mustRegister(t, c, newSchema("s", `"b"`))
	if err := c.DeleteSchemaVersion(ctx, "s", 1, false); err != nil {
		t.Fatal(err)
	}
	refuse := errors.New("incompatible")
	var seen []int32
	_, _, err := c.RegisterSchema(ctx, newSchema("s", `"c"`), func(live []catalog.SubjectSchema) error {
		for _, v := range live {
			seen = append(seen, v.Version)
		}
		return refuse
	})
	if !errors.Is(err, refuse) || !slices.Equal(seen, []int32{2}) {
		t.Fatalf("refused registration: err %v, check saw %v, want the check's error and [2]", err, seen)
	}
	if vs, _ := c.SubjectSchemas(ctx, "s", true); len(vs) != 2 {
		t.Fatalf("a refused registration wrote: %+v", vs)
	}
	next := mustRegister(t, c, newSchema("s", `"c"`))
	if next.ID != 3 || next.Version != 3 {
		t.Fatalf("after a refusal: %+v, want id 3 (no id taken by the refusal) version 3", next)
	}
	// A soft-deleted schema registered again takes a new version, and its old id.
	again := mustRegister(t, c, newSchema("s", `"a"`))
	if again.ID != 1 || again.Version != 4 {
		t.Fatalf("re-registering a soft-deleted schema: %+v, want id 1 version 4", again)
	}
}

func testRegisterConcurrent(t *testing.T, c catalog.Backend) {
	ctx := context.Background()
	const n = 8
	var wg sync.WaitGroup
	ids := make([]int64, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			s := newSchema("subject-"+string(rune('a'+i)), `"same"`)
			out, _, err := c.RegisterSchema(ctx, s, pass)
			ids[i], errs[i] = out.ID, err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("concurrent registrations of one schema: ids %v errs %v, want one id", ids, errs)
		}
	}
}

func testRegisterImport(t *testing.T, c catalog.Backend) {
	ctx := context.Background()
	s := newSchema("imp", `"x"`)
	s.ID, s.Version = 100, 7
	out, created, err := c.RegisterSchema(ctx, s, pass)
	if err != nil || !created || out.ID != 100 || out.Version != 7 {
		t.Fatalf("import: %+v %v %v", out, created, err)
	}
	clash := newSchema("imp2", `"y"`)
	clash.ID = 100
	if _, _, err := c.RegisterSchema(ctx, clash, pass); !errors.Is(err, catalog.ErrSchemaIDConflict) {
		t.Fatalf("import under a taken id: %v, want ErrSchemaIDConflict", err)
	}
	dup := newSchema("imp", `"z"`)
	dup.ID, dup.Version = 101, 7
	if _, _, err := c.RegisterSchema(ctx, dup, pass); !errors.Is(err, catalog.ErrVersionExists) {
		t.Fatalf("import at a taken version: %v, want ErrVersionExists", err)
	}
	// Ids assigned after an import start above it: never one handed out before.
	next := mustRegister(t, c, newSchema("after", `"w"`))
	if next.ID != 101 {
		t.Fatalf("after importing id 100: id %d, want 101", next.ID)
	}
}

func testReferences(t *testing.T, c catalog.Backend) {
	ctx := context.Background()
	base := mustRegister(t, c, newSchema("address", `{"type":"record","name":"Address","fields":[]}`))
	missing := newSchema("user", `{"type":"record","name":"User","fields":[{"name":"a","type":"Address"}]}`)
	missing.References = []catalog.SchemaReference{{Name: "Address", Subject: "address", Version: 9}}
	if _, _, err := c.RegisterSchema(ctx, missing, pass); !errors.Is(err, catalog.ErrReferenceNotFound) {
		t.Fatalf("a reference to a missing version: %v, want ErrReferenceNotFound", err)
	}
	user := missing
	user.References = []catalog.SchemaReference{{Name: "Address", Subject: "address", Version: base.Version}}
	u := mustRegister(t, c, user)
	got, err := c.SchemaByID(ctx, u.ID)
	if err != nil || !slices.Equal(got.References, user.References) {
		t.Fatalf("references stored: %+v, %v", got.References, err)
	}
	ids, err := c.ReferencedBy(ctx, "address", 1)
	if err != nil || !slices.Equal(ids, []int64{u.ID}) {
		t.Fatalf("ReferencedBy = %v, %v", ids, err)
	}
	if err := c.DeleteSchemaVersion(ctx, "address", 1, false); !errors.Is(err, catalog.ErrReferenceExists) {
		t.Fatalf("deleting a referenced version: %v, want ErrReferenceExists", err)
	}
	if _, err := c.DeleteSubject(ctx, "address", false); !errors.Is(err, catalog.ErrReferenceExists) {
		t.Fatalf("deleting a referenced subject: %v, want ErrReferenceExists", err)
	}
	if _, err := c.DeleteSubject(ctx, "user", false); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSchemaVersion(ctx, "address", 1, false); err != nil {
		t.Fatalf("once the referrer is deleted: %v", err)
	}
}

func testDeleteVersions(t *testing.T, c catalog.Backend) {
	ctx := context.Background()
	mustRegister(t, c, newSchema("d", `"a"`))
	mustRegister(t, c, newSchema("d", `"b"`))
	for _, tc := range []struct {
		version   int32
		permanent bool
		want      error
	}{
		{3, false, catalog.ErrVersionNotFound},
		{1, true, catalog.ErrVersionNotSoftDeleted},
		{1, false, nil},
		{1, false, catalog.ErrVersionSoftDeleted},
		{1, true, nil},
		{1, true, catalog.ErrVersionNotFound},
	} {
		if err := c.DeleteSchemaVersion(ctx, "d", tc.version, tc.permanent); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Fatalf("delete version %d permanent %v: %v, want %v", tc.version, tc.permanent, err, tc.want)
		}
	}
	if err := c.DeleteSchemaVersion(ctx, "none", 1, false); !errors.Is(err, catalog.ErrSubjectNotFound) {
		t.Fatalf("a version of an unknown subject: %v", err)
	}
	vs, _ := c.SubjectSchemas(ctx, "d", true)
	if len(vs) != 1 || vs[0].Version != 2 {
		t.Fatalf("after deleting version 1 for good: %+v", vs)
	}
	if _, err := c.SchemaByID(ctx, 1); !errors.Is(err, catalog.ErrSchemaNotFound) {
		t.Fatalf("a schema no version holds any more: %v, want ErrSchemaNotFound", err)
	}
	// Version numbers are not reused: the next registration is 3.
	if v := mustRegister(t, c, newSchema("d", `"c"`)); v.Version != 3 {
		t.Fatalf("next version %d, want 3", v.Version)
	}
}

func testDeleteSubject(t *testing.T, c catalog.Backend) {
	ctx := context.Background()
	mustRegister(t, c, newSchema("x", `"a"`))
	mustRegister(t, c, newSchema("x", `"b"`))
	if _, err := c.SetRegistryConfig(ctx, "x", catalog.RegistryConfig{Compatibility: "NONE"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteSubject(ctx, "x", true); !errors.Is(err, catalog.ErrSubjectNotSoftDeleted) {
		t.Fatalf("permanent delete first: %v", err)
	}
	vs, err := c.DeleteSubject(ctx, "x", false)
	if err != nil || !slices.Equal(vs, []int32{1, 2}) {
		t.Fatalf("soft delete: %v %v", vs, err)
	}
	if _, err := c.DeleteSubject(ctx, "x", false); !errors.Is(err, catalog.ErrSubjectSoftDeleted) {
		t.Fatalf("soft delete twice: %v", err)
	}
	if subs, _ := c.Subjects(ctx, false); len(subs) != 0 {
		t.Fatalf("subjects after soft delete: %v", subs)
	}
	if subs, _ := c.Subjects(ctx, true); !slices.Equal(subs, []string{"x"}) {
		t.Fatalf("subjects with deleted: %v", subs)
	}
	if vs, err := c.DeleteSubject(ctx, "x", true); err != nil || !slices.Equal(vs, []int32{1, 2}) {
		t.Fatalf("permanent delete: %v %v", vs, err)
	}
	if cfg, _ := c.RegistryConfig(ctx, "x"); cfg != (catalog.RegistryConfig{}) {
		t.Fatalf("config survived the permanent delete: %+v", cfg)
	}
	if _, err := c.DeleteSubject(ctx, "x", false); !errors.Is(err, catalog.ErrSubjectNotFound) {
		t.Fatalf("deleted subject: %v", err)
	}
}

func testRegistryConfig(t *testing.T, c catalog.Backend) {
	ctx := context.Background()
	if cfg, err := c.RegistryConfig(ctx, ""); err != nil || cfg != (catalog.RegistryConfig{}) {
		t.Fatalf("fresh config: %+v %v", cfg, err)
	}
	if cfg, err := c.SetRegistryConfig(ctx, "", catalog.RegistryConfig{Compatibility: "FULL"}); err != nil || cfg.Compatibility != "FULL" {
		t.Fatalf("set: %+v %v", cfg, err)
	}
	if cfg, err := c.SetRegistryConfig(ctx, "", catalog.RegistryConfig{Mode: "READONLY"}); err != nil || cfg != (catalog.RegistryConfig{Compatibility: "FULL", Mode: "READONLY"}) {
		t.Fatalf("set mode keeps the level: %+v %v", cfg, err)
	}
	if cfg, _ := c.RegistryConfig(ctx, "s"); cfg != (catalog.RegistryConfig{}) {
		t.Fatalf("a subject does not see the registry's own: %+v", cfg)
	}
	before, err := c.DeleteRegistryConfig(ctx, "", true, false)
	if err != nil || before.Compatibility != "FULL" {
		t.Fatalf("delete: %+v %v", before, err)
	}
	if cfg, _ := c.RegistryConfig(ctx, ""); cfg != (catalog.RegistryConfig{Mode: "READONLY"}) {
		t.Fatalf("after deleting the level: %+v", cfg)
	}
}

func testRegistryAudit(t *testing.T, c catalog.Backend) {
	ctx := context.Background()
	audited := func(action string) context.Context {
		return catalog.WithAudit(ctx, catalog.Audit{Principal: "User:alice", Action: action, ResourceType: "subject", Resource: "a"})
	}
	if _, _, err := c.RegisterSchema(audited("subject.register"), newSchema("a", `"a"`), pass); err != nil {
		t.Fatal(err)
	}
	// Refused: no record.
	if _, _, err := c.RegisterSchema(audited("subject.register"), newSchema("a", `"b"`), func([]catalog.SubjectSchema) error { return errors.New("no") }); err == nil {
		t.Fatal("refusal did not refuse")
	}
	if _, err := c.DeleteSubject(audited("subject.delete"), "a", false); err != nil {
		t.Fatal(err)
	}
	recs, err := c.AuditLog(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range recs {
		actions = append(actions, r.Action)
	}
	if !slices.Equal(actions, []string{"subject.register", "subject.delete"}) {
		t.Fatalf("audit log: %v", actions)
	}
}
