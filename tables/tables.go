// Package tables owns table topics (issue 35): a topic with iceberg.enabled is also an
// Apache Iceberg table in its own bucket. The tables role (Role) turns each partition's
// committed records (read_committed) into Parquet data files and Iceberg snapshots,
// written by apache/iceberg-go over the node's object store; REST serves the tables
// to engines as a read-only Iceberg REST catalog at /iceberg. A topic whose value
// subject has an Avro or JSON schema gets its fields as columns too (typed.go), and a
// value that does not fit them stops its partition's table (values.go).
//
// Exactly once: a snapshot's data files cover, per partition, the offsets [From, To)
// written in its summary (strata.offsets), and the same ranges move in the catalog
// with the table's metadata location in one transaction (catalog.Tables.CommitTable),
// which refuses a range that does not start where the partition's last one ended. A
// worker that dies between writing files and that step leaves unreferenced files and
// no rows; a second worker converting the same range is refused and starts again from
// the catalog's state. Partitions are leased (with fencing tokens, as the compactor's
// work) so that workers share the partitions rather than race for them.
package tables

import (
	"strconv"
	"strings"
)

// Namespace is the one namespace of the REST catalog: table topic t is table
// strata.t.
const Namespace = "strata"

// keyPrefix is where table files live in the bucket: beside segments/, which the
// compactor's orphan sweep owns, never under it.
const keyPrefix = "tables"

// tableLocation is the URI of a topic's table under the bucket's URI base. The topic's
// id keeps a topic deleted and created again under its name apart from the old one.
func tableLocation(base, topic string, topicID int64) string {
	return strings.TrimSuffix(base, "/") + "/" + keyPrefix + "/" + topic + "-" + strconv.FormatInt(topicID, 10)
}
