package broker

import (
	"slices"
	"testing"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// TestInternalTopics: the offsets topic is listed (in name order), described by name
// and by its fixed id while no topic has its name, to whoever may describe it; it is
// never auto-created, and a subscription pattern that names it makes it.
func TestInternalTopics(t *testing.T) {
	b, cat := newRealCore(t)
	ctx, who := t.Context(), Principal{Name: "User:p"}
	for _, n := range []string{"A", "b"} {
		if _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(ts []catalog.Topic, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tp := range ts {
			out = append(out, tp.Name)
		}
		return out
	}
	if got := names(b.ListedTopics(ctx, who)); !slices.Equal(got, []string{"A", OffsetsTopic, "b"}) {
		t.Fatalf("listed %v", got)
	}
	if got := names(b.Topics(ctx, who)); !slices.Equal(got, []string{"A", "b"}) {
		t.Fatalf("Topics lists %v: the offsets topic is listed only for the Kafka protocol", got)
	}
	if !InternalTopic(OffsetsTopic) || InternalTopic("b") {
		t.Fatal("InternalTopic")
	}

	tp, created, err := b.DescribeTopic(ctx, who, OffsetsTopic, 3)
	if err != nil || created || tp.UUID != OffsetsTopicID || tp.Partitions != 1 {
		t.Fatalf("described %+v, created %v: %v", tp, created, err)
	}
	if _, err := cat.Topic(ctx, OffsetsTopic); err == nil {
		t.Fatal("the offsets topic was auto-created")
	}
	if tp, err := b.DescribeTopicByUUID(ctx, who, OffsetsTopicID); err != nil || tp.Name != OffsetsTopic {
		t.Fatalf("by id: %+v, %v", tp, err)
	}
	wantCode(t, second(b.TopicByUUID(ctx, who, OffsetsTopicID)), CodeTopicNotFound)

	// Auto-creation: under CreateTopic's rules, with the partitions asked for; a
	// second call reads it.
	wantCode(t, thrd(b.DescribeTopic(ctx, who, "missing", 0)), CodeTopicNotFound)
	wantCode(t, thrd(b.DescribeTopic(ctx, who, "a b", 2)), CodeInvalidTopicName)
	wantCode(t, thrd(b.DescribeTopic(ctx, who, "huge", catalog.MaxPartitions+1)), CodeInvalidPartitionCount)
	tp, created, err = b.DescribeTopic(ctx, who, "auto", 2)
	if err != nil || !created || tp.Partitions != 2 {
		t.Fatalf("auto-created %+v, %v: %v", tp, created, err)
	}
	if tp, created, err = b.DescribeTopic(ctx, who, "auto", 2); err != nil || created || tp.Partitions != 2 {
		t.Fatalf("described again %+v, %v: %v", tp, created, err)
	}

	// Refused describe: neither listed nor described.
	auth := &countingAuthorizer{refused: map[acl.Resource]bool{acl.Topic(OffsetsTopic): true}, asked: map[acl.Resource]int{}}
	b.d.Authorizer = auth
	if got := names(b.ListedTopics(ctx, who)); slices.Contains(got, OffsetsTopic) {
		t.Fatalf("listed to a principal refused describe: %v", got)
	}
	wantCode(t, thrd(b.DescribeTopic(ctx, who, OffsetsTopic, 0)), CodeForbidden)
	wantCode(t, second(b.DescribeTopicByUUID(ctx, who, OffsetsTopicID)), CodeTopicNotFound)
	b.d.Authorizer = nil

	// A pattern that matches it makes it, and it is then listed once, as itself.
	got, err := b.TopicsMatching(ctx, who, "b|__.*")
	if err != nil || !slices.Equal(got, []string{"b", OffsetsTopic}) {
		t.Fatalf("matching: %v, %v", got, err)
	}
	real, err := cat.Topic(ctx, OffsetsTopic)
	if err != nil {
		t.Fatalf("the pattern did not make the offsets topic: %v", err)
	}
	if got := names(b.ListedTopics(ctx, who)); !slices.Equal(got, []string{"A", OffsetsTopic, "auto", "b"}) {
		t.Fatalf("listed %v", got)
	}
	if tp, _, err := b.DescribeTopic(ctx, who, OffsetsTopic, 0); err != nil || tp.UUID != real.UUID {
		t.Fatalf("described %+v, %v; want the real one", tp, err)
	}
	if got, err := b.TopicsMatching(ctx, who, "A"); err != nil || !slices.Equal(got, []string{"A"}) {
		t.Fatalf("matching A: %v, %v", got, err)
	}
	wantCode(t, second(b.TopicsMatching(ctx, who, "(")), CodeInvalidParameter)
}

func thrd[A, B any](_ A, _ B, err error) error { return err }
