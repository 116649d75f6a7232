package node

import (
	"context"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/consumers/reconcile"
)

// fetchFailingAfter is how long a reconciler's fetches may fail before
// /readyz reports it (a server restart or a leader election is shorter).
const fetchFailingAfter = 10 * time.Second

// runReconciler runs reconciler k until ctx ends. A Run that returns while
// ctx lives (it never should) is logged, reported by /readyz and started
// again after a growing pause (1s … 30s).
func (s *supervisor) runReconciler(ctx context.Context, k int, rec *reconcile.Reconciler) {
	backoff := time.Second
	for {
		started := time.Now()
		err := rec.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("reconciler stopped")
		}
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		s.recRestarts.Inc()
		s.mu.Lock()
		s.recErrs[k] = err
		s.mu.Unlock()
		s.logger.Error("reconciler stopped; restarting it", "worker", k, "err", err, "in", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
		s.mu.Lock()
		delete(s.recErrs, k)
		s.mu.Unlock()
	}
}

// reconcilersCheck fails while a reconciler is down, or while one cannot
// fetch from a route's consumer for longer than fetchFailingAfter.
func (s *supervisor) reconcilersCheck(context.Context) error {
	s.mu.Lock()
	for k, err := range s.recErrs {
		s.mu.Unlock()
		return errors.Wrapf(err, "worker %d", k)
	}
	recs := s.recs
	s.mu.Unlock()
	for k, rec := range recs {
		for _, h := range rec.Health() {
			if h.Failing && time.Since(h.Since) >= fetchFailingAfter {
				return errors.Wrapf(h.Err, "worker %d cannot fetch from consumer %s since %s ago", k, h.Consumer, time.Since(h.Since).Round(time.Second))
			}
		}
	}
	return nil
}

// recreatedCounter counts the route consumers the reconcilers made anew
// after they disappeared (deleted by hand, lost by the server).
func recreatedCounter(recs []*reconcile.Reconciler) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "settle_reconciler_consumers_recreated_total",
		Help: "Route consumers a reconciler recreated after they disappeared while it ran."}, func() float64 {
		var n uint64
		for _, r := range recs {
			n += r.ConsumersRecreated()
		}
		return float64(n)
	})
}
