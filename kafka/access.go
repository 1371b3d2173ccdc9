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
	d, n, decided := acc.Summary()
	refused := decided && !d.Allowed
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
	if decided {
		attrs = append(attrs, d.Attrs(n)...)
	}
	c.s.log.LogAttrs(c.ctx, slog.LevelInfo, "access", attrs...)
}
