package kafka

import (
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
)

// logAccess writes the access-log line of one request: its principal, API, the
// operation and resource the core decided on (the refused one, if any), and whether the
// answer carries an error. Refusals are always logged; the rest at
// Config.AccessLogSample, as the HTTP API does.
func (c *conn) logAccess(rq *request, a api, acc *broker.Access, resp kmsg.Response, err error, took time.Duration) {
	ds, more := acc.Decisions()
	refused := false
	for _, d := range ds {
		refused = refused || !d.Allowed
	}
	rate := c.s.cfg.AccessLogSample
	if !refused && (rate <= 0 || (rate < 1 && rand.Float64() >= rate)) {
		return
	}
	who := rq.who.Name
	if who == "" {
		who = broker.AnonymousName
	}
	attrs := []slog.Attr{
		slog.String("principal", who),
		slog.String("api", a.name),
		slog.Int("api_version", int(rq.header.version)),
		slog.String("remote", c.remote),
		slog.Bool("error", err != nil || (resp != nil && hasErrorCode(resp))),
		slog.Float64("ms", float64(took.Microseconds())/1000),
	}
	if len(ds) > 0 {
		d := ds[0]
		for _, x := range ds {
			if !x.Allowed {
				d = x
				break
			}
		}
		attrs = append(attrs, slog.String("operation", d.Operation.String()),
			slog.String("resource_type", d.Resource.Type.String()), slog.String("resource", d.Resource.Name),
			slog.Bool("allowed", d.Allowed), slog.Int("decisions", len(ds)+more))
	}
	c.s.log.LogAttrs(c.ctx, slog.LevelInfo, "access", attrs...)
}
