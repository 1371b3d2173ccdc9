package lambda

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/strata-io/strata/lambda/secretstest"
)

const (
	catalogARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:strata-catalog-AbCdEf"
	keysARN    = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:strata-api-keys-XyZ"
)

func TestParseSecretRefs(t *testing.T) {
	refs, err := ParseSecretRefs(" PGPASSWORD=" + catalogARN + "#password , STRATA_API_KEYS=" + keysARN + ",")
	want := []SecretRef{{"PGPASSWORD", catalogARN, "password"}, {"STRATA_API_KEYS", keysARN, ""}}
	if err != nil || len(refs) != 2 || refs[0] != want[0] || refs[1] != want[1] {
		t.Errorf("ParseSecretRefs = %+v, %v; want %+v", refs, err, want)
	}
	for _, bad := range []string{"PGPASSWORD", "=arn", "X=", "X=#password", "A B=arn", "X=a,X=b"} {
		if _, err := ParseSecretRefs(bad); err == nil {
			t.Errorf("ParseSecretRefs(%q) accepted", bad)
		}
	}
}

// TestLoadSecrets reads through the real SDK client from a stand-in Secrets Manager.
func TestLoadSecrets(t *testing.T) {
	srv := secretstest.New(t, map[string]string{
		catalogARN: `{"engine":"postgres","username":"strata","password":"s3cr3t-pw","port":5432}`,
		keysARN:    "key-one-0123456789abcdef,key-two-0123456789abcdef",
		"plain":    "not json",
	})
	c := secretsmanager.New(secretsmanager.Options{
		Region: "eu-west-1", BaseEndpoint: &srv.URL,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAEXAMPLE", "example", ""),
	})
	ctx := context.Background()
	refs, err := ParseSecretRefs("PGPASSWORD=" + catalogARN + "#password,PGUSER=" + catalogARN + "#username,PGPORT=" + catalogARN + "#port,STRATA_API_KEYS=" + keysARN)
	if err != nil {
		t.Fatal(err)
	}
	got, err := LoadSecrets(ctx, c, refs)
	want := map[string]string{"PGPASSWORD": "s3cr3t-pw", "PGUSER": "strata", "PGPORT": "5432", "STRATA_API_KEYS": "key-one-0123456789abcdef,key-two-0123456789abcdef"}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("LoadSecrets = %v, %v; want %v", got, err, want)
	}
	if n := srv.Reads(catalogARN); n != 1 {
		t.Errorf("the catalog secret was read %d times, want once", n)
	}

	for _, tc := range []struct{ spec, want string }{
		{"X=arn:missing", "read secret arn:missing for X"},
		{"X=plain#password", "wants a JSON object"},
		{"X=" + catalogARN + "#pass", `has no key "pass" (it has engine, password, port, username)`},
	} {
		refs, _ := ParseSecretRefs(tc.spec)
		_, err := LoadSecrets(ctx, c, refs)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: %v; want an error saying %q (and no secret)", tc.spec, err, tc.want)
		}
	}
	refs, _ = ParseSecretRefs("X=arn:missing")
	_, err = LoadSecrets(ctx, c, refs)
	if nf := (*types.ResourceNotFoundException)(nil); !errors.As(err, &nf) {
		t.Errorf("a missing secret: %v, want ResourceNotFoundException in the chain", err)
	}
}
