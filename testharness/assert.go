package testharness

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// NoSecret fails the test when err (or the safe message of a CallError in
// it) contains secret.
func NoSecret(t testing.TB, err error, secret string) {
	t.Helper()
	if err == nil {
		return
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("error leaks the secret: %v", err)
	}
	var ce *adapter.CallError
	if errors.As(err, &ce) && strings.Contains(ce.Message, secret) {
		t.Fatalf("error message leaks the secret: %q", ce.Message)
	}
}

// CallErrorOf returns the *adapter.CallError in err, failing the test when
// there is none or when it leaks secret.
func CallErrorOf(t testing.TB, err error, secret string) *adapter.CallError {
	t.Helper()
	NoSecret(t, err, secret)
	var ce *adapter.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("want *adapter.CallError, got %T %v", err, err)
	}
	return ce
}

// Hash is events.PayloadSHA256 that fails the test on error.
func Hash(t testing.TB, payload []byte) string {
	t.Helper()
	h, err := events.PayloadSHA256(payload)
	if err != nil {
		t.Fatalf("hash %s: %v", payload, err)
	}
	return h
}

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
