package v1

// HeaderClientID names the caller's client id, as a Kafka client's request header
// does: quotas may be set per client id.
const HeaderClientID = "Strata-Client-Id"

// QuotaEntity is who a quota applies to: a user ("User:alice", or "<default>"), a client
// id (or "<default>"), or both.
type QuotaEntity struct {
	User     string `json:"user,omitempty"`
	ClientID string `json:"client_id,omitempty"`
}

// QuotaEntry is an entity and its quotas: producer_byte_rate, consumer_byte_rate
// (bytes per second), request_percentage, controller_mutation_rate (partitions per
// second), topic_count and connector_count.
type QuotaEntry struct {
	Entity QuotaEntity        `json:"entity"`
	Quotas map[string]float64 `json:"quotas"`
}

// QuotaList answers GET /v1/quotas.
type QuotaList struct {
	Quotas []QuotaEntry `json:"quotas"`
}

// PutQuotasRequest is PUT /v1/quotas: it sets the keys given on the entity, and removes
// those given as null; keys not named are left as they are. It answers the entity's
// QuotaEntry as it now stands.
type PutQuotasRequest struct {
	Entity QuotaEntity         `json:"entity"`
	Quotas map[string]*float64 `json:"quotas"`
}
