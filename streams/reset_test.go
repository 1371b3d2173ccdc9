package streams

import "testing"

func TestIsInternal(t *testing.T) {
	groups := []string{"shop", "shop-eu"}
	for _, tc := range []struct {
		topic string
		want  bool
	}{
		{"shop-stock-changelog", true},
		{"shop-by-sku-repartition", true},
		{"shop-fk-subscription", true},
		{"shop-fk-response", true},
		{"shop-instances", true},
		{"shop-changelog", false},            // no store name
		{"shop-orders", false},               // a user topic
		{"orders", false},                    // another prefix
		{"shopx-stock-changelog", false},     // another application
		{"shop-eu-stock-changelog", false},   // the application shop-eu's
		{"shop-eu-instances", false},         // likewise
		{"shop-stock-changelog-copy", false}, // suffix elsewhere
	} {
		if got := isInternal("shop", tc.topic, groups); got != tc.want {
			t.Errorf("isInternal(shop, %s) = %v, want %v", tc.topic, got, tc.want)
		}
	}
}
