package push_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/push"
)

// verify is the receiver's check documented in README.md ("Push delivery"), as it is
// written there (TestReadmeVerifyIsTheTested keeps them the same).
func verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) bool {
	ts, sig, _ := strings.Cut(header, ",v1=")
	t, err := strconv.ParseInt(strings.TrimPrefix(ts, "t="), 10, 64)
	if err != nil || now.Sub(time.Unix(t, 0)).Abs() > tolerance {
		return false // malformed, or too old: a replay
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strings.TrimPrefix(ts, "t=") + "." + string(body)))
	return hmac.Equal([]byte(sig), []byte(hex.EncodeToString(mac.Sum(nil))))
}

func TestSignature(t *testing.T) {
	now := time.Now()
	body := []byte(`{"records":[{"topic":"t","partition":0,"offset":1}]}`)
	h := push.Sign("whsec_x", now, body)
	if !verify("whsec_x", h, body, now, 5*time.Minute) {
		t.Fatalf("a signature %q does not verify", h)
	}
	tampered := []byte(strings.Replace(string(body), `"offset":1`, `"offset":2`, 1))
	if verify("whsec_x", h, tampered, now, 5*time.Minute) {
		t.Fatal("a tampered body verified")
	}
	if verify("whsec_other", h, body, now, 5*time.Minute) {
		t.Fatal("another secret verified")
	}
	old := push.Sign("whsec_x", now.Add(-time.Hour), body)
	if verify("whsec_x", old, body, now, 5*time.Minute) {
		t.Fatal("a replayed old timestamp verified")
	}
	if verify("whsec_x", "garbage", body, now, 5*time.Minute) {
		t.Fatal("a malformed header verified")
	}
}

// TestReadmeVerifyIsTheTested: the README's receiver check is this file's verify,
// line for line.
func TestReadmeVerifyIsTheTested(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("signature_test.go")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(self), "func verify(")
	end := strings.Index(string(self)[start:], "\n}\n")
	fn := string(self)[start : start+end+3]
	if !strings.Contains(string(readme), fn) {
		t.Fatalf("README.md's receiver check is not verify as tested:\n%s", fn)
	}
}
