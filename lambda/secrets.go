package lambda

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// SecretsEnv is the environment variable naming the secrets a function reads from
// Secrets Manager at start-up, so that no password or key sits in its plain
// environment (which anyone with lambda:GetFunctionConfiguration can read):
//
//	STRATA_SECRETS="PGPASSWORD=arn:aws:secretsmanager:...:secret:catalog-AbC#password,STRATA_API_KEYS=arn:...:secret:keys-XyZ"
//
// Each item is NAME=SECRET, where SECRET is an ARN or name, optionally followed by
// #KEY to take one key of a JSON secret (RDS's {"username","password",...}); without
// it the whole secret string is the value.
const SecretsEnv = "STRATA_SECRETS"

// SecretRef is one item of SecretsEnv.
type SecretRef struct {
	Name   string // the environment variable it sets
	Secret string // ARN or name
	Key    string // JSON key; "" for the whole string
}

// ParseSecretRefs parses SecretsEnv's value.
func ParseSecretRefs(spec string) ([]SecretRef, error) {
	var refs []SecretRef
	seen := map[string]bool{}
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, src, ok := strings.Cut(item, "=")
		name, src = strings.TrimSpace(name), strings.TrimSpace(src)
		if !ok || name == "" || src == "" || strings.ContainsAny(name, " #") {
			return nil, fmt.Errorf("%s: item %q: want NAME=SECRET_ARN or NAME=SECRET_ARN#JSON_KEY", SecretsEnv, item)
		}
		if seen[name] {
			return nil, fmt.Errorf("%s: %s given twice", SecretsEnv, name)
		}
		seen[name] = true
		secret, key, _ := strings.Cut(src, "#")
		if secret == "" {
			return nil, fmt.Errorf("%s: %s names no secret", SecretsEnv, name)
		}
		refs = append(refs, SecretRef{Name: name, Secret: secret, Key: key})
	}
	return refs, nil
}

// SecretsClient is what LoadSecrets needs of Secrets Manager (*secretsmanager.Client).
type SecretsClient interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// LoadSecrets reads each secret once and returns the value of every ref by its name.
// Errors name the variable and the secret, never a value.
func LoadSecrets(ctx context.Context, c SecretsClient, refs []SecretRef) (map[string]string, error) {
	strs := map[string]string{}
	out := make(map[string]string, len(refs))
	for _, r := range refs {
		s, ok := strs[r.Secret]
		if !ok {
			res, err := c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &r.Secret})
			if err != nil {
				return nil, fmt.Errorf("lambda: read secret %s for %s: %w", r.Secret, r.Name, err)
			}
			if res.SecretString == nil {
				return nil, fmt.Errorf("lambda: secret %s for %s holds binary data: store it as a string", r.Secret, r.Name)
			}
			s = *res.SecretString
			strs[r.Secret] = s
		}
		if r.Key == "" {
			out[r.Name] = s
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal([]byte(s), &fields); err != nil {
			return nil, fmt.Errorf("lambda: secret %s for %s: #%s wants a JSON object, and the secret is not one", r.Secret, r.Name, r.Key)
		}
		v, ok := fields[r.Key]
		if !ok {
			keys := make([]string, 0, len(fields))
			for k := range fields {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return nil, fmt.Errorf("lambda: secret %s for %s has no key %q (it has %s)", r.Secret, r.Name, r.Key, strings.Join(keys, ", "))
		}
		switch v := v.(type) {
		case string:
			out[r.Name] = v
		default:
			b, _ := json.Marshal(v)
			out[r.Name] = string(b)
		}
	}
	return out, nil
}
