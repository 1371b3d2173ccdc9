package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/cputime"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/security"
)

// BenchmarkKeyedRequest is a request on a connection authenticated by SASL/PLAIN to a
// listener that accounts its frames in a memory budget (with authentication on, each
// frame is counted against its principal's share until it has been read): Metadata for
// one topic, over loopback, one at a time. cpu-ns/op is the process's CPU per request,
// client included. It uses only what the listener had before the per-principal share,
// so that the same file runs on the code before it and after:
//
//	go test ./kafka -run '^$' -bench '^BenchmarkKeyedRequest$' -benchtime 5000x -count 8
func BenchmarkKeyedRequest(b *testing.B) {
	fc := newFakeCluster()
	fc.add("orders", 1)
	ts := startServer(b, Config{Auth: staticKeys([]string{keyA})}, fc, func(d *Deps) { d.Memory = membudget.New(1<<30, nil) })
	c := dial(b, ts.addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	if r := c.roundTrip(hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		b.Fatalf("handshake: %d", r.ErrorCode)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SASLAuthBytes = plain(security.StaticKeyID(keyA), keyA)
	if r := c.roundTrip(au, 2).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != 0 {
		b.Fatalf("authenticate: %d", r.ErrorCode)
	}
	req := metadataFor("orders")
	b.ReportAllocs()
	cpu0 := cputime.Self()
	for b.Loop() {
		if md := c.roundTrip(req, 12).(*kmsg.MetadataResponse); md.Topics[0].ErrorCode != 0 {
			b.Fatalf("metadata: %d", md.Topics[0].ErrorCode)
		}
	}
	b.ReportMetric(float64((cputime.Self()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
