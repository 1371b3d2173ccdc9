package quota_test

import (
	"fmt"
	"time"

	"github.com/strata-io/strata/quota"
)

// Per-topic usage counts with the same meters the quotas use: one set keyed by topic,
// added to once per flush with the flush's aggregate for each topic (never per record),
// read for totals and for the rate over the window.
func ExampleMeters() {
	bytesIn := quota.NewMeters[string](quota.DefaultWindow)
	now := time.Unix(1700000000, 0)
	// A flush that carried 3 MiB of orders and 1 MiB of payments.
	flush := map[string]int64{"orders": 3 << 20, "payments": 1 << 20}
	for topic, n := range flush {
		bytesIn.Add(topic, now, n)
	}
	later := now.Add(2 * time.Second)
	sum, span := bytesIn.Get("orders").Sum(later)
	fmt.Println(bytesIn.Get("orders").Total()/bytesIn.Get("payments").Total(), sum>>20, span)
	// Output: 3 3 2s
}
