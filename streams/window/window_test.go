package window

import (
	"slices"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		ts   int64
		want []Window
	}{
		{"tumbling start", Tumbling(time.Minute, 0), 60_000, []Window{{60_000, 120_000}}},
		{"tumbling end-1", Tumbling(time.Minute, 0), 119_999, []Window{{60_000, 120_000}}},
		{"tumbling zero", Tumbling(time.Minute, 0), 0, []Window{{0, 60_000}}},
		{"tumbling negative", Tumbling(time.Minute, 0), -1, []Window{{-60_000, 0}}},
		{"hopping 3", Hopping(30*time.Second, 10*time.Second, 0), 25_000, []Window{{0, 30_000}, {10_000, 40_000}, {20_000, 50_000}}},
		{"hopping on boundary", Hopping(30*time.Second, 10*time.Second, 0), 30_000, []Window{{10_000, 40_000}, {20_000, 50_000}, {30_000, 60_000}}},
		{"hopping uneven", Hopping(25*time.Second, 10*time.Second, 0), 24_999, []Window{{0, 25_000}, {10_000, 35_000}, {20_000, 45_000}}},
		{"hopping uneven 2", Hopping(25*time.Second, 10*time.Second, 0), 25_000, []Window{{10_000, 35_000}, {20_000, 45_000}}},
	} {
		if got := tc.spec.For(tc.ts); !slices.Equal(got, tc.want) {
			t.Errorf("%s: For(%d) = %v, want %v", tc.name, tc.ts, got, tc.want)
		}
	}
}

func TestClosed(t *testing.T) {
	s := Tumbling(time.Minute, 10*time.Second)
	w := Window{0, 60_000}
	if s.Closed(w, 69_999) {
		t.Error("closed at end+grace-1ms")
	}
	if !s.Closed(w, 70_000) {
		t.Error("open at end+grace")
	}
	if got := s.ClosedBefore(70_000); got != 0 {
		t.Errorf("ClosedBefore = %d", got)
	}
}

func TestValidate(t *testing.T) {
	for _, s := range []Spec{{}, Tumbling(0, time.Second), Tumbling(time.Minute, -1), Hopping(time.Minute, 2*time.Minute, 0), Hopping(time.Minute, 0, 0)} {
		if s.Validate() == nil {
			t.Errorf("%+v validated", s)
		}
	}
	if err := Hopping(time.Minute, time.Second, 0).Validate(); err != nil {
		t.Error(err)
	}
}

func TestValidatePart2(t *testing.T) {
	for name, err := range map[string]error{
		"sliding 0":     Sliding(0, time.Second).Validate(),
		"sliding grace": Sliding(time.Second, -1).Validate(),
		"session 0":     Session(0, 0).Validate(),
		"session grace": Session(time.Second, -1).Validate(),
		"zero session":  SessionSpec{}.Validate(),
		"join negative": JoinBeforeAfter(-time.Second, time.Second, 0).Validate(),
		"join grace":    Join(time.Second, -1).Validate(),
		"zero join":     JoinSpec{}.Validate(),
	} {
		if err == nil {
			t.Errorf("%s validated", name)
		}
	}
	for name, err := range map[string]error{
		"sliding":        Sliding(time.Second, 0).Validate(),
		"session":        Session(time.Second, 0).Validate(),
		"join":           Join(time.Second, 0).Validate(),
		"join zero-wide": JoinBeforeAfter(0, 0, 0).Validate(),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	s := Sliding(5*time.Second, time.Second)
	if !s.IsSliding() || s.TimeDifference() != 5000 || s.Size() != 5001 || s.Grace() != 1000 {
		t.Errorf("sliding spec %+v", s)
	}
	if got := Session(10*time.Second, 5*time.Second).CloseTime(40_000); got != 25_000 {
		t.Errorf("session close time %d, want 25000", got)
	}
}
