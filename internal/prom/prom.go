// Package prom registers Prometheus collectors the same way for every part of a node.
package prom

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns it — or, when an equal collector is already
// registered there, that one, so that several writers, readers, compactors or APIs in
// one process (tests, the embedded mode, a second API over one node) count into the same
// series instead of panicking. A nil reg keeps c unregistered. A clash with a different
// metric of the same name is a programming error: it panics.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic("register metrics: " + err.Error())
	}
	return c
}
