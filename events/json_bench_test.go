package events

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// benchWrite is the two messages of one lone Execute as settle writes
// them (the IntentStarted with its request, then the WriteSucceeded),
// with a canonical social payload and the default route policy.
func benchWrite(tb testing.TB, i int) [2]Event {
	tb.Helper()
	text := "Benchmark post for settle: the ledger records every external write intent before the write and settles lost responses without a second write. " +
		strings.Repeat("lorem ipsum ", 16)
	raw, err := json.Marshal(map[string]any{"assets": []string{}, "body": text})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := Canonicalize(raw)
	if err != nil {
		tb.Fatal(err)
	}
	sum, err := PayloadSHA256(p)
	if err != nil {
		tb.Fatal(err)
	}
	reqID := fmt.Sprintf("bench:%09d", i)
	id := ScopedIntentID("default", "social_post", "acct_bench", reqID)
	t := time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
	key := IdempotencyKey(id)
	rec := IntentRecordedData{
		Tenant: "default", Route: "social_post", Account: "acct_bench", RequestID: reqID,
		IdempotencyKey: key, Payload: p, PayloadSHA256: sum, Canon: CanonV1, PlannedAt: t,
		Policy: Policy{
			FirstWrite: PolicyAuto, Retry: PolicyAuto, RetryBudget: 1, ResendBudget: 5,
			AttemptDeadline: Duration(time.Minute), SearchBefore: Duration(5 * time.Minute),
			SearchAfter: Duration(30 * time.Minute), ClockSkew: Duration(5 * time.Second),
		},
		Caps: &Capabilities{IdempotencyKey: true, KeyRetention: Duration(24 * time.Hour), Search: true, SearchAuthoritative: true},
	}
	started := WriteStartedData{Attempt: 1, IdempotencyKey: key, Deadline: t.Add(time.Minute),
		Request: &SentRequest{Method: "POST", Path: "/v1/accounts/acct_bench/posts", ContentType: "application/json",
			Headers: []HeaderField{{Name: "Idempotency-Key", Value: key}}, Body: string(p)}}
	return [2]Event{
		New(id, 1, t, "bench", AttemptID(id, 1), &IntentStartedData{Recorded: rec, Started: started}),
		New(id, 2, t, "bench", AttemptID(id, 1),
			&WriteSucceededData{ExternalID: fmt.Sprintf("p_%d", i+1), LiveURL: fmt.Sprintf("http://127.0.0.1:8080/p/p_%d", i+1), StatusCode: 201}),
	}
}

// BenchmarkEventJSON: Encode and Decode of each message of one lone
// Execute.
func BenchmarkEventJSON(b *testing.B) {
	for _, e := range benchWrite(b, 7) {
		enc, err := Encode(e)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("Encode/"+string(e.Type), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, err := Encode(e); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Decode/"+string(e.Type), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, err := Decode(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
