package audit

import (
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/testharness"
)

// replayIntent is the six messages of one intent of BenchmarkReplay's log
// (recorded, started, unknown, reconciling, found, read back), with the
// headers the ledger's Append writes.
func replayIntent(tb testing.TB, k int) (subjects []string, hdrs []nats.Header, datas [][]byte) {
	tb.Helper()
	t0 := time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)
	for v, ev := range testharness.ReplayedIntent(k, t0) {
		id := ev.IntentID
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
