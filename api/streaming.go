package api

import (
	"net/http"
	"strings"
)

// noStreamingMiddleware answers a Server-Sent Events tail with 406 streaming_unsupported
// on front ends that buffer whole responses (API Gateway's HTTP API in front of Lambda):
// there a tail would never deliver an event, and would hold the invocation until the
// gateway's 30 s timeout. Plain fetches, long-polls included, are untouched.
func noStreamingMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/records") && wantsEventStream(r) {
			writeProblem(w, r, newProblem(CodeStreamingUnsupported,
				"this endpoint cannot stream Server-Sent Events (it buffers whole responses): long-poll with wait_ms instead, or use a streaming endpoint (a Function URL in response-streaming mode, or a container node)"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
