package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/broker"
	inode "github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/kafka"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/security"
)

// closedBy reads the node's count of Kafka connections it closed for reason.
func closedBy(t *testing.T, g prometheus.Gatherer, reason string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "strata_kafka_connections_closed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// SCRAM end to end with franz-go on a node that requires authentication: a
// SCRAM-SHA-512 user made through AlterUserScramCredentials logs in as User:NAME,
// under the ACLs as a key would be; refused alterations change nothing and get Kafka's
// codes; deleting the credential closes the connections it opened.
func TestSCRAMWithFranzGo(t *testing.T) {
	const bootstrap = "scram-e2e-bootstrap-key-0123456789"
	cat := openSQLite(t)
	store, err := fs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n := nodetest.Start(t, nodetest.On(cat, store), nodetest.Kafka(func(*kafka.Config) {}),
		nodetest.Mutate(func(c *inode.Config) { c.Security = security.Config{StaticKeys: []string{bootstrap}} }))
	addr := n.KafkaAddr
	adm := admin(t, kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: security.StaticKeyID(bootstrap), Pass: bootstrap}.AsMechanism()))
	ctx := ctx10(t)
	raw, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: security.StaticKeyID(bootstrap), Pass: bootstrap}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	for _, topic := range []string{"orders", "secret"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-password"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("make alice: %v, %v", err, res.Error())
	}
	if err := n.Broker.CreateACL(ctx, broker.Principal{Name: security.BootstrapPrincipal}, acl.Binding{Principal: "User:alice", Host: "*", Resource: acl.TypeTopic,
		Name: "orders", Pattern: acl.PatternLiteral, Operation: acl.OpDescribe, Permission: acl.PermissionAllow}); err != nil {
		t.Fatal(err)
	}

	t.Run("refused alterations change nothing", func(t *testing.T) {
		// Sent as they are (kadm checks iterations and mechanisms itself before sending).
		up := func(user string, mech int8, iterations int32, salted int) *kmsg.AlterUserSCRAMCredentialsRequest {
			req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
			u.Name, u.Mechanism, u.Iterations = user, mech, iterations
			u.Salt, u.SaltedPassword = []byte("0123456789abcdef"), make([]byte, salted)
			req.Upsertions = append(req.Upsertions, u)
			return req
		}
		del := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = "alice", 1
		del.Deletions = append(del.Deletions, d)
		twice := up("alice", 2, 8192, 64)
		twice.Upsertions = append(twice.Upsertions, twice.Upsertions[0])
		for name, tc := range map[string]struct {
			req  *kmsg.AlterUserSCRAMCredentialsRequest
			want *kerr.Error
		}{
			"too few iterations":        {up("alice", 2, 4095, 64), kerr.UnacceptableCredential},
			"too many iterations":       {up("alice", 2, 16385, 64), kerr.UnacceptableCredential},
			"unknown mechanism":         {up("alice", 3, 8192, 64), kerr.UnsupportedSaslMechanism},
			"salted password too short": {up("alice", 2, 8192, 32), kerr.UnacceptableCredential},
			"empty user":                {up("", 1, 8192, 32), kerr.UnacceptableCredential},
			"delete what is not":        {del, kerr.ResourceNotFound},
			"twice in one request":      {twice, kerr.DuplicateResource},
		} {
			resp, err := tc.req.RequestWith(ctx, raw)
			if err != nil || len(resp.Results) != 1 || resp.Results[0].ErrorCode != tc.want.Code {
				t.Errorf("%s: %+v, %v; want %v", name, resp, err, tc.want)
			}
		}
		described, err := adm.DescribeUserSCRAMs(ctx)
		if err != nil || described.Error() != nil || len(described) != 1 || len(described["alice"].CredInfos) != 1 ||
			described["alice"].CredInfos[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha512, Iterations: 8192}) {
			t.Fatalf("after the refusals: %+v, %v", described, err)
		}
		if d, _ := adm.DescribeUserSCRAMs(ctx, "nobody"); !errors.Is(d.Error(), kerr.ResourceNotFound) {
			t.Fatalf("describe an unknown user: %v, want RESOURCE_NOT_FOUND", d.Error())
		}
	})

	aliceCl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-password"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(aliceCl.Close)
	alice := kadm.NewClient(aliceCl)
	t.Run("SCRAM-SHA-512 login under the ACLs", func(t *testing.T) {
		topics, err := alice.ListTopics(ctx)
		if err != nil || !topics.Has("orders") || topics.Has("secret") {
			t.Fatalf("alice lists %v (%v): want orders only, as her ACL allows", topics.Names(), err)
		}
		res, err := alice.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "x"}})
		if err == nil {
			err = res.Error()
		}
		if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("alice alters credentials: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
		}
	})
	t.Run("deleting the credential closes its connections", func(t *testing.T) {
		revoked := func() float64 { return closedBy(t, n.Registry, "revoked") }
		before := revoked()
		res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}}, nil)
		if err != nil || res.Error() != nil {
			t.Fatalf("delete: %v, %v", err, res.Error())
		}
		testwait.Until(t, 10*time.Second, "alice's connections closed as revoked", func() bool { return revoked() > before })
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		// (Not Metadata: the client may answer it from its cache.)
		if _, err := kmsg.NewPtrListGroupsRequest().RequestWith(cctx, aliceCl); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("alice after the deletion: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	})
	t.Run("over HTTP", func(t *testing.T) {
		call := func(method, path, body string) (int, map[string]any) {
			req, err := http.NewRequestWithContext(ctx, method, n.URL+path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+bootstrap)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&out)
			return resp.StatusCode, out
		}
		if code, out := call("PUT", "/v1/scram-credentials/carol", `{"mechanism":"SCRAM-SHA-256","password":"carol-pw","iterations":4096}`); code != 200 || out["principal"] != "User:carol" {
			t.Fatalf("PUT: %d %v", code, out)
		}
		carol := admin(t, kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "carol", Pass: "carol-pw"}.AsSha256Mechanism()))
		if _, err := carol.ListTopics(ctx); err != nil {
			t.Fatalf("carol logs in: %v", err)
		}
		if code, out := call("PUT", "/v1/scram-credentials/carol", `{"mechanism":"SCRAM-SHA-256","password":"x","iterations":100}`); code != 400 || out["code"] != "invalid_request" {
			t.Fatalf("PUT with 100 iterations: %d %v", code, out)
		}
		if code, out := call("GET", "/v1/scram-credentials", ""); code != 200 || !strings.Contains(fmt.Sprint(out), "carol") || !strings.Contains(fmt.Sprint(out), "4096") {
			t.Fatalf("GET after a refused PUT: %d %v", code, out)
		}
		if code, out := call("DELETE", "/v1/scram-credentials/carol?mechanism=SCRAM-SHA-256", ""); code != 200 {
			t.Fatalf("DELETE: %d %v", code, out)
		}
		if code, out := call("DELETE", "/v1/scram-credentials/carol?mechanism=SCRAM-SHA-256", ""); code != 404 || out["code"] != "credential_not_found" {
			t.Fatalf("DELETE again: %d %v", code, out)
		}
	})
}
