package audit

import (
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/settle-dev/settle/events"
)

// replayIntent is the six messages of one intent of BenchmarkReplay's log
// (recorded, started, unknown, reconciling, found, read back), with the
// headers the ledger's Append writes.
func replayIntent(tb testing.TB, k int) (subjects []string, hdrs []nats.Header, datas [][]byte) {
	tb.Helper()
	t0 := time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)
	payload := []byte(`{"assets":[],"body":"replay"}`)
	sum, _ := events.PayloadSHA256(payload)
	req := "replay:" + strconv.Itoa(k)
	id := events.IntentID("default", "social_post", req)
	at := t0.Add(time.Duration(k) * time.Millisecond)
	key := events.IdempotencyKey(id)
	policy := events.Policy{FirstWrite: events.PolicyAuto, Retry: events.PolicyAuto, RetryBudget: 1, ResendBudget: 5,
		AttemptDeadline: events.Duration(time.Minute), SearchBefore: events.Duration(5 * time.Minute),
		SearchAfter: events.Duration(30 * time.Minute), ClockSkew: events.Duration(5 * time.Second)}
	rec := &events.IntentRecordedData{Tenant: "default", Route: "social_post", Account: "acct_1", RequestID: req,
		IdempotencyKey: key, Payload: payload, PayloadSHA256: sum, Canon: events.CanonV1, PlannedAt: at, Policy: policy}
	evs := []struct {
		attempt string
		d       events.Data
	}{
		{"", rec},
		{events.AttemptID(id, 1), &events.WriteStartedData{Attempt: 1, IdempotencyKey: key, Deadline: at.Add(time.Minute)}},
		{events.AttemptID(id, 1), &events.OutcomeUnknownData{Code: "connection_reset"}},
		{"", &events.ReconcileStartedData{Worker: "w", LeaseUntil: at.Add(time.Minute), Strategy: "search", Check: 1}},
		{"", &events.CandidateFoundData{ExternalID: "p_" + strconv.Itoa(k), Source: "search"}},
		{"", &events.ReadbackPassedData{Receipt: events.Receipt{ExternalID: "p_" + strconv.Itoa(k), PayloadSHA256: sum, Source: "readback",
			ReadbackAt: at, Checks: []events.Check{{Name: "url", OK: true}, {Name: "author", OK: true}, {Name: "payload", OK: true}, {Name: "parent", OK: true}, {Name: "visibility", OK: true}}}}},
	}
	for v, e := range evs {
		ev := events.New(id, uint64(v+1), at, "bench", e.attempt, e.d)
		b, err := events.Encode(ev)
		if err != nil {
			tb.Fatal(err)
		}
		subjects = append(subjects, events.Subject("social_post", id))
		hdrs = append(hdrs, nats.Header{
			"Nats-Msg-Id":                         {ev.EventID},
			"Settle-Append-Id":                    {"6Lz1uFQzJ0pWbq8Zz1dUe4"},
			"Nats-Expected-Last-Subject-Sequence": {strconv.Itoa(v * 17)},
			"Nats-Expected-Stream":                {"SETTLE_INTENTS"},
		})
		datas = append(datas, b)
	}
	return subjects, hdrs, datas
}

// BenchmarkPrepareMsg is the audit's per-message work (subject, decode,
// secret scan) on the six events of one replayed intent, per intent.
func BenchmarkPrepareMsg(b *testing.B) {
	subjects, hdrs, datas := replayIntent(b, 7)
	b.ReportAllocs()
	for b.Loop() {
		for i := range datas {
			m := prepareMsg(uint64(i+1), subjects[i], hdrs[i], datas[i])
			if m.decErr != nil || m.subjErr != nil || len(m.hits) != 0 {
				b.Fatal(m.decErr, m.subjErr, m.hits)
			}
		}
	}
}

// BenchmarkDecodeReplayIntent is events.Decode alone on the same six events.
func BenchmarkDecodeReplayIntent(b *testing.B) {
	_, _, datas := replayIntent(b, 7)
	b.ReportAllocs()
	for b.Loop() {
		for _, d := range datas {
			if _, err := events.Decode(d); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkScanReplayIntent is the secret scan alone (event and headers).
func BenchmarkScanReplayIntent(b *testing.B) {
	_, hdrs, datas := replayIntent(b, 7)
	b.ReportAllocs()
	for b.Loop() {
		for i, d := range datas {
			if len(scanSecrets(d))+len(scanHeaders(hdrs[i])) != 0 {
				b.Fatal("hit")
			}
		}
	}
}
