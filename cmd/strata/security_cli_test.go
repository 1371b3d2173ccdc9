package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/tlsreload/tlstest"
)

// TestSecurityVerbs: strata keys and strata acls against a dev server with a bootstrap
// key: a key made for a principal is refused until an ACL allows it; acls list filters
// and deletes; the usage errors name what is missing.
func TestSecurityVerbs(t *testing.T) {
	dir := t.TempDir()
	p := startInProcess(t, nil, "dev", "--data", filepath.Join(dir, "dev"), "--listen", "127.0.0.1:0",
		"--kafka-listen", "", "--api-keys", bootstrapKey)
	if p.url == "" {
		t.Fatalf("dev did not serve:\n%s", p.out)
	}
	admin := map[string]string{"STRATA_SERVER": p.url, "STRATA_API_KEY": bootstrapKey}
	cli := func(vars map[string]string, want int, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := runCLI(t, vars, "", args...)
		if code != want {
			t.Fatalf("strata %s: exit %d, want %d: %s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out, errOut
	}
	cli(admin, 0, "topics", "create", "orders")
	out, errOut := cli(admin, 0, "keys", "create", "--principal", "User:app", "--description", "the app")
	if !strings.Contains(errOut, "shown this once") {
		t.Errorf("keys create does not say the secret is shown once: %s", errOut)
	}
	secret := ""
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "secret:"); ok {
			secret = strings.TrimSpace(v)
		}
	}
	if len(secret) != 64 {
		t.Fatalf("keys create printed no 64-digit secret:\n%s", out)
	}
	app := map[string]string{"STRATA_SERVER": p.url, "STRATA_API_KEY": secret}
	if _, errOut := cli(app, 1, "topics", "describe", "orders"); !strings.Contains(errOut, "not authorized to describe topic orders") {
		t.Errorf("without an ACL: %s", errOut)
	}
	cli(admin, 0, "acls", "create", "--principal", "User:app", "--operation", "read", "--topic", "orders")
	cli(admin, 0, "acls", "create", "--principal", "User:app", "--operation", "write", "--topic", "ord", "--prefixed")
	cli(admin, 0, "acls", "create", "--principal", "User:other", "--operation", "read", "--group", "g", "--deny")
	if out, _ := cli(app, 0, "topics", "describe", "orders"); !strings.Contains(out, "orders") {
		t.Errorf("with read: %s", out)
	}
	out, _ = cli(admin, 0, "acls", "list", "--topic", "orders", "--matching")
	if !strings.Contains(out, "read") || !strings.Contains(out, "prefixed") || strings.Contains(out, "User:other") {
		t.Errorf("acls list --topic orders --matching:\n%s", out)
	}
	out, _ = cli(admin, 0, "acls", "delete", "--principal", "User:app")
	if strings.Count(out, "User:app") != 2 {
		t.Errorf("acls delete --principal User:app:\n%s", out)
	}
	if out, _ := cli(admin, 0, "acls", "list", "--json"); strings.Count(out, "\n") != 1 || !strings.Contains(out, "User:other") {
		t.Errorf("what is left:\n%s", out)
	}
	// Connectors are a resource type of their own.
	cli(admin, 0, "acls", "create", "--principal", "User:etl", "--operation", "alter", "--connector", "etl-", "--prefixed")
	if out, _ := cli(admin, 0, "acls", "list", "--connector", "etl-orders", "--matching"); !strings.Contains(out, "connector") || !strings.Contains(out, "User:etl") {
		t.Errorf("acls list --connector etl-orders --matching:\n%s", out)
	}
	cli(admin, 0, "acls", "delete", "--principal", "User:etl")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"acls", "create", "--operation", "read", "--topic", "t"}, "--principal is required"},
		{[]string{"acls", "create", "--principal", "User:a", "--topic", "t"}, "--operation is required"},
		{[]string{"acls", "create", "--principal", "User:a", "--operation", "read"}, "name the resource"},
		{[]string{"acls", "create", "--principal", "User:a", "--operation", "read", "--topic", "t", "--group", "g"}, "name one resource"},
		{[]string{"acls", "create", "--principal", "User:a", "--operation", "read", "--topic", "t", "--connector", "c"}, "name one resource"},
		{[]string{"acls", "delete"}, "--all"},
		{[]string{"keys", "create"}, "--principal is required"},
		{[]string{"keys", "revoke"}, "one key id expected"},
		{[]string{"keys"}, "Verbs:\n  create"},
	} {
		if _, errOut := cli(admin, 2, tc.args...); !strings.Contains(errOut, tc.want) {
			t.Errorf("strata %s: %s, want %q", strings.Join(tc.args, " "), errOut, tc.want)
		}
	}
	if _, errOut := cli(admin, 1, "acls", "create", "--principal", "alice", "--operation", "read", "--topic", "t"); !strings.Contains(errOut, "User:NAME") {
		t.Errorf("a principal without its type: %s", errOut)
	}
}

