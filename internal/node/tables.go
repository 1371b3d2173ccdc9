package node

import (
	"context"
	"fmt"

	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/tables"
)

// startTables builds and starts the tables role (Config.Tables) over the node's reader.
func (n *Node) startTables(cat catalog.Backend, store objstore.Store, start func(string, func(context.Context) error)) error {
	if !n.cfg.Tables {
		return nil
	}
	if err := n.cfg.TablesConfig.Validate(); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	cfg := n.cfg.TablesConfig
	cfg.Registerer = n.Registry
	n.Tables = tables.New(store, cat, n.Reader, cfg, n.log)
	start("tables", n.Tables.Run)
	return nil
}

// tablesMounts serves the Iceberg REST catalog, when the node knows its bucket's URI.
func (n *Node) tablesMounts(cat catalog.Backend, store objstore.Store) []api.Mount {
	if n.cfg.TablesConfig.Location == "" {
		return nil
	}
	rest := tables.NewREST(n.Broker, cat, store, tables.RESTConfig{Principal: api.Principal, Location: n.cfg.TablesConfig.Location, Log: n.log})
	return []api.Mount{{Path: tables.Prefix, Handler: rest.Routes()}}
}
