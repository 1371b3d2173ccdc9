package api

import (
	"bytes"
	"strconv"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// AppendPushRecord appends one record as the push role's calls carry it (issue 36):
//
//	{"topic":T,"partition":N,"offset":N,"timestamp":N,"key":K,"value":V,"headers":[…],"delivery_count":N}
//
// key, value and headers rendered by the topic's formats as a fetch shows them
// (appendRecord, with its base64 fallbacks). scratch is reused between calls.
func AppendPushRecord(dst []byte, topic string, partition int32, rec *segment.DecodedRecord, cfg catalog.Config, deliveryCount int16, scratch *bytes.Buffer) []byte {
	dst = append(dst, `{"topic":`...)
	dst = appendString(dst, topic)
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(partition), 10)
	dst = append(dst, ',')
	n := len(dst)
	dst = appendRecord(dst, rec, newRenderOpts(cfg, false), scratch)
	dst = append(dst[:n], dst[n+1:]...)                     // the record's own "{" goes
	dst = append(dst[:len(dst)-1], `,"delivery_count":`...) // inside the record's object
	dst = strconv.AppendInt(dst, int64(deliveryCount), 10)
	return append(dst, '}')
}
