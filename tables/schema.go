package tables

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// The default schema: the columns every Kafka record has. key and value are strings
// when the topic's format says they are text (string, json), else binary; a null key
// or value (a tombstone) is null.
const (
	colPartition = "partition"
	colOffset    = "offset"
	colTimestamp = "timestamp"
	colKey       = "key"
	colValue     = "value"
	colHeaders   = "headers"
)

func textOrBinary(format string) iceberg.Type {
	if format == "binary" {
		return iceberg.PrimitiveTypes.Binary
	}
	return iceberg.PrimitiveTypes.String
}

// defaultSchema is the table's schema for a topic of cfg's formats.
func defaultSchema(cfg catalog.Config) *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: colPartition, Type: iceberg.PrimitiveTypes.Int32, Required: true},
		iceberg.NestedField{ID: 2, Name: colOffset, Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 3, Name: colTimestamp, Type: iceberg.PrimitiveTypes.TimestampTz, Required: true},
		iceberg.NestedField{ID: 4, Name: colKey, Type: textOrBinary(cfg.KeyFormat)},
		iceberg.NestedField{ID: 5, Name: colValue, Type: textOrBinary(cfg.ValueFormat)},
		iceberg.NestedField{ID: 6, Name: colHeaders, Type: &iceberg.ListType{
			ElementID: 7, ElementRequired: true,
			Element: &iceberg.StructType{FieldList: []iceberg.NestedField{
				{ID: 8, Name: "key", Type: iceberg.PrimitiveTypes.String, Required: true},
				{ID: 9, Name: "value", Type: iceberg.PrimitiveTypes.Binary},
			}},
		}},
	)
}

// newMetadata is a new table's first metadata: the default schema, partitioned by day
// of timestamp, sorted by partition then offset.
func newMetadata(cfg catalog.Config, location string) (table.Metadata, error) {
	sc := defaultSchema(cfg)
	spec, err := iceberg.NewPartitionSpecOpts(iceberg.AddPartitionFieldBySourceID(3, "timestamp_day", iceberg.DayTransform{}, sc, nil))
	if err != nil {
		return nil, fmt.Errorf("partition spec: %w", err)
	}
	order, err := table.NewSortOrder(1, []table.SortField{
		{SourceIDs: []int{1}, Transform: iceberg.IdentityTransform{}, Direction: table.SortASC, NullOrder: table.NullsFirst},
		{SourceIDs: []int{2}, Transform: iceberg.IdentityTransform{}, Direction: table.SortASC, NullOrder: table.NullsFirst},
	})
	if err != nil {
		return nil, fmt.Errorf("sort order: %w", err)
	}
	return table.NewMetadata(sc, &spec, order, location, iceberg.Properties{
		"format-version":                  "2",
		"write.parquet.compression-codec": "zstd",
	})
}

// partRecords are one partition's records, in offset order.
type partRecords struct {
	partition int32
	records   []segment.DecodedRecord
	// stable is the partition's last stable offset when the read began.
	stable int64
	// typed are the records' typed columns, one row per record; nil when the table
	// has none.
	typed []typedRow
}

// toArrow lays records out as one Arrow record batch of the table's schema sc (its
// rows in partition, then offset order: the table's sort order).
func toArrow(sc *iceberg.Schema, parts []partRecords) (arrow.RecordBatch, error) {
	asc, err := table.SchemaToArrowSchema(sc, nil, true, false)
	if err != nil {
		return nil, fmt.Errorf("arrow schema: %w", err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, asc)
	defer b.Release()
	idx := func(name string) int {
		is := asc.FieldIndices(name)
		if len(is) != 1 {
			return -1
		}
		return is[0]
	}
	pi, oi, ti, ki, vi, hi := idx(colPartition), idx(colOffset), idx(colTimestamp), idx(colKey), idx(colValue), idx(colHeaders)
	if pi < 0 || oi < 0 || ti < 0 || ki < 0 || vi < 0 || hi < 0 {
		return nil, fmt.Errorf("the table's schema lacks a default column: %s", asc)
	}
	// The typed columns: their builders, in the order of the rows' values.
	var typed []array.Builder
	for i, f := range asc.Fields() {
		if !isDefaultColumn(f.Name) {
			typed = append(typed, b.Field(i))
		}
	}
	hl := b.Field(hi).(*array.ListBuilder)
	hs := hl.ValueBuilder().(*array.StructBuilder)
	for _, p := range parts {
		for j, r := range p.records {
			b.Field(pi).(*array.Int32Builder).Append(p.partition)
			b.Field(oi).(*array.Int64Builder).Append(r.Offset)
			b.Field(ti).(*array.TimestampBuilder).Append(arrow.Timestamp(r.Timestamp * 1000))
			appendBytes(b.Field(ki), r.Key)
			appendBytes(b.Field(vi), r.Value)
			hl.Append(true)
			for _, h := range r.Headers {
				hs.Append(true)
				hs.FieldBuilder(0).(*array.StringBuilder).Append(h.Key)
				appendBytes(hs.FieldBuilder(1), h.Value)
			}
			for c, tb := range typed {
				if p.typed == nil {
					tb.AppendNull()
				} else {
					appendValue(tb, p.typed[j][c])
				}
			}
		}
	}
	return b.NewRecordBatch(), nil
}

// appendBytes appends v (nil: null) to a string or binary column.
func appendBytes(fb array.Builder, v []byte) {
	if v == nil {
		fb.AppendNull()
		return
	}
	switch fb := fb.(type) {
	case *array.StringBuilder:
		fb.BinaryBuilder.Append(v)
	case *array.BinaryBuilder:
		fb.Append(v)
	}
}
