package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	conn      *conn
	header    header
	principal string // "" until SASL authentication (and always, without keys)
}

const (
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
	return resp, nil
}

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
