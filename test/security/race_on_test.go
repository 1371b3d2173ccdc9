//go:build race

package security_test

// slowdown is how much slower the race detector makes the node's code: bounds on
// latency are scaled by it.
const slowdown = 10
