// Package ctxwait waits for a duration unless a context ends first. It is a leaf: the
// client library imports it as well as the server, so it imports nothing of either.
package ctxwait

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx ends, whichever comes first. It returns nil once d
// has passed and ctx.Err() when ctx ended first (or had already ended: a done context
// never sleeps, so a retry loop stops at once). A d of zero or less does not wait.
func Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
