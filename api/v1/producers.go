package v1

// InitProducerRequest is POST /v1/producers. An empty body asks for a plain
// idempotent producer.
type InitProducerRequest struct {
	// TransactionalID is a stable id of the application instance: initialising it again
	// returns the same producer id at the next epoch and fences the older instance.
	TransactionalID *string `json:"transactional_id,omitempty"`
	// ProducerID and Epoch are the identity the caller holds: the epoch is bumped only
	// if it is still the id's current one.
	ProducerID *int64 `json:"producer_id,omitempty"`
	Epoch      *int64 `json:"epoch,omitempty"`
}

// InitProducerResponse is a producer identity as POST /v1/producers hands it out.
type InitProducerResponse struct {
	ID    int64 `json:"producer_id"`
	Epoch int16 `json:"epoch"`
}
