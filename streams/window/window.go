// Package window defines the time windows of windowed aggregations and joins, over
// event time and each with a required grace period during which out-of-order records
// are still counted: tumbling, hopping and sliding windows (Spec), session windows
// (SessionSpec) and the windows of stream-stream joins (JoinSpec). They follow Kafka
// Streams' definitions; where Kafka's windows include their end (sliding and session
// windows), a Window here is still half-open, ending 1ms after the last instant it
// holds.
package window

import (
	"errors"
	"fmt"
	"time"
)

// Window is a half-open interval of event time, [Start, End), in Unix milliseconds.
type Window struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// Result is a windowed aggregate: the window and its value. Removed marks a session
// that merged into a larger one (Value is its last value): it no longer exists.
type Result[V any] struct {
	Window  Window `json:"window"`
	Value   V      `json:"value"`
	Removed bool   `json:"removed,omitempty"`
}

// Spec says which windows a timestamp falls in and when they close. Build one with
// Tumbling, Hopping or Sliding.
type Spec struct {
	size, advance, grace int64 // milliseconds
	sliding              bool
	err                  error
}

// Sliding windows are Kafka Streams' SlidingWindows: windows of a fixed time
// difference defined by the records themselves rather than by the clock. Each record
// at t has a left window [t-timeDifference, t] and, once a later record falls within
// timeDifference after it, a right window [t+1, t+1+timeDifference] (both ends
// included; as a Window, End is the last instant plus 1ms). A window's aggregate
// holds exactly the records whose timestamps it covers, so every distinct set of
// records within timeDifference of each other has one window. grace as for the
// others: a window closes once stream time passes its last instant plus grace.
func Sliding(timeDifference, grace time.Duration) Spec {
	s := Spec{size: timeDifference.Milliseconds() + 1, advance: 1, grace: grace.Milliseconds(), sliding: true}
	switch {
	case timeDifference.Milliseconds() <= 0:
		s.err = fmt.Errorf("window: sliding time difference %s: must be at least 1ms", timeDifference)
	case grace < 0:
		s.err = fmt.Errorf("window: grace %s: must not be negative", grace)
	}
	return s
}

// IsSliding says the spec was made by Sliding.
func (s Spec) IsSliding() bool { return s.sliding }

// TimeDifference is a sliding spec's time difference in ms (its windows' Size - 1).
func (s Spec) TimeDifference() int64 { return s.size - 1 }

// Tumbling windows are fixed-size, contiguous and non-overlapping: a record falls in
// exactly one. grace is how long after a window's end (in stream time) records for it
// are still counted; it is required, and may be zero.
func Tumbling(size, grace time.Duration) Spec { return Hopping(size, size, grace) }

// Hopping windows have a fixed size and start every advance; with advance < size a
// record falls in size/advance of them.
func Hopping(size, advance, grace time.Duration) Spec {
	s := Spec{size: size.Milliseconds(), advance: advance.Milliseconds(), grace: grace.Milliseconds()}
	switch {
	case s.size <= 0:
		s.err = fmt.Errorf("window: size %s: must be at least 1ms", size)
	case s.advance <= 0 || s.advance > s.size:
		s.err = fmt.Errorf("window: advance %s: must be at least 1ms and at most the size %s", advance, size)
	case grace < 0:
		s.err = fmt.Errorf("window: grace %s: must not be negative", grace)
	}
	return s
}

// ErrNoSpec is the error of a zero Spec: a window without a size or grace.
var ErrNoSpec = errors.New("window: no window given: use window.Tumbling(size, grace), window.Hopping(size, advance, grace) or window.Sliding(timeDifference, grace)")

// Validate reports what is wrong with the spec.
func (s Spec) Validate() error {
	if s.err != nil {
		return s.err
	}
	if s.size == 0 {
		return ErrNoSpec
	}
	return nil
}

// Size, Advance and Grace in milliseconds.
func (s Spec) Size() int64    { return s.size }
func (s Spec) Advance() int64 { return s.advance }
func (s Spec) Grace() int64   { return s.grace }

