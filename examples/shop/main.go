// Command shop runs the joins example of the Streams API: orders and payments settled
// by a windowed outer join, orders enriched with their customers by a foreign-key
// join, exactly once. See README.md ("Streams API").
//
//	shop --server http://127.0.0.1:8080 --state-dir /var/lib/shop --create-topics
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/examples/shop/shop"
	"github.com/strata-io/strata/streams"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "shop:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run() error {
	var (
		server     = flag.String("server", env("STRATA_SERVER", "http://127.0.0.1:8080"), "Strata `URL` (env STRATA_SERVER)")
		app        = flag.String("app", "shop", "application `id`: the group, transactional ids and internal topic prefix")
		stateDir   = flag.String("state-dir", "", "`directory` for the local stores (Pebble); empty keeps them in memory")
		instance   = flag.String("instance", "", "stable instance `id` (member id); default random")
		guarantee  = flag.String("guarantee", "exactly-once", "exactly-once or at-least-once")
		interval   = flag.Duration("commit-interval", 100*time.Millisecond, "how often each task commits")
		session    = flag.Duration("session-timeout", 10*time.Second, "group session timeout")
		create     = flag.Bool("create-topics", false, "create the input and output topics if missing")
		partitions = flag.Int("partitions", 4, "partitions of the topics --create-topics creates (customers: one less)")
		maxCommit  = flag.Int("max-commit-records", 0, "records (outputs and changelog) per commit; 0: the library's default (5,000)")
		fetchMax   = flag.Int("fetch-max-records", 0, "records per fetch; 0: the library's default (1,000)")
		metrics    = flag.String("metrics-addr", "", "serve Prometheus metrics at http://`ADDR`/metrics and the counters and task states as JSON at /status")
		logLevel   = flag.String("log-level", "info", "debug, info, warn or error")
	)
	flag.Parse()
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	g := streams.ExactlyOnce
	switch *guarantee {
	case "exactly-once":
	case "at-least-once":
		g = streams.AtLeastOnce
	default:
		return fmt.Errorf("--guarantee %q: exactly-once or at-least-once", *guarantee)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := client.New(*server)
	if *create {
		for _, t := range []string{shop.Orders, shop.Payments, shop.Customers, shop.Statuses, shop.Enriched} {
			n := int32(*partitions)
			if t == shop.Customers && n > 1 {
				n-- // partitioned otherwise: the foreign-key join does not need them alike
			}
			if _, err := c.CreateTopic(ctx, t, n, nil); err != nil && !client.HasCode(err, "topic_exists") {
				return err
			}
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a, err := streams.New(shop.Build(*app), streams.Config{
		Client: c, StateDir: *stateDir, InstanceID: *instance, Guarantee: g, CommitInterval: *interval,
		SessionTimeout: *session, InputPositionHeader: "strata-input", Logger: log,
		MaxCommitRecords: *maxCommit, FetchMaxRecords: *fetchMax, Registerer: reg,
	})
	if err != nil {
		return err
	}
	if *metrics != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			tasks := map[string]string{}
			for id, s := range a.TaskStates() {
				tasks[id.String()] = s
			}
			_ = json.NewEncoder(w).Encode(struct {
				Metrics streams.MetricsSnapshot `json:"metrics"`
				Tasks   map[string]string       `json:"tasks"`
			}{a.Metrics(), tasks})
		})
		srv := &http.Server{Addr: *metrics, Handler: mux}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server", "err", err)
			}
		}()
		defer srv.Close()
	}
	log.Info("running", "topology", a.Topology().Describe())
	return a.Run(ctx)
}
