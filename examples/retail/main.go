// Command retail runs the retail example of the Streams API: sales and shipments in,
// reorders and price adjustments out, exactly once. See README.md ("Streams API").
//
//	retail --server http://127.0.0.1:8080 --state-dir /var/lib/retail --create-topics
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
	"github.com/strata-io/strata/examples/retail/retail"
	"github.com/strata-io/strata/streams"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "retail:", err)
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
		app        = flag.String("app", "retail", "application `id`: the group, transactional ids and internal topic prefix")
		stateDir   = flag.String("state-dir", "", "`directory` for the local stores (Pebble); empty keeps them in memory")
		instance   = flag.String("instance", "", "stable instance `id` (member id); default random")
		guarantee  = flag.String("guarantee", "exactly-once", "exactly-once or at-least-once")
		interval   = flag.Duration("commit-interval", 100*time.Millisecond, "how often each task commits")
		session    = flag.Duration("session-timeout", 10*time.Second, "group session timeout")
		tick       = flag.Duration("tick", 0, "send a tick per task to retail-ticks at this wall-clock interval (0: off)")
		create     = flag.Bool("create-topics", false, "create the input and output topics if missing")
		partitions = flag.Int("partitions", 6, "partitions of the topics --create-topics creates")
		maxCommit  = flag.Int("max-commit-records", 0, "records (outputs and changelog) per commit; 0: the library's default (5,000)")
		fetchMax   = flag.Int("fetch-max-records", 0, "records per fetch; 0: the library's default (1,000)")
		deadLetter = flag.String("dead-letter-topic", "", "send input records that fail to decode to this `topic` (created if missing) instead of stopping")
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
		topics := []string{retail.Sales, retail.Shipments, retail.Reorders, retail.PriceAdjustments}
		if *tick > 0 {
			topics = append(topics, retail.Ticks)
		}
		for _, t := range topics {
			if _, err := c.CreateTopic(ctx, t, int32(*partitions), nil); err != nil && !client.HasCode(err, "topic_exists") {
				return err
			}
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a, err := streams.New(retail.Build(*app, retail.Options{Tick: *tick, Instance: *instance}), streams.Config{
		Client: c, StateDir: *stateDir, InstanceID: *instance, Guarantee: g, CommitInterval: *interval,
		SessionTimeout: *session, InputPositionHeader: "strata-input", Logger: log,
		MaxCommitRecords: *maxCommit, FetchMaxRecords: *fetchMax, DeadLetterTopic: *deadLetter, Registerer: reg,
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
