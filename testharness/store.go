package testharness

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
)

// OpenStore opens the log on js with the default configuration, changed
// by mod.
func OpenStore(t testing.TB, js jetstream.JetStream, mod ...func(*ledger.StoreConfig)) *ledger.Store {
	t.Helper()
	cfg := ledger.DefaultStoreConfig()
	for _, m := range mod {
		m(&cfg)
	}
	s, err := ledger.OpenStore(context.Background(), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// BatchMin opens a store whose group commit batches every flush of at
// least min messages (OpenStore's mod).
func BatchMin(min int) func(*ledger.StoreConfig) {
	return func(c *ledger.StoreConfig) { c.BatchMin = min }
}

// RawHistory reads every message of an intent's subject with its headers.
func RawHistory(t testing.TB, s *ledger.Store, route, intentID string) []*jetstream.RawStreamMsg {
	t.Helper()
	var out []*jetstream.RawStreamMsg
	seq := uint64(1)
	for {
		m, err := s.Stream().GetMsg(context.Background(), seq, jetstream.WithGetMsgSubject(events.Subject(route, intentID)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
		seq = m.Sequence + 1
	}
}

// SmallBlocks makes the node's stream keep its messages in block files of
// 32 KB with no size limit (the server sizes blocks from the limits it
// loads a stream with), so a test can lose one block of several, as a
// damaged disk loses one of a large stream's. It restarts the node.
func SmallBlocks(t testing.TB, n *Node, stream string) {
	t.Helper()
	ctx := context.Background()
	st, err := n.JS.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxBytes = 127_000 // blocks of FileStoreMinBlkSize (32 kB)
	if _, err := n.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	cfg.MaxBytes = -1 // no limit; the loaded stream keeps its small blocks
	if _, err := n.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// Dir is the node's JetStream store directory.
func (n *Node) Dir() string { return n.cfg.Dir }

// BlockFiles lists the message block files of stream in the node's
// store, in order.
func (n *Node) BlockFiles(t testing.TB, stream string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(n.cfg.Dir, "jetstream", "*", "streams", stream, "msgs", "*.blk"))
	if err != nil {
		t.Fatal(err)
	}
	index := func(path string) int {
		n, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(path), ".blk"))
		return n
	}
	sort.Slice(files, func(i, j int) bool { return index(files[i]) < index(files[j]) })
	return files
}

// RemoveFile removes path or fails t.
func RemoveFile(t testing.TB, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// ConnectJS connects to url (closed when the test ends) and returns its
// JetStream context.
func ConnectJS(t testing.TB, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	return JetStreamOf(t)(nats.Connect(url, opts...))
}

// OpenStoreWhenReady opens the store with cfg on js, trying again (each
// attempt bounded by apiAttempt, as CreateStream's) while a cluster still
// elects its leaders, until ctx ends.
func OpenStoreWhenReady(ctx context.Context, t testing.TB, js jetstream.JetStream, cfg ledger.StoreConfig) *ledger.Store {
	t.Helper()
	for {
		actx, cancel := context.WithTimeout(ctx, apiAttempt)
		s, err := ledger.OpenStore(actx, js, cfg)
		cancel()
		if err == nil {
			return s
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // the meta leader may still be settling
	}
}
