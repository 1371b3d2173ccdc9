package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/broker"
)

// handlerFunc serves one route: it writes its answer and returns nil, or returns the
// problem to answer with, which serve writes.
type handlerFunc func(w http.ResponseWriter, r *http.Request) *problem

// serve adapts h to net/http. Before the body is read it refuses query parameters the
// route does not take (query.go), then answers role_unavailable when the node cannot
// serve what the route needs; then it reserves the body in the request's hold on the
// node's memory budget (memory.go), which is released, and the body's buffer pooled,
// once the answer is written.
func (a *API) serve(need broker.Capability, h handlerFunc) http.HandlerFunc {
	return a.serveWith(need, false, h)
}

// serveProduce is serve for a produce route: its body is admitted (admission.go)
// before it is reserved.
func (a *API) serveProduce(h handlerFunc) http.HandlerFunc {
	return a.serveWith(broker.CapProduce, true, h)
}

func (a *API) serveWith(need broker.Capability, admit bool, h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := checkQuery(r)
		if p == nil {
			if err := a.core.Check(need); err != nil {
				p = a.problemFor(r, err)
			} else {
				var st *reqState
				r, st, p = a.admitBody(r, need, admit)
				defer st.done()
				if p == nil {
					p = h(w, r)
				}
			}
		}
		if p != nil {
			writeProblem(w, r, p)
		}
	}
}

// authorize asks the core whether the caller may do op on res, before the request's
// body is read or anything looked up: a refusal is the same whether res exists or not.
func (a *API) authorize(r *http.Request, op acl.Operation, res acl.Resource) *problem {
	if err := a.core.Authorize(r.Context(), principal(r), op, res); err != nil {
		return a.problemFor(r, err)
	}
	return nil
}

// decodeJSON reads a JSON request body into a T (readBody, then decodeStrict).
func decodeJSON[T any](r *http.Request) (T, *problem) {
	var v T
	body, p := readBody(r)
	if p == nil {
		p = decodeStrict(body, &v)
	}
	return v, p
}

// writeJSON writes v as the response body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("api: encode response: " + err.Error()) // response types are plain data
	}
	writeJSONBytes(w, status, b)
}

func writeJSONBytes(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// checkJSONContentType requires application/json (parameters such as charset allowed).
func checkJSONContentType(r *http.Request) *problem {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return newProblem(CodeUnsupportedMediaType, "Content-Type must be application/json, not %q", ct)
	}
	return nil
}

// readBody checks the content type and reads the whole body, bounded by
// bodyLimitMiddleware.
func readBody(r *http.Request) ([]byte, *problem) {
	if p := checkJSONContentType(r); p != nil {
		return nil, p
	}
	return readRawBody(r) // sized from Content-Length: no copying through a growing buffer
}

// decodeStrict decodes one JSON value from body into v: invalid UTF-8, unknown fields
// and trailing data are refused. UTF-8 is checked up front because encoding/json would
// otherwise replace invalid bytes silently in strings and keep them in raw values.
func decodeStrict(body []byte, v any) *problem {
	if !utf8.Valid(body) {
		return newProblem(CodeInvalidJSON, "the request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonProblem(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return newProblem(CodeInvalidJSON, "unexpected data after the JSON value")
	}
	return nil
}

// jsonProblem classifies a decode error: broken JSON is invalid_json; well-formed JSON
// of the wrong shape (unknown field, wrong type) is invalid_request.
func jsonProblem(err error) *problem {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return newProblem(CodeInvalidJSON, "malformed JSON at byte %d: %v", se.Offset, err)
	case errors.Is(err, io.EOF):
		return newProblem(CodeInvalidJSON, "the request body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return newProblem(CodeInvalidJSON, "the request body ends inside a JSON value")
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "the body"
		}
		code := CodeInvalidRequest
		if c, ok := typeErrorCodes[te.Struct+"."+te.Field]; ok {
			code = c
		}
		return newProblem(code, "%s must be %s, got JSON %s", field, jsonKind(te.Type), te.Value).with("field", te.Field)
	}
	return newProblem(CodeInvalidRequest, "%s", strings.TrimPrefix(err.Error(), "json: "))
}

// typeErrorCodes are the fields (wire type.json name) whose value of the wrong JSON
// type is refused with their own code rather than invalid_request: a partition count
// that is not an integer is an invalid partition count.
var typeErrorCodes = map[string]Code{
	"CreateTopicRequest.partitions": CodeInvalidPartitionCount,
	"UpdateTopicRequest.partitions": CodeInvalidPartitionCount,
}

// jsonKind names what a Go type is in JSON, for a person who writes JSON: "an array",
// "an object", "an integer" (not "[]v1.ProduceRecord").
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer within its range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another JSON type"
}

// topicParam returns the {topic} path parameter; the core checks the name.
func topicParam(r *http.Request) string { return chi.URLParam(r, "topic") }

// partitionParam returns the {partition} path parameter: decimal digits only.
func partitionParam(r *http.Request) (int32, *problem) {
	s := chi.URLParam(r, "partition")
	n, ok := parseDigits(s, 1<<31-1)
	if !ok {
		return 0, newProblem(CodeInvalidPartition, "partition %q must be a non-negative integer", truncate(s, 32))
	}
	return int32(n), nil
}

// parseDigits parses a non-empty run of ASCII digits no larger than max. Signs, spaces
// and exponents are refused: an offset or partition is written one way only.
func parseDigits(s string, max int64) (int64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (max-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// parseTime parses a timestamp written as unix milliseconds or RFC 3339, not before
// 1970 (Kafka reserves negative timestamps).
func parseTime(s string) (int64, bool) {
	if n, ok := parseDigits(s, 1<<63-1); ok {
		return n, true
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.UnixMilli() < 0 {
		return 0, false
	}
	return t.UnixMilli(), true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