// clientCert makes a self-signed client certificate (its own CA) for subject.
func clientCert(t *testing.T, subject pkix.Name) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject,
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestClientCertificates: with --tls-client-ca, a verified client certificate
// authenticates on the HTTP and the Kafka listeners as the principal
// --tls-principal-rules makes of its subject, and the ACLs apply to it; a certificate
// the CAs did not sign, or none, needs a key.
func TestClientCertificates(t *testing.T) {
	dir := t.TempDir()
	server := tlstest.New(t, "server")
	certFile, keyFile := server.Write(t, dir)
	alice, alicePEM := clientCert(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"apps"}})
	bob, bobPEM := clientCert(t, pkix.Name{CommonName: "bob", OrganizationalUnit: []string{"apps"}})
	stranger, _ := clientCert(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"apps"}})
	caFile := filepath.Join(dir, "clients.pem")
	tlstest.WriteFile(t, caFile, append(alicePEM, bobPEM...))
	p := startInProcess(t, nil, "serve", "--catalog", "sqlite:"+filepath.Join(dir, "catalog.db"), "--create",
		"--bucket", "file://"+filepath.Join(dir, "objects"), "--listen", "127.0.0.1:0",
		"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", caFile,
		"--tls-principal-rules", `RULE:^CN=([^,]+),OU=apps$/$1/L,DEFAULT`,
		"--kafka-listen", "127.0.0.1:0", "--kafka-tls-cert", certFile, "--kafka-tls-key", keyFile,
		"--api-keys", bootstrapKey)
	if !strings.HasPrefix(p.url, "https://") {
		t.Fatalf("serve did not serve HTTPS:\n%s", p.out)
	}
	as := func(cert *tls.Certificate, key string) *client.Client {
		cfg := &tls.Config{RootCAs: server.Pool}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		opts := []client.Option{client.WithHTTPClient(&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}})}
		if key != "" {
			opts = append(opts, client.WithAPIKey(key))
		}
		return client.New(p.url, opts...)
	}
	admin := as(nil, bootstrapKey)
	if _, err := admin.CreateTopic(t.Context(), "certs", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateACL(t.Context(), client.ACL{Principal: "User:alice", ResourceType: "topic", ResourceName: "certs", Operation: "read"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, err := as(&alice, "").Topic(t.Context(), "certs")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's certificate: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for who, c := range map[string]struct {
		cl   *client.Client
		code string
	}{
		"bob's certificate": {as(&bob, ""), "forbidden"},
		"an unknown CA's":   {as(&stranger, ""), ""},
		"no certificate":    {as(nil, ""), "unauthorized"},
	} {
		_, err := c.cl.Topic(t.Context(), "certs")
		if err == nil || (c.code != "" && !strings.Contains(err.Error(), c.code)) {
			t.Errorf("%s: %v, want %s", who, err, c.code)
		}
	}

	// Kafka over TLS, authenticated by the certificate alone.
	var kafkaAddr string
	for _, line := range strings.Split(p.out.String(), "\n") {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving Kafka protocol" {
			kafkaAddr = rec.Addr
		}
	}
	kc, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.DialTLSConfig(&tls.Config{RootCAs: server.Pool, Certificates: []tls.Certificate{alice}}))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"certs", "other"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, mt)
	}
	resp, err := req.RequestWith(t.Context(), kc)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("Kafka metadata as alice's certificate: %d, %d", resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode)
	}
}
