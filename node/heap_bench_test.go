package node

import (
	"encoding/json"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// The heap of a node (embedded server, two reconcilers, the projector)
// after b.N finished intents, measured where it lives: reported as
// heap-MiB (in use after a GC, every intent settled) and heap-B/intent
// (above an idle node's). Profile what holds it with
//
//	go test -run '^$' -bench NodeHeap -benchtime 30000x -memprofile heap.out ./node/
//
// Measured (2 cores, 60,000 intents, the fake API in process): the
// reconcilers' history caches (bounded: --cache-mb for all workers),
// nats-server's per-subject index (about 330 bytes per intent: one
// subject per intent), its Msg-Id window (bounded by the append rate over
// the window) and its block buffers (8 MiB per active block).
func BenchmarkNodeHeap(b *testing.B) {
	api := newFakeSocial(b)
	var logs testharness.SyncBuffer
	n := testNode(b, api, &logs, func(c *Config) { c.Durability = embedded.SyncDefault })
	idle := heapInUse()
	b.ResetTimer()
	var wg sync.WaitGroup
	ch := make(chan int)
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range ch {
				_, err := n.Producer().Execute(b.Context(), producer.Request{Route: "social_post", Account: "acct_" + strconv.Itoa(k%4),
					RequestID: "r" + strconv.Itoa(k), Payload: json.RawMessage(`{"body":"post ` + strconv.Itoa(k) + `"}`)})
				if err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for k := 0; k < b.N; k++ {
		ch <- k
	}
	close(ch)
	wg.Wait()
	// Every intent finished (a readback by a reconciler), the views caught up.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		counts, err := n.Projector().CountByState(b.Context())
		if err == nil && counts["confirmed"] == b.N {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("not every intent confirmed: %v %v", counts, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.StopTimer()
	heap := heapInUse()
	b.ReportMetric(heap/(1<<20), "heap-MiB")
	b.ReportMetric((heap-idle)/float64(b.N), "heap-B/intent")
}

func heapInUse() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse)
}
