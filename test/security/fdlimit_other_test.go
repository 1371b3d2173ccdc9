//go:build !unix

package security_test

import "testing"

// needFiles: other systems have no per-process soft limit to raise here.
func needFiles(*testing.T, uint64) {}
