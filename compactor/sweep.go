package compactor

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/segment"
)

// keyBatch is how many keys one catalog call of the deletion job or the sweep handles.
const keyBatch = 500

// maxKeyRounds bounds the batches of one job run, so a pass stays bounded.
const maxKeyRounds = 200

// segmentPrefix is where segment.NewKey puts objects. Nothing else in the store is
// ever touched.
const segmentPrefix = "segments/"

// deleteObjects deletes keys from the store and then forgets the rows of those the
// store confirmed gone; it returns how many it forgot.
func (c *Compactor) deleteObjects(ctx context.Context, keys []string) (int, error) {
	gone := make([]string, 0, len(keys))
	var errs []error
	for _, k := range keys {
		if err := c.store.Delete(ctx, k); err != nil {
			errs = append(errs, err)
			continue
		}
		gone = append(gone, k)
	}
	n, err := c.cat.ForgetSegments(ctx, gone)
	if err != nil {
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// deleteExpired deletes the objects of 'deleting' segments whose grace period has
// passed, then their rows.
func (c *Compactor) deleteExpired(ctx context.Context) error {
	l, ok, err := c.cat.AcquireJob(ctx, catalog.JobDelete, c.cfg.Holder, c.cfg.LeaseTTL, 0)
	if err != nil || !ok {
		return err
	}
	err = c.deleteExpiredLeased(ctx)
	if rerr := c.cat.ReleaseJob(ctx, l, err == nil); rerr != nil && ctx.Err() == nil {
		c.log.Warn("release deletion job", "err", rerr)
	}
	if err != nil {
		return fmt.Errorf("compactor: delete expired objects: %w", err)
	}
	return nil
}

func (c *Compactor) deleteExpiredLeased(ctx context.Context) error {
	for range maxKeyRounds {
		keys, err := c.cat.DeletableSegments(ctx, c.cfg.GracePeriod, keyBatch)
		if err != nil {
			return err
		}
		n, err := c.deleteObjects(ctx, keys)
		c.m.objectsDeleted.Add(float64(n))
		if err != nil {
			return err
		}
		if len(keys) < keyBatch {
			return nil
		}
	}
	return nil
}

// errListDone ends a listing early: keys sort by time, and the rest are too young.
var errListDone = errors.New("listing reached the orphan horizon")

// sweep, when due (Config.SweepInterval across all compactors), marks live segments
// left without chunk rows 'deleting', and removes orphans: objects whose key time is
// older than the orphan horizon and that have no live row — unknown keys once claimed
// with the fencing insert, 'aborted' ones directly — dropping a row only after the
// store confirmed the object gone.
func (c *Compactor) sweep(ctx context.Context) error {
	l, ok, err := c.cat.AcquireJob(ctx, catalog.JobSweep, c.cfg.Holder, c.cfg.LeaseTTL, c.cfg.SweepInterval)
	if err != nil || !ok {
		return err
	}
	err = c.sweepLeased(ctx)
	if rerr := c.cat.ReleaseJob(ctx, l, err == nil); rerr != nil && ctx.Err() == nil {
		c.log.Warn("release sweep job", "err", rerr)
	}
	if err != nil {
		return fmt.Errorf("compactor: orphan sweep: %w", err)
	}
	return nil
}

func (c *Compactor) sweepLeased(ctx context.Context) error {
	for range maxKeyRounds {
		n, err := c.cat.MarkUnreferenced(ctx, keyBatch)
		if err != nil {
			return err
		}
		if n < keyBatch {
			break
		}
	}
	// Rows fenced by Settle (or by an earlier sweep whose delete failed), whether or not
	// their object was ever written.
	for range maxKeyRounds {
		keys, err := c.cat.AbortedSegments(ctx, keyBatch)
		if err != nil {
			return err
		}
		n, err := c.deleteObjects(ctx, keys)
		c.m.orphansSwept.Add(float64(n))
		if err != nil {
			return err
		}
		if len(keys) < keyBatch {
			break
		}
	}

	horizon, err := c.cat.OrphanHorizon(ctx)
	if err != nil {
		return err
	}
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		keys := batch
		batch = nil
		states, err := c.cat.SegmentStates(ctx, keys)
		if err != nil {
			return err
		}
		var unknown, aborted []string
		for _, k := range keys {
			switch s, ok := states[k]; {
			case !ok:
				unknown = append(unknown, k)
			case s == catalog.SegmentAborted:
				aborted = append(aborted, k)
			}
		}
		if len(unknown) > 0 {
			// The fencing insert: a commit of the key either landed first (the key
			// stays live and is not returned) or can never land now.
			fenced, err := c.cat.FenceOrphans(ctx, unknown)
			if err != nil {
				return err
			}
			aborted = append(aborted, fenced...)
		}
		n, err := c.deleteObjects(ctx, aborted)
		c.m.orphansSwept.Add(float64(n))
		if n > 0 {
			c.log.Info("swept orphan objects", "count", n)
		}
		return err
	}
	err = c.store.List(ctx, segmentPrefix, func(info objstore.Info) error {
		kt, err := segment.KeyTime(info.Key)
		if err != nil {
			return nil // not an object Strata made: never touched
		}
		if !kt.Before(horizon) {
			return errListDone
		}
		batch = append(batch, info.Key)
		if len(batch) >= keyBatch {
			return flush()
		}
		return nil
	})
	if err != nil && !errors.Is(err, errListDone) {
		return fmt.Errorf("list %s: %w", segmentPrefix, err)
	}
	return flush()
}
