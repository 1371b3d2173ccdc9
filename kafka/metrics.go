package kafka

import (
	"reflect"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-io/strata/internal/prom"
)

// metrics are the listener's Prometheus metrics; they exist whether or not a registry
// was given, so the code never checks for nil.
type metrics struct {
	requests     *prometheus.CounterVec   // api, version
	errors       *prometheus.CounterVec   // api, version
	latency      *prometheus.HistogramVec // api, version
	connections  prometheus.Gauge
	accepted     prometheus.Counter
	refused      *prometheus.CounterVec // reason
	closed       *prometheus.CounterVec // reason
	protocol     *prometheus.CounterVec // reason
	authFailures prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	byAPI := []string{"api", "version"}
	return &metrics{
		requests: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_kafka_requests_total",
			Help: "Kafka requests served, by API and version.",
		}, byAPI)),
		errors: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_kafka_request_errors_total",
			Help: "Kafka requests answered with an error code anywhere in the response, or that closed the connection, by API and version.",
		}, byAPI)),
		latency: prom.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strata_kafka_request_seconds",
			Help:    "Time from a Kafka request's arrival to its response being ready, by API and version.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14), // 100µs .. ~15s
		}, byAPI)),
		connections: prom.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_kafka_connections",
			Help: "Open Kafka connections.",
		})),
		accepted: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_kafka_connections_accepted_total",
			Help: "Kafka connections accepted.",
		})),
		refused: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_kafka_connections_refused_total",
			Help: "Kafka connections closed as they were accepted, by the limit reached (max_connections; with authentication, unauthenticated and unauthenticated_per_host: the connections not yet authenticated, in all and from one address).",
		}, []string{"reason"})),
		closed: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_kafka_connections_closed_total",
			Help: "Kafka connections closed by the server, by reason (idle; revoked: their key or SCRAM credential was; session_expired: their OAUTHBEARER token expired without re-authentication; auth_timeout: not authenticated within --kafka-auth-timeout).",
		}, []string{"reason"})),
		protocol: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_kafka_protocol_errors_total",
			Help: "Kafka connections closed for what they sent, by reason (frame_size, truncated_frame, bad_header, bad_request, unknown_api, unserved_api, unsupported_version, unauthenticated).",
		}, []string{"reason"})),
		authFailures: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_kafka_auth_failures_total",
			Help: "SASL authentications refused.",
		})),
	}
}

// observe records one request. Versions outside the API's range share one label, so a
// client cannot mint label values.
func (m *metrics) observe(api string, version int16, served bool, took time.Duration, failed bool) {
	v := "unsupported"
	if served {
		v = strconv.Itoa(int(version))
	}
	m.requests.WithLabelValues(api, v).Inc()
	m.latency.WithLabelValues(api, v).Observe(took.Seconds())
	if failed {
		m.errors.WithLabelValues(api, v).Inc()
	}
}

func (m *metrics) protocolError(reason string) { m.protocol.WithLabelValues(reason).Inc() }

// hasErrorCode reports whether any ErrorCode field of a response — top level, per topic,
// per partition, per coordinator — is set. Reflection keeps one definition of "failed"
// for every API, present and to come.
func hasErrorCode(resp any) bool { return errorCodeIn(reflect.ValueOf(resp)) }

func errorCodeIn(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer:
		return !v.IsNil() && errorCodeIn(v.Elem())
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			switch {
			case f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16:
				if v.Field(i).Int() != 0 {
					return true
				}
			case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
				if errorCodeIn(v.Field(i)) {
					return true
				}
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			if errorCodeIn(v.Index(i)) {
				return true
			}
		}
	}
	return false
}
