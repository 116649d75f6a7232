package testharness

import (
	"encoding/json"
	"testing"
)

// JSON is json.Marshal's encoding of v, failing the test if it cannot be
// encoded.
func JSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
