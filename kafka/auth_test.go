package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/security"
)

const (
	keyA = "key-a-0123456789abcdef"
	keyB = "key-b-0123456789abcdef"
)

func TestKeyID(t *testing.T) {
	// printf %s key-a-0123456789abcdef | sha256sum | cut -c1-16
	if got, want := security.StaticKeyID(keyA), "cb9be82a90bf613c"; got != want {
		t.Fatalf("StaticKeyID = %s, want %s (the first 16 hex digits of the key's SHA-256)", got, want)
	}
}

// staticKeys is a guard over static keys alone.
func staticKeys(keys []string) *security.Guard {
	return security.New(security.Config{StaticKeys: keys}, nil)
}

func TestStaticKeys(t *testing.T) {
	a := staticKeys([]string{keyA, keyB})
	ctx := context.Background()
	if id, err := a.AuthenticatePlain(ctx, security.StaticKeyID(keyA), keyA); err != nil || id.Principal != security.BootstrapPrincipal {
		t.Fatalf("own id and key: %+v, %v", id, err)
	}
	for _, tc := range []struct{ name, user, pass string }{
		{"another key's id", security.StaticKeyID(keyB), keyA},
		{"a made-up user", "alice", keyA},
		{"the key as username", keyA, keyA},
		{"wrong key", security.StaticKeyID(keyA), keyA + "x"},
		{"empty", "", ""},
	} {
		if _, err := a.AuthenticatePlain(ctx, tc.user, tc.pass); !errors.Is(err, ErrAuthFailed) {
			t.Errorf("%s: %v, want ErrAuthFailed", tc.name, err)
		}
	}
}

func plain(user, pass string) []byte { return []byte("\x00" + user + "\x00" + pass) }

func authServer(t *testing.T) *testServer {
	fc := newFakeCluster()
	fc.add("orders", 2)
	return startServer(t, Config{Auth: staticKeys([]string{keyA, keyB})}, fc)
}

func metadataFor(name string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &name
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	return req
}

func handshake(t *testing.T, c *client, v int16, mechanism string) *kmsg.SASLHandshakeResponse {
	t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = mechanism
	return c.roundTrip(req, v).(*kmsg.SASLHandshakeResponse)
}

func authenticate(t *testing.T, c *client, token []byte) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = token
	return c.roundTrip(req, 2).(*kmsg.SASLAuthenticateResponse)
}

func TestSASLPlain(t *testing.T) {
	ts := authServer(t)
	c := dial(t, ts.addr)
	// ApiVersions is served before authentication, and lists the SASL APIs.
	av := c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 3).(*kmsg.ApiVersionsResponse)
	found := 0
	for _, k := range av.ApiKeys {
		if k.ApiKey == saslHandshakeKey && k.MinVersion == 0 && k.MaxVersion == 1 ||
			k.ApiKey == saslAuthenticateKey && k.MinVersion == 0 && k.MaxVersion == 2 {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("ApiVersions with keys: %+v, want SaslHandshake 0..1 and SaslAuthenticate 0..2", av.ApiKeys)
	}
	if r := handshake(t, c, 1, "PLAIN"); r.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", r.ErrorCode)
	}
	if r := authenticate(t, c, plain(security.StaticKeyID(keyB), keyB)); r.ErrorCode != 0 {
		t.Fatalf("authenticate: error %d", r.ErrorCode)
	}
	md := c.roundTrip(metadataFor("orders"), 12).(*kmsg.MetadataResponse)
	if len(md.Topics) != 1 || md.Topics[0].ErrorCode != 0 || len(md.Topics[0].Partitions) != 2 {
		t.Fatalf("metadata after authenticating: %+v", md.Topics)
	}
}

