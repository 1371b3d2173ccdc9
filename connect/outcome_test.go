package connect_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// lossyCommitter commits, then loses the answer of the first source commit it sees, and
// can never settle it: the writer answers that request's outcome as unknown.
type lossyCommitter struct {
	cat  node.Committer
	lose atomic.Int32
	lost atomic.Int32
}

func (c *lossyCommitter) Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	res, err := c.cat.Commit(ctx, seg)
	if err != nil {
		return res, err
	}
	for _, r := range seg.Requests {
		if r.Source != nil && c.lose.Add(-1) >= 0 {
			c.lost.Add(1)
			return nil, errors.New("test: the commit's answer was lost")
		}
	}
	return res, nil
}

func (c *lossyCommitter) Settle(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	return nil, errors.New("test: the catalog cannot be reached to settle")
}

// TestUnknownOutcomeSettled: a source commit that landed but whose outcome stayed
// unknown is not sent again blindly (that would duplicate its records): the task is
// restarted at a new generation — which waits for any commit of the old one — and its
// new instance resumes from the offsets the catalog holds.
func TestUnknownOutcomeSettled(t *testing.T) {
	lossy := &lossyCommitter{}
	lossy.lose.Store(1)
	tn := startNode(t, connect.WorkerConfig{}, func(c *node.Config) {
		lossy.cat = c.Catalog
		c.Committer = lossy
		c.WriterConfig.SettleTimeout = 300 * time.Millisecond
	})
	tn.createTopic(t, "lines", 1)
	in := filepath.Join(tn.dir, "in.jsonl")
	writeLines(t, in, `{"n":1}`, `{"n":2}`, `{"n":3}`)
	tn.want(t, "POST", "/connectors", fmt.Sprintf(`{"name":"src","config":{"connector.class":"FileSource","file":%s,"topic":"lines"}}`, quote(in)), 201, "")
	first := tn.waitState(t, "src", "RUNNING", 1)["tasks"].([]any)[0].(map[string]any)["generation"]
	testwait.NoError(t, 20*time.Second, "the lost commit settled by a restart", func() error {
		task := tn.status(t, "src")["tasks"].([]any)[0].(map[string]any)
		if lossy.lost.Load() != 1 || task["generation"] == first || task["state"] != "RUNNING" {
			return fmt.Errorf("lost %d, task %v (first generation %v)", lossy.lost.Load(), task, first)
		}
		return nil
	})
	writeLines(t, in, `{"n":4}`)
	testwait.NoError(t, 10*time.Second, "every line once", func() error {
		if got := values(tn.readAll(t, "lines", 0)); !slices.Equal(got, []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`}) {
			return fmt.Errorf("records %v", got)
		}
		return nil
	})
}
