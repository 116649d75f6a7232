//go:build !race

package producer_test

// executeAllocs without the race detector, measured on the tree before
// tracing was added; see TestExecuteWithTracingOffAllocatesNoMore.
const executeAllocs = 567
