package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/ledger"
)

// StoreConfig is the log's store config of a process: replicas, and how
// appends are published (groupCommit, checked by CheckGroupCommit). auto:
// on the embedded server (natsURL empty) every append alone when that
// server does not fsync every write (ledger.StoreConfig.ForServerSync),
// the group commit's measured choice otherwise, a server settle did not
// start included (its sync is not known here); measured: always that
// choice; off: every append alone.
func StoreConfig(natsURL string, dur embedded.Durability, replicas int, groupCommit string) ledger.StoreConfig {
	sc := ledger.DefaultStoreConfig()
	sc.Replicas = replicas
	switch {
	case groupCommit == GroupCommitOff:
		sc = sc.ForServerSync(false)
	case groupCommit == GroupCommitAuto && natsURL == "":
		sc = sc.ForServerSync(dur.SyncsEveryWrite())
	}
	return sc
}

// openStore opens the log, waiting out a cluster still forming
// (untilAnswered).
func openStore(ctx context.Context, js jetstream.JetStream, sc ledger.StoreConfig, logger *slog.Logger) (*ledger.Store, error) {
	var store *ledger.Store
	err := untilAnswered(ctx, logger, "open the store", sc.Stream, func() error {
		// Each attempt is bounded whatever ctx's deadline: an answer
		// lost while a cluster elects its leaders is asked again, not
		// waited on until ctx ends.
		actx, cancel := context.WithTimeout(ctx, storeAttempt)
		defer cancel()
		var err error
		store, err = ledger.OpenStore(actx, js, sc)
		return err
	})
	return store, err
}

// storeAttempt bounds one attempt to open the store (a few JetStream API
// requests).
var storeAttempt = 10 * time.Second

// untilAnswered runs op until it succeeds, fails for another reason than
// a cluster not ready yet (ledger.ClusterNotReady), ctx ends or a minute has
// passed: a cluster still electing its leaders, or a server whose
// JetStream is not up yet, answers late or not at all.
func untilAnswered(ctx context.Context, logger *slog.Logger, what, stream string, op func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := op()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) || !ledger.ClusterNotReady(err) {
			return err
		}
		logger.Warn("the stream is not ready yet (the cluster may still be forming: electing its leaders, or waiting for its servers); retrying for up to a minute", "op", what, "stream", stream, "err", err)
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
