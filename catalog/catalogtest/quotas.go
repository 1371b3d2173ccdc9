package catalogtest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/strata-io/strata/catalog"
)

// runQuotas runs the conformance suite of catalog.Quotas and the caps per principal
// (catalog.WithOwner) on fresh catalogs.
func runQuotas(t *testing.T, open func(t *testing.T) catalog.Backend) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c catalog.Backend)
	}{
		{"alter_and_list", testQuotaAlter},
		{"bad_input_changes_nothing", testQuotaBadInput},
		{"caps", testQuotaCaps},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func testQuotaAlter(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	v0, _, err := c.SecurityVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	alice := catalog.QuotaEntity{User: "User:alice"}
	both := catalog.QuotaEntity{User: catalog.DefaultEntity, ClientID: "app"}
	if err := c.AlterQuotas(ctx, []catalog.QuotaAlteration{
		{Entity: alice, Set: map[string]float64{catalog.QuotaProducerByteRate: 1 << 20, catalog.QuotaTopicCount: 5}},
		{Entity: both, Set: map[string]float64{catalog.QuotaRequestPercentage: 12.5}},
	}); err != nil {
		t.Fatal(err)
	}
	v1, _, err := c.SecurityVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v1 <= v0 {
		t.Errorf("security version %d after altering quotas, was %d: a change must bump it", v1, v0)
	}
	want := []catalog.QuotaEntry{
		{Entity: both, Values: map[string]float64{catalog.QuotaRequestPercentage: 12.5}},
		{Entity: alice, Values: map[string]float64{catalog.QuotaProducerByteRate: 1 << 20, catalog.QuotaTopicCount: 5}},
	}
	got, err := c.QuotaEntries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("QuotaEntries = %+v, want %+v", got, want)
	}
	// Overwrite one key, remove another; removing every key removes the entity.
	if err := c.AlterQuotas(ctx, []catalog.QuotaAlteration{
		{Entity: alice, Set: map[string]float64{catalog.QuotaProducerByteRate: 2048}, Remove: []string{catalog.QuotaTopicCount}},
		{Entity: both, Remove: []string{catalog.QuotaRequestPercentage}},
	}); err != nil {
		t.Fatal(err)
	}
	got, err = c.QuotaEntries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want = []catalog.QuotaEntry{{Entity: alice, Values: map[string]float64{catalog.QuotaProducerByteRate: 2048}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("QuotaEntries after the second alteration = %+v, want %+v", got, want)
	}
}

func testQuotaBadInput(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	good := catalog.QuotaAlteration{Entity: catalog.QuotaEntity{User: "User:bob"}, Set: map[string]float64{catalog.QuotaProducerByteRate: 100}}
	for name, bad := range map[string]catalog.QuotaAlteration{
		"unknown key":        {Entity: catalog.QuotaEntity{User: "User:bob"}, Set: map[string]float64{"produce_rate": 1}},
		"negative":           {Entity: catalog.QuotaEntity{User: "User:bob"}, Set: map[string]float64{catalog.QuotaConsumerByteRate: -1}},
		"fraction of a long": {Entity: catalog.QuotaEntity{User: "User:bob"}, Set: map[string]float64{catalog.QuotaProducerByteRate: 1.5}},
		"no entity":          {Set: map[string]float64{catalog.QuotaProducerByteRate: 1}},
		"not a principal":    {Entity: catalog.QuotaEntity{User: "bob"}, Set: map[string]float64{catalog.QuotaProducerByteRate: 1}},
		"cap per client":     {Entity: catalog.QuotaEntity{User: "User:bob", ClientID: "x"}, Set: map[string]float64{catalog.QuotaTopicCount: 1}},
	} {
		v0, _, _ := c.SecurityVersion(ctx)
		// The good alteration rides along: the call is all or nothing.
		err := c.AlterQuotas(ctx, []catalog.QuotaAlteration{good, bad})
		if !errors.Is(err, catalog.ErrInvalidQuota) {
			t.Errorf("%s: AlterQuotas = %v, want ErrInvalidQuota", name, err)
		}
		v1, _, _ := c.SecurityVersion(ctx)
		got, err := c.QuotaEntries(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 0 || v1 != v0 {
			t.Errorf("%s: refused alteration left %+v (version %d → %d)", name, got, v0, v1)
		}
	}
}

func testQuotaCaps(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	owner := catalog.WithOwner(ctx, catalog.Owner{Principal: "User:capped", TopicCap: 2, ConnectCap: 1})
	a, b, d := Name(t, "a"), Name(t, "b"), Name(t, "c")
	for _, n := range []string{a, b} {
		if _, err := c.CreateTopic(owner, n, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateTopic(owner, d, 1, nil); !errors.Is(err, catalog.ErrCapReached) {
		t.Fatalf("third topic under topic_count 2: %v, want ErrCapReached", err)
	}
	if _, err := c.Topic(ctx, d); !errors.Is(err, catalog.ErrTopicNotFound) {
		t.Errorf("the refused topic exists: %v", err)
	}
	// Another principal is not counted against it; a deleted topic stops counting.
	if _, err := c.CreateTopic(catalog.WithOwner(ctx, catalog.Owner{Principal: "User:other", TopicCap: 0, ConnectCap: -1}), d, 1, nil); !errors.Is(err, catalog.ErrCapReached) {
		t.Fatalf("topic under topic_count 0: %v, want ErrCapReached", err)
	}
	if _, err := c.CreateTopic(ctx, d, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTopic(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(owner, a, 1, nil); err != nil {
		t.Fatalf("a topic after deleting one under the cap: %v", err)
	}
	spec := func(name string) catalog.ConnectorSpec {
		return catalog.ConnectorSpec{Name: name, Type: catalog.ConnectorSource, Principal: "User:capped", Config: map[string]string{"connector.class": "FileStreamSource"}}
	}
	if _, _, err := c.PutConnector(owner, spec("conn-1"), false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PutConnector(owner, spec("conn-1"), true); err != nil {
		t.Fatalf("updating the connector it has under connector_count 1: %v", err)
	}
	if _, _, err := c.PutConnector(owner, spec("conn-2"), false); !errors.Is(err, catalog.ErrCapReached) {
		t.Fatalf("second connector under connector_count 1: %v, want ErrCapReached", err)
	}
	if cs, err := c.Connectors(ctx); err != nil || len(cs) != 1 {
		t.Errorf("connectors after the refusal: %d, %v; want 1", len(cs), err)
	}
}