// For returns the windows holding timestamp ts (ms), oldest first. Window starts are
// multiples of the advance (the epoch aligned), as in Kafka. (Sliding windows depend
// on the records around ts, not on ts alone: For does not apply to them.)
func (s Spec) For(ts int64) []Window {
	last := floorDiv(ts, s.advance) * s.advance // the newest window holding ts
	var out []Window
	for start := last - ((s.size-1)/s.advance)*s.advance; start <= last; start += s.advance {
		if start+s.size > ts {
			out = append(out, Window{Start: start, End: start + s.size})
		}
	}
	return out
}

// Closed reports whether w no longer takes records once stream time is streamTime: its
// end plus grace has been reached.
func (s Spec) Closed(w Window, streamTime int64) bool { return streamTime >= w.End+s.grace }

// ClosedBefore is the latest window start that is closed at streamTime: every window
// starting at or before it is closed.
func (s Spec) ClosedBefore(streamTime int64) int64 { return streamTime - s.grace - s.size }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// SessionSpec is Kafka Streams' SessionWindows: a key's records less than or exactly
// inactivityGap apart form one session, [first record, last record]; a record that
// bridges two sessions merges them. A session closes once stream time passes its last
// record plus the gap plus grace: a record that could only have joined or extended a
// closed session is late.
type SessionSpec struct {
	gap, grace int64
	err        error
}

// Session returns session windows with the inactivity gap and grace (required, may
// be zero).
func Session(inactivityGap, grace time.Duration) SessionSpec {
	s := SessionSpec{gap: inactivityGap.Milliseconds(), grace: grace.Milliseconds()}
	switch {
	case s.gap <= 0:
		s.err = fmt.Errorf("window: session inactivity gap %s: must be at least 1ms", inactivityGap)
	case grace < 0:
		s.err = fmt.Errorf("window: grace %s: must not be negative", grace)
	}
	return s
}

// Validate reports what is wrong with the spec.
func (s SessionSpec) Validate() error {
	if s.err != nil {
		return s.err
	}
	if s.gap == 0 {
		return errors.New("window: no session window given: use window.Session(inactivityGap, grace)")
	}
	return nil
}

// Gap and Grace in milliseconds.
func (s SessionSpec) Gap() int64   { return s.gap }
func (s SessionSpec) Grace() int64 { return s.grace }

// CloseTime is the stream time's horizon: a session whose last record is before it is
// closed (Kafka's stream time - grace - gap).
func (s SessionSpec) CloseTime(streamTime int64) int64 { return streamTime - s.grace - s.gap }

// JoinSpec is Kafka Streams' JoinWindows: a record of one stream at t joins the other
// stream's records of the same key from t-before to t+after (both included; the other
// stream sees the mirror image, t-after to t+before). A record whose window has
// closed — stream time past t+after+grace for the left stream, t+before+grace for
// the right — is late and dropped; a left or outer join emits a record that found no
// partner only once its window has closed.
type JoinSpec struct {
	before, after, grace int64
	set                  bool
	err                  error
}

// Join returns symmetric join windows: partners at most timeDifference apart.
func Join(timeDifference, grace time.Duration) JoinSpec {
	return JoinBeforeAfter(timeDifference, timeDifference, grace)
}

// JoinBeforeAfter returns join windows in which a left record at t takes right
// records from t-before to t+after (zero and zero: equal timestamps only).
func JoinBeforeAfter(before, after, grace time.Duration) JoinSpec {
	s := JoinSpec{before: before.Milliseconds(), after: after.Milliseconds(), grace: grace.Milliseconds(), set: true}
	switch {
	case before < 0 || after < 0:
		s.err = fmt.Errorf("window: join window before %s, after %s: must not be negative", before, after)
	case grace < 0:
		s.err = fmt.Errorf("window: grace %s: must not be negative", grace)
	}
	return s
}

// Validate reports what is wrong with the spec.
func (s JoinSpec) Validate() error {
	if !s.set {
		return errors.New("window: no join window given: use window.Join(timeDifference, grace)")
	}
	return s.err
}

// Before, After and Grace in milliseconds.
func (s JoinSpec) Before() int64 { return s.before }
func (s JoinSpec) After() int64  { return s.after }
func (s JoinSpec) Grace() int64  { return s.grace }
