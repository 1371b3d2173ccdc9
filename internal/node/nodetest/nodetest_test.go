package nodetest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/catalog/postgres"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/objstore/s3"
)

// TestStart: a node on each backend, with keys required and the Kafka listener, serves
// both front ends over what the options named.
func TestStart(t *testing.T) {
	const key = "nodetest-key-0123456789abcdef0123456789"
	for _, backend := range []string{"embedded", "services"} {
		t.Run(backend, func(t *testing.T) {
			opts := []Option{Keys(key), Kafka(), Memory(256 << 20)}
			if backend == "services" {
				opts = append(opts, OnServices())
			}
			n := Start(t, opts...)
			switch backend {
			case "embedded":
				if _, ok := n.Catalog.(*sqlite.Catalog); !ok || n.Dir == "" {
					t.Fatalf("catalog %T in %q, want SQLite in a directory", n.Catalog, n.Dir)
				}
				if _, ok := n.Store.(*fs.Store); !ok {
					t.Fatalf("store %T, want the filesystem", n.Store)
				}
			case "services":
				if _, ok := n.Catalog.(*postgres.Catalog); !ok {
					t.Fatalf("catalog %T, want Postgres", n.Catalog)
				}
				if _, ok := n.Store.(*s3.Store); !ok {
					t.Fatalf("store %T, want S3 (MinIO)", n.Store)
				}
			}
			if n.Memory == nil || n.Guard == nil {
				t.Fatalf("memory budget %v, guard %v: the options were not applied", n.Memory, n.Guard)
			}
			for _, c := range []struct {
				key  string
				want int
			}{{"", http.StatusUnauthorized}, {key, http.StatusCreated}} {
				req, _ := http.NewRequestWithContext(t.Context(), "POST", n.URL+"/v1/topics", strings.NewReader(`{"name":"t","partitions":1}`))
				req.Header.Set("Content-Type", "application/json")
				if c.key != "" {
					req.Header.Set("Authorization", "Bearer "+c.key)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != c.want {
					t.Fatalf("create a topic with key %q: %d, want %d", c.key, resp.StatusCode, c.want)
				}
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			// ApiVersions is answered before authentication.
			if _, err := kmsg.NewPtrApiVersionsRequest().RequestWith(t.Context(), cl); err != nil {
				t.Fatalf("Kafka ApiVersions: %v", err)
			}
		})
	}
}
