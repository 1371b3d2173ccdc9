package broker

import (
	"reflect"
	"testing"

	"github.com/strata-io/strata/catalog"
)

// TestAcquisitionBatches: acknowledged ranges are split by the acquisition's ranges,
// each batch carrying the delivery count its records were acquired at; ranges out of
// order, outside the acquisition or of an unknown type are refused with stable codes.
func TestAcquisitionBatches(t *testing.T) {
	acq := acquisition{Group: "g", Member: "m", Topic: "t", Ranges: [][3]int64{{0, 2, 3}, {3, 5, 1}, {8, 9, 1}}}
	got, e := acquisitionBatches(0, acq, []ShareAckRange{{First: 1, Last: 4, Type: "accept"}, {First: 5, Last: 5, Type: "reject"}})
	want := []catalog.AckBatch{
		{First: 1, Last: 2, Types: []int8{catalog.AckAccept}, DeliveryCount: 3},
		{First: 3, Last: 4, Types: []int8{catalog.AckAccept}, DeliveryCount: 1},
		{First: 5, Last: 5, Types: []int8{catalog.AckReject}, DeliveryCount: 1},
	}
	if e != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("batches %+v, %v; want %+v", got, e, want)
	}
	for _, tc := range []struct {
		name   string
		ranges []ShareAckRange
		code   Code
	}{
		{"none", nil, CodeInvalidRequest},
		{"first after last", []ShareAckRange{{First: 2, Last: 1, Type: "accept"}}, CodeInvalidRequest},
		{"negative", []ShareAckRange{{First: -1, Last: 1, Type: "accept"}}, CodeInvalidRequest},
		{"overlapping", []ShareAckRange{{First: 0, Last: 1, Type: "accept"}, {First: 1, Last: 2, Type: "accept"}}, CodeInvalidRequest},
		{"unknown type", []ShareAckRange{{First: 0, Last: 0, Type: "gap"}}, CodeInvalidRequest},
		{"across the hole between ranges", []ShareAckRange{{First: 5, Last: 8, Type: "accept"}}, CodeAckOutOfRange},
		{"past the acquisition", []ShareAckRange{{First: 9, Last: 10, Type: "accept"}}, CodeAckOutOfRange},
		{"in the hole", []ShareAckRange{{First: 6, Last: 6, Type: "accept"}}, CodeAckOutOfRange},
	} {
		if _, e := acquisitionBatches(0, acq, tc.ranges); e == nil || e.Code != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, e, tc.code)
		}
	}
}

// TestAcquisitionIDs: an id round-trips; anything else is not one.
func TestAcquisitionIDs(t *testing.T) {
	a := acquisition{Group: "g", Member: "m", Topic: "t", Partition: 2, Ranges: [][3]int64{{4, 9, 2}}}
	if got, ok := parseAcquisition(a.id()); !ok || !reflect.DeepEqual(got, a) {
		t.Fatalf("round trip: %+v, %v", got, ok)
	}
	bad := acquisition{Group: "g", Member: "m", Topic: "t", Ranges: [][3]int64{{4, 3, 1}}}
	for _, id := range []string{"", "x", "e30", bad.id(), acquisition{Group: "g", Topic: "t", Ranges: a.Ranges}.id()} {
		if _, ok := parseAcquisition(id); ok {
			t.Errorf("%q parsed as an acquisition id", id)
		}
	}
}
