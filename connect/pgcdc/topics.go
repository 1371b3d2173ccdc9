package pgcdc

import (
	"strings"

	"github.com/strata-io/strata/connect"
)

// Topics are the topics the connector writes, <prefix>.<schema>.<table> for each table
// captured (connect.SourceConnector.Topics: the core checks write on them when the config is
// stored). A config it cannot read names none: validation refuses it anyway.
func (Connector) Topics(cfg map[string]string) []string {
	prefix := strings.TrimSpace(cfg[cfgPrefix])
	tables, err := parseTables(cfg[cfgTables])
	if err != nil || prefix == "" {
		return nil
	}
	out := make([]string, len(tables))
	for i, t := range tables {
		out[i] = prefix + "." + t.schema + "." + t.name
	}
	return out
}

var _ connect.SourceConnector = Connector{}
