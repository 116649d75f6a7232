package projector

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/testharness"
)

// testLog is a real embedded nats-server with the intents stream. The
// server runs with the default sync (survives a process crash, which is
// what these tests inject); fsync-always only slows appends down here.
type testLog struct {
	t     testing.TB
	node  *testharness.Node
	store *ledger.Store
	// last is the subject sequence of each intent's last event (the CAS
	// token of its next append); seqs is every appended event's sequence.
	mu   sync.Mutex
	last map[string]uint64
}

func newTestLog(t testing.TB) *testLog {
	t.Helper()
	n := testharness.StartNode(t, embedded.SyncDefault)
	s, err := ledger.OpenStore(context.Background(), n.JS, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &testLog{t: t, node: n, store: s, last: map[string]uint64{}}
}

// append appends e through ledger.Store.Append with the right CAS token
// and returns its stream sequence.
func (l *testLog) append(route string, e events.Event) uint64 {
	l.t.Helper()
	l.mu.Lock()
	expected := l.last[e.IntentID]
	l.mu.Unlock()
	seq, err := l.store.Append(context.Background(), route, e, expected)
	if err != nil {
		l.t.Fatalf("append %s v%d %s: %v", e.IntentID, e.Version, e.Type, err)
	}
	l.mu.Lock()
	l.last[e.IntentID] = seq
	l.mu.Unlock()
	return seq
}

// publishRaw publishes bytes on an intent subject, bypassing every check
// (as a future version or a broken writer would).
func (l *testLog) publishRaw(subject string, data []byte) uint64 {
	l.t.Helper()
	ack, err := l.node.JS.Publish(context.Background(), subject, data, jetstream.WithExpectStream(l.store.Config().Stream))
	if err != nil {
		l.t.Fatalf("publish raw on %s: %v", subject, err)
	}
	_, id, _ := events.ParseSubject(subject)
	if id != "" {
		l.mu.Lock()
		l.last[id] = ack.Sequence
		l.mu.Unlock()
	}
	return ack.Sequence
}

func (l *testLog) lastSeq() uint64 {
	l.t.Helper()
	info, err := l.store.Stream().Info(context.Background())
	if err != nil {
		l.t.Fatal(err)
	}
	return info.State.LastSeq
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openProjector opens a projector on a fresh (or the given) database file.
func openProjector(t testing.TB, js jetstream.JetStream, dbPath string, mutate func(*Config)) *Projector {
	t.Helper()
	if dbPath == "" {
		dbPath = filepath.Join(t.TempDir(), "views.db")
	}
	cfg := DefaultConfig()
	cfg.DBPath = dbPath
	cfg.Logger = quietLogger()
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := Open(context.Background(), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func catchUp(t testing.TB, p *Projector) {
	t.Helper()
	if err := p.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func dump(t testing.TB, p *Projector) string {
	t.Helper()
	d, err := p.Dump(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// rebuildDump projects the whole log into a fresh database and dumps it.
func rebuildDump(t testing.TB, js jetstream.JetStream) string {
	t.Helper()
	p := openProjector(t, js, "", nil)
	catchUp(t, p)
	d := dump(t, p)
	p.Close()
	return d
}

// firstDiff shows where two dumps part.
func firstDiff(a, b string) string {
	al, bl := bytes.Split([]byte(a), []byte("\n")), bytes.Split([]byte(b), []byte("\n"))
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y []byte
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if !bytes.Equal(x, y) {
			return "line " + strconv.Itoa(i+1) + ":\n  got:  " + string(x) + "\n  want: " + string(y)
		}
	}
	return "equal"
}
