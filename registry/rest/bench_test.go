package rest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/postgres"
)

// BenchmarkLookups: registry look-ups per second from one node, over HTTP (the handler
// behind an httptest server, keep-alive connections, requests in parallel): a schema by
// id (what a deserializer asks) and a subject's latest version (what a serializer
// asks), on SQLite and, with STRATA_TEST_POSTGRES, on Postgres. Run:
//
//	go test ./registry/rest -run '^$' -bench Lookups -benchtime 3s
func BenchmarkLookups(b *testing.B) {
	run := func(b *testing.B, e *env) {
		subject := fmt.Sprintf("bench-%d-value", time.Now().UnixNano())
		body := schemaBodyOf(`{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`, "")
		a := e.do("", "POST", "/subjects/"+subject+"/versions", body)
		var reg struct{ ID int64 }
		if err := json.Unmarshal([]byte(a.body), &reg); a.status != 200 || err != nil {
			b.Fatalf("register: %d %s", a.status, a.body)
		}
		for _, q := range []struct{ name, path string }{
			{"floor", "/schemas/types"}, // the same HTTP round trip without the catalog: the baseline
			{"by_id", fmt.Sprintf("/schemas/ids/%d", reg.ID)},
			{"latest", "/subjects/" + subject + "/versions/latest"},
		} {
			path := q.path
			b.Run(q.name, func(b *testing.B) {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						resp, err := http.Get(e.srv.URL + path)
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Errorf("%s: %d", path, resp.StatusCode)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
			})
		}
	}
	http.DefaultTransport.(*http.Transport).MaxIdleConnsPerHost = 64
	b.Run("sqlite", func(b *testing.B) { run(b, newEnv(b)) })
	if dsn := os.Getenv("STRATA_TEST_POSTGRES"); dsn != "" {
		b.Run("postgres", func(b *testing.B) {
			cat, err := postgres.Open(b.Context(), dsn, catalog.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cat.Close() })
			run(b, newEnvOn(b, cat))
		})
	}
}
