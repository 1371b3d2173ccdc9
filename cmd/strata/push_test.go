package main

import (
	"strings"
	"testing"
)

// TestPushCLI: the push verbs take exactly one GROUP and answer the API's refusal for
// a share group without a subscription.
func TestPushCLI(t *testing.T) {
	url := startDevInProcess(t)
	for _, verb := range []string{"describe", "pause", "resume", "rotate-secret", "delete"} {
		if code, _, stderr := runCLI(t, nil, "", "push", verb, "--server", url); code != 2 || !strings.Contains(stderr, "GROUP") {
			t.Errorf("push %s without GROUP: exit %d: %s", verb, code, stderr)
		}
		if code, _, stderr := runCLI(t, nil, "", "push", verb, "nosuch", "--server", url); code != 1 || !strings.Contains(stderr, `share group "nosuch" has no push subscription`) {
			t.Errorf("push %s nosuch: exit %d: %s", verb, code, stderr)
		}
	}
}
