package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/objstore"
)

// readyProbeKey is a key that never exists: a Head answering "not found" proves the
// bucket is reachable and the credentials work, without writing anything.
const readyProbeKey = "strata-readyz-probe"

type clock interface {
	Now(ctx context.Context) (time.Time, error)
}

type header interface {
	Head(ctx context.Context, key string) (objstore.Info, error)
}

// readiness is a node's /readyz check: the catalog and the bucket, asked at once, each
// failure an *api.NotReadyError naming its dependency (the API shows the name, and
// logs the cause).
func readiness(cat clock, store header) func(context.Context) error {
	return func(ctx context.Context) error {
		var catErr, storeErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := cat.Now(ctx); err != nil {
				catErr = &api.NotReadyError{Dependency: "catalog", Err: err}
			}
		})
		wg.Go(func() {
			if _, err := store.Head(ctx, readyProbeKey); err != nil && !errors.Is(err, objstore.ErrNotExist) {
				storeErr = &api.NotReadyError{Dependency: "bucket", Err: err}
			}
		})
		wg.Wait()
		return errors.Join(catErr, storeErr)
	}
}
