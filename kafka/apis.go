package kafka

import (
	"context"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/membudget"
)

// api is one API the listener serves: its version range and handler.
type api struct {
	key      int16
	name     string
	min, max int16
	handle   handler
	// inline runs the handler on the reader goroutine: SASL requests change the
	// connection's state, which the next request must see.
	inline bool
	// preAuth may be served before SASL authentication.
	preAuth bool
}

// handler serves one decoded request. It returns the response (nil: none is sent, as
// for Produce with acks=0), or an error that closes the connection after the answers
// before it (errAnswerThenClose: after this response).
type handler func(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error)

// request is what a handler knows about the request beyond its body.
type request struct {
	conn   *conn
	header header
	// who is the connection's principal (empty until authenticated, and always
	// without authentication), as the core takes it.
	who broker.Principal
	// Produce requests of one connection reach the writer in the order they came:
	// turn is closed once the previous Produce of the connection has submitted its
	// batches, and submitted is closed by this one (produce.go).
	turn, submitted chan struct{}
	endOnce         sync.Once
	// sizeHint, set by a handler, is roughly the response's encoded size: its buffer is
	// allocated once (a Fetch answer of megabytes).
	sizeHint int
	// release lists buffers of getBuf the response refers to, given back once it is
	// encoded.
	release [][]byte
	// frame is a Produce's frame, read into a buffer of getBuf and given back once the
	// request is answered — unless keepFrame: a partition stopped waiting for the
	// writer, which may still refer to its records (the collector frees it then).
	frame     []byte
	keepFrame bool
	// mem holds the frame and what its answer allocates, against the node's memory
	// budget, until the answer is written (conn.writeLoop releases it).
	mem *membudget.Hold
}

// endTurn lets the connection's next Produce submit its batches.
func (r *request) endTurn() {
	if r.submitted != nil {
		r.endOnce.Do(func() { close(r.submitted) })
	}
}

