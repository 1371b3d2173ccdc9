// Package secretstest is a stand-in for AWS Secrets Manager's GetSecretValue, for tests
// of code that uses the real SDK client (point it at URL with BaseEndpoint, or at
// AWS_ENDPOINT_URL_SECRETS_MANAGER for a whole process).
package secretstest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Server answers GetSecretValue for its secrets (by ARN or name) and counts the reads.
type Server struct {
	URL string

	mu      sync.Mutex
	secrets map[string]string
	reads   map[string]int
}

// New starts a server holding secrets, closed when the test ends.
func New(t testing.TB, secrets map[string]string) *Server {
	s := &Server{secrets: secrets, reads: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Reads is how many times id was read.
func (s *Server) Reads(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[id]
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	fail := func(status int, typ, msg string) {
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
	}
	if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" {
		fail(400, "InvalidRequestException", "only GetSecretValue is served here")
		return
	}
	if r.Header.Get("Authorization") == "" {
		fail(400, "MissingAuthenticationTokenException", "unsigned request")
		return
	}
	var in struct{ SecretId string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		fail(400, "InvalidRequestException", err.Error())
		return
	}
	s.mu.Lock()
	v, ok := s.secrets[in.SecretId]
	s.reads[in.SecretId]++
	s.mu.Unlock()
	if !ok {
		fail(400, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ARN": in.SecretId, "Name": in.SecretId, "SecretString": v, "VersionId": "v1"})
}
