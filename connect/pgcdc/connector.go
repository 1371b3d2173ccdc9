// Package pgcdc is a Postgres change-data-capture source connector: the changes to a
// set of tables, read from a logical replication slot (pgoutput, through
// jackc/pglogrepl), as Debezium-shaped change events — after a consistent initial
// snapshot of the tables — committed to Strata exactly once.
//
// Exactly once rests on the runtime's commit: each batch's records and its source
// offset (the slot position: the end LSN of the last whole transaction taken, and
// within a transaction too large for one batch, the events of it already taken)
// commit in one catalog transaction, and the slot is acknowledged only after that
// commit, never beyond it. A restart reads the offset back and asks the slot for
// what follows; the slot still holds it because it was never acknowledged. A slot
// that is gone, invalidated, or ahead of the offset is a gap: the task fails with a
// code (SLOT_MISSING, SLOT_LOST, SLOT_AHEAD) and the slot is never recreated behind
// the operator's back.
package pgcdc

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/strata-io/strata/connect"
)

// Class is the connector's class.
const Class = "io.strata.connect.postgres.PostgresCdcSourceConnector"

// Connector is the change-data-capture source plugin (one task per slot).
type Connector struct{}

func (Connector) Class() string   { return Class }
func (Connector) Version() string { return "1.0" }

// Config keys.
const (
	cfgURL          = "database.url"
	cfgTables       = "table.include.list"
	cfgPrefix       = "topic.prefix"
	cfgSlot         = "slot.name"
	cfgPublication  = "publication.name"
	cfgAutoCreate   = "publication.autocreate.enabled"
	cfgHeartbeat    = "heartbeat.interval.ms"
	cfgBatch        = "max.batch.size"
	cfgSnapshotMode = "snapshot.mode"
	cfgLinger       = "poll.linger.ms"
	cfgMetrics      = "metrics.interval.ms"
	cfgReconnect    = "reconnect.timeout.ms"
)

const group = "Postgres"

func (Connector) Config() []connect.ConfigKey {
	return []connect.ConfigKey{
		{Name: cfgURL, Type: connect.TypePassword, NoDefault: true, Importance: "HIGH", Group: group, DisplayName: "Database URL",
			Doc: "postgres:// URL of the database to capture (a role with REPLICATION; the server at wal_level=logical)."},
		{Name: cfgTables, Type: connect.TypeList, NoDefault: true, Importance: "HIGH", Group: group, DisplayName: "Tables",
			Doc: "Tables to capture, schema.table (schema public when left out)."},
		{Name: cfgPrefix, Type: connect.TypeString, NoDefault: true, Importance: "HIGH", Group: group, DisplayName: "Topic prefix",
			Doc: "Each table's changes go to topic <prefix>.<schema>.<table>, which must exist."},
		{Name: cfgSlot, Type: connect.TypeString, NoDefault: true, Importance: "HIGH", Group: group, DisplayName: "Slot",
			Doc: "The logical replication slot (created by the connector at its first start, never recreated).", Check: checkIdent},
		{Name: cfgPublication, Type: connect.TypeString, Default: "", Importance: "MEDIUM", Group: group, DisplayName: "Publication",
			Doc: "The publication (default: the slot's name).", Check: func(v string) error {
				if v == "" {
					return nil
				}
				return checkIdent(v)
			}},
		{Name: cfgAutoCreate, Type: connect.TypeBoolean, Default: "true", Importance: "LOW", Group: group, DisplayName: "Create the publication",
			Doc: "Create the publication FOR TABLE the captured tables when it does not exist."},
		{Name: cfgHeartbeat, Type: connect.TypeLong, Default: "10000", Importance: "MEDIUM", Group: group, DisplayName: "Heartbeat interval",
			Doc: "How often an idle task commits the slot's position as an offset alone and acknowledges it, so that WAL written to other tables is not pinned (0: never).", Check: connect.AtLeast(0)},
		{Name: cfgBatch, Type: connect.TypeInt, Default: "5000", Importance: "LOW", Group: group, DisplayName: "Batch size",
			Doc: "The most records one commit takes; a larger transaction is committed in chunks that resume where they stopped.", Check: connect.AtLeast(1)},
		{Name: cfgSnapshotMode, Type: connect.TypeString, Default: "initial", Importance: "MEDIUM", Group: group, DisplayName: "Snapshot mode",
			Doc: "initial: snapshot the tables before streaming; never: stream from the slot's creation.", Check: connect.OneOf("initial", "never"),
			Recommended: []string{"initial", "never"}},
		{Name: cfgLinger, Type: connect.TypeLong, Default: "5", Importance: "LOW", Group: group, DisplayName: "Linger",
			Doc: "How long a batch of whole transactions waits for more before it commits.", Check: connect.AtLeast(0)},
		{Name: cfgMetrics, Type: connect.TypeLong, Default: "5000", Importance: "LOW", Group: group, DisplayName: "Metrics interval",
			Doc: "How often the slot's lag, wal_status and safe WAL size are measured into the task's status.", Check: connect.AtLeast(100)},
		{Name: cfgReconnect, Type: connect.TypeLong, Default: "300000", Importance: "LOW", Group: group, DisplayName: "Reconnect timeout",
			Doc: "How long a task whose replication connection was lost (a database restart) tries to reconnect before it fails.", Check: connect.AtLeast(0)},
	}
}

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func checkIdent(v string) error {
	if !identRE.MatchString(v) {
		return fmt.Errorf("must be a lower-case identifier: [a-z_][a-z0-9_]*, at most 63 characters")
	}
	return nil
}

// ValidateConfig checks the URL and the table names.
func (Connector) ValidateConfig(cfg map[string]string) map[string]string {
	bad := map[string]string{}
	if u, err := url.Parse(cfg[cfgURL]); cfg[cfgURL] != "" && (err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql")) {
		bad[cfgURL] = "Invalid value for configuration " + cfgURL + ": a postgres:// URL"
	}
	if _, err := parseTables(cfg[cfgTables]); err != nil && cfg[cfgTables] != "" {
		bad[cfgTables] = err.Error()
	}
	return bad
}

// TaskConfigs: one task, as a slot has one reader.
func (Connector) TaskConfigs(cfg map[string]string, maxTasks int) ([]map[string]string, error) {
	if _, err := parseTables(cfg[cfgTables]); err != nil {
		return nil, err
	}
	return []map[string]string{{}}, nil
}

func (Connector) NewTask() connect.SourceTask { return &task{} }

// table is a captured table's name.
type table struct{ schema, name string }

func (t table) String() string { return t.schema + "." + t.name }

// ident quotes the name for SQL.
func (t table) ident() string { return quoteIdent(t.schema) + "." + quoteIdent(t.name) }

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

var tableRE = regexp.MustCompile(`^(?:([A-Za-z_][A-Za-z0-9_$]*)\.)?([A-Za-z_][A-Za-z0-9_$]*)$`)

func parseTables(list string) ([]table, error) {
	var out []table
	seen := map[table]bool{}
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		m := tableRE.FindStringSubmatch(p)
		if m == nil {
			return nil, fmt.Errorf("Invalid value %s for configuration %s: tables are schema.table", p, cfgTables)
		}
		t := table{schema: m[1], name: m[2]}
		if t.schema == "" {
			t.schema = "public"
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("Invalid value for configuration %s: name at least one table", cfgTables)
	}
	return out, nil
}
