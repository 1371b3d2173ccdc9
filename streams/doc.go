// Package streams is Strata's Streams API: a library for applications that consume
// topics, transform them — statelessly, or with state, windows and joins — and produce
// topics, fault-tolerantly across a group of instances, keeping their state in the log
// with exactly-once output. It talks to Strata only through client/ and knows nothing
// of the server.
//
// A topology is built with a Builder and a typed DSL: same-type operations are methods
// (Filter, Branch, Peek, To); operations that change a type are free functions (Map,
// MapValues, FlatMap, FlatMapValues, Merge, GroupByKey, GroupBy, Aggregate, Reduce,
// Count, windowed and session aggregations, stream-stream, stream-table, table-table
// and foreign-key joins), since Go methods cannot add type parameters. Process and
// ProcessWithStores plug in the lower-level Processor API (a context with Forward,
// key-value, window and session stores, and punctuators). New checks the topology;
// App.Run runs it; the streamstest package drives it in-process without a server.
// The windows and joins follow Kafka Streams' semantics (see package window).
//
// Every stateful operation takes a name: it fixes the store, its changelog topic
// <app>-<name>-changelog and, when re-keyed input must be repartitioned, the topic
// <app>-<name>-repartition. A task is partition n of a subtopology's co-partitioned
// inputs; its outputs, repartition and changelog records and the offsets of all its
// input partitions commit in one request, and its local store is written only after
// that request is confirmed.
//
// Global tables (FromGlobalTable, JoinGlobal) are replicated in full to every
// instance. Interactive queries (App.Get, Range, KeyOwner, QueryHandler) read the
// running stores from any instance, answering ErrNotAvailable while a task restores
// or moves. Standby replicas (Config.NumStandbyReplicas) keep warm copies of other
// instances' tasks. Reset rewinds an application to reprocess its inputs.
package streams