func TestSASLHandshakeV0RawToken(t *testing.T) {
	ts := authServer(t)
	c := dial(t, ts.addr)
	if r := handshake(t, c, 0, "PLAIN"); r.ErrorCode != 0 {
		t.Fatalf("handshake v0: error %d", r.ErrorCode)
	}
	tok := plain(security.StaticKeyID(keyA), keyA)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(tok)))
	c.write(append(frame, tok...))
	b, err := c.frame()
	if err != nil || len(b) != 0 {
		t.Fatalf("raw token answer: %q, %v; want an empty token", b, err)
	}
	if md := c.roundTrip(metadataFor("orders"), 1).(*kmsg.MetadataResponse); len(md.Topics) != 1 || md.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata after a v0 exchange: %+v", md.Topics)
	}

	bad := dial(t, ts.addr)
	handshake(t, bad, 0, "PLAIN")
	tok = plain("alice", keyA)
	frame = binary.BigEndian.AppendUint32(nil, uint32(len(tok)))
	bad.write(append(frame, tok...))
	bad.expectClosed()
}

// Each refusal is answered (where Kafka answers) and then the connection is closed;
// nothing but ApiVersions and SASL is served before authentication.
func TestSASLRefusals(t *testing.T) {
	ts := authServer(t)
	t.Run("metadata before authenticating", func(t *testing.T) {
		c := dial(t, ts.addr)
		c.send(metadataFor("orders"), 12)
		c.expectClosed()
	})
	t.Run("metadata after the handshake only", func(t *testing.T) {
		c := dial(t, ts.addr)
		handshake(t, c, 1, "PLAIN")
		c.send(metadataFor("orders"), 12)
		c.expectClosed()
	})
	t.Run("username that is not the key's id", func(t *testing.T) {
		c := dial(t, ts.addr)
		handshake(t, c, 1, "PLAIN")
		r := authenticate(t, c, plain(security.StaticKeyID(keyB), keyA))
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil {
			t.Fatalf("error %d (%v), want SASL_AUTHENTICATION_FAILED with a message", r.ErrorCode, r.ErrorMessage)
		}
		c.expectClosed()
	})
	t.Run("unknown key", func(t *testing.T) {
		c := dial(t, ts.addr)
		handshake(t, c, 1, "PLAIN")
		if r := authenticate(t, c, plain(security.StaticKeyID(keyA), "not-a-key-0123456789")); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("error %d, want SASL_AUTHENTICATION_FAILED", r.ErrorCode)
		}
		c.expectClosed()
	})
	t.Run("authorization id of another key", func(t *testing.T) {
		c := dial(t, ts.addr)
		handshake(t, c, 1, "PLAIN")
		tok := []byte(security.StaticKeyID(keyB) + "\x00" + security.StaticKeyID(keyA) + "\x00" + keyA)
		if r := authenticate(t, c, tok); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("error %d, want SASL_AUTHENTICATION_FAILED", r.ErrorCode)
		}
		c.expectClosed()
	})
	t.Run("malformed token", func(t *testing.T) {
		c := dial(t, ts.addr)
		handshake(t, c, 1, "PLAIN")
		if r := authenticate(t, c, []byte("no-nul-bytes")); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("error %d, want SASL_AUTHENTICATION_FAILED", r.ErrorCode)
		}
		c.expectClosed()
	})
	t.Run("mechanism not served", func(t *testing.T) {
		c := dial(t, ts.addr)
		r := handshake(t, c, 1, "GSSAPI")
		if r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !slices.Equal(r.SupportedMechanisms, []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}) {
			t.Fatalf("error %d, mechanisms %v; want UNSUPPORTED_SASL_MECHANISM and [PLAIN SCRAM-SHA-256 SCRAM-SHA-512]", r.ErrorCode, r.SupportedMechanisms)
		}
		c.expectClosed()
	})
	t.Run("authenticate without handshake", func(t *testing.T) {
		c := dial(t, ts.addr)
		if r := authenticate(t, c, plain(security.StaticKeyID(keyA), keyA)); r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("error %d, want ILLEGAL_SASL_STATE", r.ErrorCode)
		}
		c.expectClosed()
	})
	t.Run("large frame before authenticating", func(t *testing.T) {
		c := dial(t, ts.addr)
		c.write(binary.BigEndian.AppendUint32(nil, 1<<20))
		c.expectClosed()
	})
	if n := testutil.ToFloat64(ts.metrics.authFailures); n != 4 {
		t.Errorf("auth failures counted = %v, want 4", n)
	}
}
