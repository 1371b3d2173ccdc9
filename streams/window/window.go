// Package window defines the time windows of windowed aggregations: tumbling and
// hopping windows over event time, each with a required grace period during which
// out-of-order records are still counted.
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

// Result is a windowed aggregate: the window and its value.
type Result[V any] struct {
	Window Window `json:"window"`
	Value  V      `json:"value"`
}

// Spec says which windows a timestamp falls in and when they close. Build one with
// Tumbling or Hopping.
type Spec struct {
	size, advance, grace int64 // milliseconds
	err                  error
}

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
var ErrNoSpec = errors.New("window: no window given: use window.Tumbling(size, grace) or window.Hopping(size, advance, grace)")

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
// multiples of the advance (the epoch aligned), as in Kafka.
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
