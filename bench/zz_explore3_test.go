package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

func TestZZExploreGroup(t *testing.T) {
	for _, d := range durabilities {
		for _, conc := range []int{1, 16, 64, 256} {
			for _, min := range []int{0, 1000} {
				n := testharness.StartNode(t, d)
				cfg := producer.DefaultStoreConfig()
				cfg.BatchMin = min
				if min == 1000 {
					cfg.BatchMax = 1000
				}
				store, err := producer.OpenStore(context.Background(), n.JS, cfg)
				if err != nil {
					t.Fatal(err)
				}
				const N = 6000
				var wg sync.WaitGroup
				start := time.Now()
				for g := 0; g < conc; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for k := g; k < N; k += conc {
							e := eventAt(3 * k)
							if _, err := store.Append(context.Background(), route, e, 0); err != nil {
								t.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				el := time.Since(start)
				t.Logf("%s c%d min%d: %.0f appends/s %+v", d, conc, min, N/el.Seconds(), store.BatchStats())
				_ = events.AllSubjects
			}
		}
	}
}
