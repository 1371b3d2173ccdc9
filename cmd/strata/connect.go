package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/connect/pgcdc"
	"github.com/strata-io/strata/connect/pgsink"
)

// connectFlags are the connect role's flags (serve --roles connect, and dev).
type connectFlags struct {
	name     string
	lease    time.Duration
	envAllow string
	dirAllow string
	fileDirs string
}

func addConnectFlags(c *command) *connectFlags {
	f := &connectFlags{}
	c.fs.StringVar(&f.name, "connect-worker-name", "", "connect role: the `name` its worker shows in statuses (a random suffix is added per start); default the host name")
	c.fs.DurationVar(&f.lease, "connect-lease", connect.DefaultLease, "connect role: how long the worker holds its tasks (and a sink task its group partitions) without a heartbeat; a dead worker's tasks move after this")
	c.fs.StringVar(&f.envAllow, "connect-config-env", "", "connect role: comma-separated `prefixes` of environment variables that connector configs may read with ${env:NAME}; empty: the env provider is off")
	c.fs.StringVar(&f.dirAllow, "connect-config-dirs", "", "connect role: comma-separated absolute `directories` whose files connector configs may read with ${file:PATH:KEY} or ${file:PATH}; empty: the file provider is off")
	c.fs.StringVar(&f.fileDirs, "connect-file-dirs", "", "connect role: comma-separated absolute `directories` the FileSource and FileSink connectors may read and write under (symbolic links and .. resolved; the node's own data, catalog, bucket and cache directories never); empty: the file connectors are refused")
	return f
}

func (f *connectFlags) validate() []string {
	var bad []string
	if f.lease < time.Second || f.lease > 10*time.Minute {
		bad = append(bad, fmt.Sprintf("--connect-lease %s: want between 1s and 10m (default %s)", f.lease, connect.DefaultLease))
	}
	if _, err := f.providers(); err != nil {
		bad = append(bad, fmt.Sprintf("--connect-config-dirs: %v", err))
	}
	if _, err := connect.NewFileDirs(strings.Split(f.fileDirs, ","), nil); err != nil {
		bad = append(bad, fmt.Sprintf("%v: give existing directories, comma-separated", err))
	}
	return bad
}

func (f *connectFlags) providers() (connect.Providers, error) {
	return connect.NewProviders(strings.Split(f.envAllow, ","), strings.Split(f.dirAllow, ","))
}

// config is the worker's configuration; own are the node's own directories, which the
// file connectors may never use.
func (f *connectFlags) config(own []connect.OwnDir) (connect.WorkerConfig, error) {
	p, _ := f.providers() // validated
	dirs, err := connect.NewFileDirs(strings.Split(f.fileDirs, ","), own)
	if err != nil {
		return connect.WorkerConfig{}, err
	}
	return connect.WorkerConfig{Name: f.name, Lease: f.lease, Providers: p, Plugins: plugins(dirs)}, nil
}

// plugins are the connectors the binary runs: the runtime's file connectors (confined
// to dirs) and the Postgres change-data-capture source and sink.
func plugins(dirs connect.FileDirs) *connect.Plugins {
	return connect.NewPlugins(connect.Source(connect.FileSourceConnector{Dirs: dirs}), connect.Sink(connect.FileSinkConnector{Dirs: dirs}),
		connect.Source(pgcdc.Connector{}), connect.Sink(pgsink.Connector{}))
}
