package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-io/strata/catalog"
)

// SourceRequest is what a connector's source task commits at once: its records, for
// any topics, and its source offsets, under its task instance's fence.
type SourceRequest struct {
	Records []Record
	Source  catalog.SourceCommit
}

// CommitSource commits a source task's records and source offsets in one catalog
// transaction that also checks the task's (connector, task, generation): a stale
// generation refuses both (CodeStaleGeneration), and nothing becomes visible. Without
// records (a heartbeat that only moves offsets) it commits the offsets in the catalog
// alone — no segment, no object — still fenced. The records are authorized and checked
// under their topics' rules as who (the principal the connector runs as), as Produce
// does: write on every topic, before anything is looked up.
func (b *Broker) CommitSource(ctx context.Context, who Principal, req SourceRequest) (ProduceResult, error) {
	if err := catalog.ValidateSourceCommit(req.Source); err != nil {
		return ProduceResult{}, newError(CodeInvalidRequest, "source offsets: %s", err.Error())
	}
	preq := ProduceRequest{Records: req.Records}
	if e := b.authorizeProduce(ctx, who, &preq); e != nil {
		return ProduceResult{}, e
	}
	if len(req.Records) == 0 {
		if b.d.Connect == nil || b.d.Catalog == nil {
			return ProduceResult{}, newError(CodeRoleUnavailable, "this node's catalog keeps no connector offsets")
		}
		if err := b.d.Connect.CommitSourceOffsets(ctx, req.Source); err != nil {
			if e, ok := connectError(err); ok {
				return ProduceResult{}, e
			}
			return ProduceResult{}, catalogError("commit source offsets", err)
		}
		return ProduceResult{}, nil
	}
	if e := b.check(CapProduce); e != nil {
		return ProduceResult{}, e
	}
	wreq, topics, e := b.produceRequest(ctx, &preq)
	if e != nil {
		return ProduceResult{}, e
	}
	src := req.Source
	wreq.Source = &src
	wreq.Principal = who.Name
	resp, e := b.write(ctx, wreq, topics)
	if e != nil {
		return ProduceResult{}, e
	}
	if len(resp.Records) != len(wreq.Records) {
		err := fmt.Errorf("writer answered %d records for %d", len(resp.Records), len(wreq.Records))
		return ProduceResult{}, newError(CodeInternal, "commit source: the writer answered for the wrong number of records").unexpected("commit source", err)
	}
	return ProduceResult{Offsets: resp.Records}, nil
}

// connectError maps the connector refusals of a commit; ok is false for anything else.
func connectError(err error) (_ *Error, ok bool) {
	switch {
	case errors.Is(err, catalog.ErrStaleGeneration):
		return newError(CodeStaleGeneration, "%s", err.Error()), true
	case errors.Is(err, catalog.ErrInvalidConnector):
		return newError(CodeInvalidRequest, "%s", err.Error()), true
	}
	return nil, false
}
