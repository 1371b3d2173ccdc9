package broker

import (
	"errors"
	"testing"

	"github.com/strata-io/strata/catalog"
)

// TestCheckFetchMember: an offset fetch naming a consumer group's member passes only
// for a live member at its epoch; no member, or a group that does not exist, passes
// (the fetch's own lookup answers those).
func TestCheckFetchMember(t *testing.T) {
	core, cat := newRealCore(t)
	ctx := t.Context()
	if _, err := cat.CreateTopic(ctx, "in", 1, nil); err != nil {
		t.Fatal(err)
	}
	res, err := core.ConsumerHeartbeat(ctx, Principal{}, catalog.Heartbeat{Group: "g", MemberID: "m1", Topics: []string{"in"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		group  string
		member string
		epoch  int32
		want   Code
	}{
		{"live member at its epoch", "g", "m1", res.MemberEpoch, ""},
		{"no member named", "g", "", 99, ""},
		{"no such group", "none", "m1", 1, ""},
		{"another epoch", "g", "m1", res.MemberEpoch + 1, CodeStaleMemberEpoch},
		{"unknown member", "g", "m2", res.MemberEpoch, CodeUnknownMember},
	} {
		var e *Error
		err := core.CheckFetchMember(ctx, Principal{}, tc.group, tc.member, tc.epoch)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want nil", tc.name, err)
		case tc.want != "" && !(errors.As(err, &e) && e.Code == tc.want):
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
}
