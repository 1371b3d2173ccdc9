package api_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/security"
)

// BenchmarkHandlerKeyed is what a request with a key costs a node that accounts its
// memory: authentication, ACLs, the memory budget (with authentication on, a body is
// counted against its principal's share until it has arrived) and produce admission.
// It uses only what the API exported before the per-principal share, so that the same
// file runs on the code before it and after; compare cpu-ns/op of the two:
//
//	go test ./api -run '^$' -bench '^BenchmarkHandlerKeyed$' -benchtime 2000x -count 8
func BenchmarkHandlerKeyed(b *testing.B) {
	cat, rd, body, bb := fixture(b)
	g := security.New(security.Config{Required: true}, &stubSecurity{acls: []acl.Binding{
		{Principal: "User:app", Host: "*", Resource: acl.TypeTopic, Name: "t", Pattern: acl.PatternLiteral, Operation: acl.OpAll, Permission: acl.PermissionAllow},
	}})
	if err := g.Refresh(b.Context()); err != nil {
		b.Fatal(err)
	}
	core := broker.New(broker.Config{}, broker.Deps{Catalog: cat, Writer: stubWriter{}, Reader: rd, Batches: rd, Authorizer: g})
	h := api.New(api.Config{Auth: api.AuthConfig{Authenticator: g}}, api.Deps{Core: core, Memory: membudget.New(1<<30, nil)}).Handler()
	keyed := func(r *http.Request) *http.Request {
		r.Header.Set("Authorization", "Bearer "+benchKey)
		return r
	}
	b.Run("produce-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		run(b, h, func() *http.Request {
			r := httptest.NewRequest("POST", "/v1/topics/t/records", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			return keyed(r)
		})
	})
	b.Run("produce-binary", func(b *testing.B) {
		b.SetBytes(int64(len(bb)))
		run(b, h, func() *http.Request {
			r := httptest.NewRequest("POST", "/v1/topics/t/records?partition=1", bytes.NewReader(bb))
			r.Header.Set("Content-Type", "application/vnd.kafka.record-batch")
			return keyed(r)
		})
	})
	b.Run("produce-small", func(b *testing.B) {
		small := []byte(`{"records":[{"key":"k","value":{"n":1}}]}`)
		run(b, h, func() *http.Request {
			r := httptest.NewRequest("POST", "/v1/topics/t/records", bytes.NewReader(small))
			r.Header.Set("Content-Type", "application/json")
			return keyed(r)
		})
	})
	b.Run("topic", func(b *testing.B) {
		run(b, h, func() *http.Request { return keyed(httptest.NewRequest("GET", "/v1/topics/t", nil)) })
	})
}
