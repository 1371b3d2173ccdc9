package api

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the hand-written OpenAPI 3.1 description of every route, schema
// and error code. TestOpenAPICoversRoutes walks the router and the error table against
// it, so it cannot drift silently.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the embedded OpenAPI document.
func OpenAPI() []byte { return append([]byte(nil), openAPIDocument...) }

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openAPIDocument)
}