const (
	produceKey          = 0
	fetchKey            = 1
	apiVersionsKey      = 18
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// apiTable lists the APIs served and their versions. The ranges follow what real
// clients need (../shared/notes/kafka-protocol.md): librdkafka 2.0.2 turns features on
// only when the advertised range overlaps fixed ranges (FindCoordinator must include
// 0; SaslHandshake 0 and 1, SaslAuthenticate 0), and franz-go uses the highest common
// version.
func (s *Server) apiTable() map[int16]api {
	apis := []api{
		{key: apiVersionsKey, min: 0, max: 3, handle: s.apiVersions, inline: true, preAuth: true},
		{key: 3, min: 0, max: 12, handle: s.metadata},
		{key: 10, min: 0, max: 4, handle: s.findCoordinator},
		{key: 60, min: 0, max: 1, handle: s.describeCluster},
		// Produce from 3 (magic 2 batches) to 12 (KIP-890's transactions v2: a
		// transactional produce adds its partition itself); 13 names topics by id.
		// librdkafka needs 3 and 7 (zstd) covered.
		{key: produceKey, min: 3, max: 12, handle: s.produce},
		// Fetch from 4 (isolation level, LSO) to 12: 13 names topics by id. librdkafka
		// needs 4 and 10 covered.
		{key: 1, min: 4, max: 12, handle: s.fetch},
		// ListOffsets to 7 (MAX_TIMESTAMP); 8 adds tiered storage's -4 and -5.
		{key: 2, min: 0, max: 7, handle: s.listOffsets},
		// OffsetCommit and OffsetFetch to 9 (KIP-848's member epochs); 10 names topics
		// by id.
		{key: 8, min: 0, max: 9, handle: s.offsetCommit},
		{key: 9, min: 0, max: 9, handle: s.offsetFetch},
		// The classic group protocol from 0 (librdkafka 2.0.2 turns its group consumer
		// on only when v0 is covered): JoinGroup v4 asks new members to come back with
		// an id, v5 brings static membership, v9 SkipAssignment.
		{key: 11, min: 0, max: 9, handle: s.joinGroup},
		{key: 12, min: 0, max: 4, handle: s.heartbeat},
		{key: 13, min: 0, max: 5, handle: s.leaveGroup},
		{key: 14, min: 0, max: 5, handle: s.syncGroup},
		// DescribeGroups to 5: 6 answers GROUP_ID_NOT_FOUND for a group that does not
		// exist, where 5 describes it as Dead.
		{key: 15, min: 0, max: 5, handle: s.describeGroups},
		{key: 16, min: 0, max: 5, handle: s.listGroups},
		{key: 42, min: 0, max: 2, handle: s.deleteGroups},
		{key: 47, min: 0, max: 0, handle: s.offsetDelete},
		// KIP-848: franz-go uses it only when v1 is advertised (and the client opts in).
		{key: 68, min: 0, max: 1, handle: s.consumerGroupHeartbeat},
		{key: 69, min: 0, max: 1, handle: s.consumerGroupDescribe},
		{key: 19, min: 0, max: 7, handle: s.createTopics},
		{key: 20, min: 0, max: 6, handle: s.deleteTopics},
		{key: 21, min: 0, max: 2, handle: s.deleteRecords},
		// Transactions (txn.go), every one from version 0 (older clients negotiate
		// down); the v2 paths (InitProducerId 5, AddOffsetsToTxn 4, EndTxn 5,
		// TxnOffsetCommit 5) with the finalized feature transaction.version 2.
		{key: 22, min: 0, max: 5, handle: s.initProducerID},
		{key: 24, min: 0, max: 4, handle: s.addPartitionsToTxn},
		{key: 25, min: 0, max: 4, handle: s.addOffsetsToTxn},
		{key: 26, min: 0, max: 5, handle: s.endTxn},
		{key: 28, min: 0, max: 5, handle: s.txnOffsetCommit},
		{key: 65, min: 0, max: 0, handle: s.describeTransactions},
		{key: 66, min: 0, max: 1, handle: s.listTransactions},
		{key: 32, min: 0, max: 4, handle: s.describeConfigs},
		{key: 33, min: 0, max: 2, handle: s.alterConfigs},
		{key: 37, min: 0, max: 3, handle: s.createPartitions},
		{key: 44, min: 0, max: 1, handle: s.incrementalAlterConfigs},
		// Share groups (KIP-932, share.go): the stable versions (Kafka 4.1's v1; ShareFetch
		// and ShareAcknowledge v2, Kafka 4.2's, which franz-go needs).
		{key: 76, min: 1, max: 1, handle: s.shareGroupHeartbeat},
		{key: 77, min: 1, max: 1, handle: s.shareGroupDescribe},
		{key: 78, min: 1, max: 2, handle: s.shareFetch},
		{key: 79, min: 1, max: 2, handle: s.shareAcknowledge},
		{key: 90, min: 0, max: 1, handle: s.describeShareGroupOffsets},
		{key: 91, min: 0, max: 0, handle: s.alterShareGroupOffsets},
		{key: 92, min: 0, max: 0, handle: s.deleteShareGroupOffsets},
		{key: 29, min: 0, max: 3, handle: s.describeACLs},
		{key: 30, min: 0, max: 3, handle: s.createACLs},
		{key: 31, min: 0, max: 3, handle: s.deleteACLs},
		// SCRAM credentials (KIP-554), kept in the catalog (scram.go).
		{key: 50, min: 0, max: 0, handle: s.describeUserSCRAMCredentials},
		{key: 51, min: 0, max: 0, handle: s.alterUserSCRAMCredentials},
		// Client quotas (quotas.go).
		{key: 48, min: 0, max: 1, handle: s.describeClientQuotas},
		{key: 49, min: 0, max: 1, handle: s.alterClientQuotas},
	}
	if s.cfg.Auth != nil {
		apis = append(apis,
			api{key: saslHandshakeKey, min: 0, max: 1, handle: s.saslHandshake, inline: true, preAuth: true},
			api{key: saslAuthenticateKey, min: 0, max: 2, handle: s.saslAuthenticate, inline: true, preAuth: true},
		)
	}
	m := make(map[int16]api, len(apis))
	for _, a := range apis {
		a.name = kmsg.NameForKey(a.key)
		if r := kmsg.RequestForKey(a.key); r == nil || r.MaxVersion() < a.max {
			panic("kafka: api table: kmsg cannot encode " + a.name) // a programming error
		}
		m[a.key] = a
	}
	return m
}

// apiVersions answers with every API served and its version range.
func (s *Server) apiVersions(_ context.Context, _ *request, req kmsg.Request) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	keys := make([]int16, 0, len(s.apis))
	for k := range s.apis {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		a := s.apis[k]
		v := kmsg.NewApiVersionsResponseApiKey()
		v.ApiKey, v.MinVersion, v.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, v)
	}
	// Transactions v2 (KIP-890): an epoch bump per transaction, partitions added by
	// the produce, EndTxn answering the new epoch. Clients take the v2 paths only on
	// the finalized feature (v3+ answers carry it).
	sf := kmsg.NewApiVersionsResponseSupportedFeature()
	sf.Name, sf.MinVersion, sf.MaxVersion = transactionVersionFeature, 0, 2
	resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{sf}
	ff := kmsg.NewApiVersionsResponseFinalizedFeature()
	ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = transactionVersionFeature, 2, 2
	resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{ff}
	resp.FinalizedFeaturesEpoch = 1
	return resp, nil
}

// transactionVersionFeature is KIP-890's feature flag.
const transactionVersionFeature = "transaction.version"

// apiVersionsTooNew is the answer to an ApiVersions request newer than a serves: v0,
// UNSUPPORTED_VERSION, and the ApiVersions range alone, so the client retries within it.
func apiVersionsTooNew(a api) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	v := kmsg.NewApiVersionsResponseApiKey()
	v.ApiKey, v.MinVersion, v.MaxVersion = a.key, a.min, a.max
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{v}
	return resp
}

// unserved says why a Kafka API this server knows of is not served: it is not
// advertised, and a client that sends it anyway has its connection closed, as Kafka
// closes it for an API it does not know.
func unserved(key int16) (string, bool) {
	switch key {
	case 27: // WriteTxnMarkers
		return "transaction markers are the catalog's rows, written by EndTxn: no broker writes them to another", true
	case 23:
		return "leader epochs are not tracked: the leader epoch is always 0", true
	}
	if kmsg.RequestForKey(key) != nil {
		return "not served by this server", true
	}
	return "", false
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
