package ledger

import "testing"

// BenchmarkParseAck: the acks nats-server answers a publish, a duplicate
// and an atomic batch's commit with.
func BenchmarkParseAck(b *testing.B) {
	for name, ack := range map[string]string{
		"publish":   `{"stream":"SETTLE_INTENTS","seq":123456}`,
		"duplicate": `{"stream":"SETTLE_INTENTS","seq":123456,"duplicate": true}`,
		"batch":     `{"stream":"SETTLE_INTENTS","seq":123456,"batch":"6Lz1uFQzJ0pWbq8Zz1dUe4","count":126}`,
	} {
		data := []byte(ack)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if a, err := parseAck(data); err != nil || a.Sequence != 123456 {
					b.Fatal(a, err)
				}
			}
		})
	}
}
