// Package v1 is the one set of wire types of Strata's HTTP API v1 (docs/design.md
// "HTTP API v1"): every JSON request and response body, the media types and headers the
// API defines, and the problem+json error body. The server (package api) decodes its
// requests into these types and encodes its answers from them — or, on the produce and
// fetch hot paths, renders exactly their shape by hand, which api's tests hold to these
// types; the Go client (package client) sends and reads them. api/openapi.json
// documents the same shapes, and a test in package api walks the document against these
// types field by field, so a field added on one side only fails it.
//
// The package is a leaf: it imports the standard library only, so a program built on
// the client carries nothing of the server.
//
// Conventions:
//   - A request field the server requires is a pointer where the zero value is a real
//     value (nil: absent, refused), so the server can tell absence from zero; an
//     optional one is tagged omitempty.
//   - A response field is a value, present even when it is zero unless tagged
//     omitempty (the document then leaves it out of "required").
//   - A field whose meaning the server decides by a topic's configuration, or that
//     takes several JSON forms the server reads itself (a produced record's key, value,
//     headers, partition and timestamp), is raw JSON: the document says what it may be.
//   - Types named like the document's schemas are those schemas; the list answers
//     (TopicList, PartitionList, ...) are the document's inline objects.
package v1
