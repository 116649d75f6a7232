package adaptertest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// Normalizer is an adapter's payload normaliser (NormalizePayload).
type Normalizer func(json.RawMessage) (json.RawMessage, error)

// FuzzNormalizer fuzzes normalize from seeds: a payload is refused with
// an *events.FieldError naming a payload field, or normalised to a
// canonical (canon/v1) payload that normalises to itself. shape, if set,
// checks an accepted output further.
func FuzzNormalizer(f *testing.F, normalize Normalizer, shape func(t *testing.T, out json.RawMessage), seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := normalize(raw)
		if err != nil {
			var fe *events.FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "payload") {
				t.Fatalf("error is not a payload FieldError: %T %v", err, err)
			}
			return
		}
		if canon, err := events.Canonicalize(out); err != nil || string(canon) != string(out) {
			t.Fatalf("output %q is not canonical (%v)", out, err)
		}
		again, err := normalize(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not idempotent: %s -> %s (%v)", out, again, err)
		}
		if shape != nil {
			shape(t, out)
		}
	})
}

// Intent names the ids of one intent's write.
type Intent struct {
	IntentID, RequestID, IdempotencyKey, Account string
}

// WriteRequest is attempt of intent with raw normalised: the same
// request id and key on every attempt, a new attempt id
// (<intent>.<attempt>).
func WriteRequest(t testing.TB, normalize Normalizer, in Intent, attempt, raw string) adapter.WriteRequest {
	t.Helper()
	p, err := normalize(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("normalize %s: %v", raw, err)
	}
	return adapter.WriteRequest{IntentID: in.IntentID, AttemptID: in.IntentID + "." + attempt, RequestID: in.RequestID,
		IdempotencyKey: in.IdempotencyKey, Account: in.Account, Payload: p}
}

// NotSent writes req changed by each case and asserts each is refused as
// not sent (a *adapter.CallError of class NotSent) and that no write
// reached the server (writes counts them).
func NotSent(t *testing.T, w adapter.Writer, req adapter.WriteRequest, writes func() int, cases map[string]func(*adapter.WriteRequest)) {
	t.Helper()
	for name, mod := range cases {
		r := req
		mod(&r)
		_, err := w.Write(context.Background(), r)
		var ce *adapter.CallError
		if !errors.As(err, &ce) || ce.Class != adapter.NotSent {
			t.Fatalf("%s: %v, want a not-sent CallError", name, err)
		}
	}
	if n := writes(); n != 0 {
		t.Fatalf("%d writes reached the server", n)
	}
}

// Build makes an adapter with newAdapter from cfg changed by mod (when
// set), failing the test when it is refused.
func Build[C, A any](t testing.TB, newAdapter func(C) (A, error), cfg C, mod func(*C)) A {
	t.Helper()
	if mod != nil {
		mod(&cfg)
	}
	a, err := newAdapter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
