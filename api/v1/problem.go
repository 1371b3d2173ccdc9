package v1

// Problem is every error answer, application/problem+json (RFC 9457) with the API's
// stable Code, which clients branch on (never on Title or Detail). Extension members
// beside these — "record", "field", "parameter", "config", "partitions", ... — say
// what was wrong; the document lists them under the schema and each code's
// description names those it carries.
type Problem struct {
	// Type is ProblemTypePrefix + Code.
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
	// Hint is how to fix it in the API's terms (member_epoch, POST /v1/producers), when
	// there is more to say than the detail.
	Hint string `json:"hint,omitempty"`
	// RequestID is the request's X-Request-Id: the server's log has its error chain
	// under it.
	RequestID string `json:"request_id,omitempty"`
}

// Status answers /healthz ("ok") and /readyz ("ready").
type Status struct {
	Status string `json:"status"`
}
