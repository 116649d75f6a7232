//go:build race

package producer_test

// executeAllocs under the race detector (make test), measured on the tree
// before tracing was added; see TestExecuteWithTracingOffAllocatesNoMore.
const executeAllocs = 653
