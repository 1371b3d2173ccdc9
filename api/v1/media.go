package v1

// Media types of the API's bodies.
const (
	// ContentTypeJSON is every request body's type but record batches', and every
	// answer's but errors', streams' and record batches'.
	ContentTypeJSON = "application/json"
	// ContentTypeProblem is the type of every error answer (RFC 9457): Problem.
	ContentTypeProblem = "application/problem+json"
	// ContentTypeRecordBatch is a body of Kafka v2 record batches back to back: a
	// produce to one partition (?partition=N), or a fetch that accepts it.
	ContentTypeRecordBatch = "application/vnd.kafka.record-batch"
	// ContentTypeEventStream is a tail's answer: Server-Sent Events, one Record per
	// event, "event: error" with a Problem.
	ContentTypeEventStream = "text/event-stream"
)

// Headers of a record-batch fetch's answer: what the JSON answer (FetchResponse)
// carries beside the records.
const (
	HeaderNextOffset    = "Strata-Next-Offset"
	HeaderHighWatermark = "Strata-High-Watermark"
	// HeaderLastStableOffset is the partition's last stable offset: a read_committed
	// fetch stops there.
	HeaderLastStableOffset = "Strata-Last-Stable-Offset"
	HeaderLogStartOffset   = "Strata-Log-Start-Offset"
)

// ProblemTypePrefix begins every Problem's type: the URN of its code, which does not
// pretend to resolve anywhere.
const ProblemTypePrefix = "urn:strata:problem:"
