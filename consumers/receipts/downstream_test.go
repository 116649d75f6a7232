package receipts

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/testharness"
)

var t0 = time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)

// dsFixture is a real stream holding four receipts on route social_post
// (two WriteConfirmed, one ReadbackPassed, one OperatorConfirmed), events
// that are no receipts (WriteStarted, a rejection, an unknown type, a
// malformed event), a hold marker, and a receipt on another route.
type dsFixture struct {
	node     *testharness.Node
	receipts []string // event ids of the social_post receipts
	other    string   // event id of the other route's receipt
}

func newDSFixture(t *testing.T) *dsFixture {
	t.Helper()
	n := testharness.StartNode(t)
	l := testharness.NewHandLog(t, n.JS, nil, t0)
	f := &dsFixture{node: n}
	last := func(x *testharness.HandHistory) string { return x.H.Events[len(x.H.Events)-1].EventID }
	for _, id := range []string{"a", "b"} {
		var x *testharness.HandHistory
		if id == "b" {
			x = l.RecordStarted("ds-" + id) // as this version writes it: one message
		} else {
			x = l.Record("ds-" + id).Started(1) // as logs before IntentStarted hold it
		}
		x.Next(x.Attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: x.Receipt("p_"+id, "response")})
		f.receipts = append(f.receipts, last(x))
	}
	rb := l.Record("ds-readback").Started(1)
	rb.Next(rb.Attempt(1), &events.WriteSucceededData{ExternalID: "p_rb", StatusCode: 201}).
		Next("", &events.ReadbackPassedData{Receipt: rb.Receipt("p_rb", "readback")})
	f.receipts = append(f.receipts, last(rb))
	op := l.Record("ds-operator").Started(1)
	op.Next(op.Attempt(1), &events.OutcomeUnknownData{Code: "timeout"}).
		Next("", &events.ManualActionRequiredData{Reason: events.ReasonNoQueryNoDedup}).
		Next("", &events.OperatorConfirmedData{Operator: "alice", Reason: "seen on the feed", Receipt: op.Receipt("p_op", "operator")})
	f.receipts = append(f.receipts, last(op))
	rej := l.Record("ds-rejected").Started(1)
	rej.Next(rej.Attempt(1), &events.WriteRejectedData{Code: "http_400", StatusCode: 400})
	l.PublishRaw(rej.ID(), `{"schema":"settle.event/v1","event_id":"`+rej.ID()+`:4","intent_id":"`+rej.ID()+
		`","version":4,"type":"WriteTeleported","at":"2026-07-22T09:00:30Z","actor":"future","data":{}}`)
	l.PublishRaw(rej.ID(), `{"schema":"settle.event/v1","event_id":"`+rej.ID()+`:5"}`)

	// An intent held after an accepted log loss: its hold marker is no
	// event, and no receipt.
	l.Record("ds-held").MarkHeld(2, 3)

	ol := testharness.NewHandLog(t, n.JS, l.Store, l.At)
	ol.Route = "other_route"
	o := ol.Record("ds-other").Started(1)
	o.Next(o.Attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: o.Receipt("p_other", "response")})
	f.other = last(o)
	return f
}

// dsService is a downstream service's database: an announcements table
// WITHOUT a unique key (so a second effect would show as a second row) and
// the Deduper that makes the effect happen once.
type dsService struct {
	db    *sql.DB
	dedup *Deduper
}

func newDSService(t *testing.T) *dsService {
	t.Helper()
	db, err := OpenSQLite(filepath.Join(t.TempDir(), "svc.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE announcements (event_id TEXT NOT NULL, intent_id TEXT NOT NULL, external_id TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	d, err := NewDeduper(context.Background(), db, "")
	if err != nil {
		t.Fatal(err)
	}
	return &dsService{db: db, dedup: d}
}

// announce is the effect: one row per receipt.
func (s *dsService) announce(ctx context.Context, d Delivery) (bool, error) {
	return s.dedup.ApplyOnce(ctx, d.EventID, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO announcements (event_id, intent_id, external_id) VALUES (?, ?, ?)`,
			d.EventID, d.Event.IntentID, d.Receipt().ExternalID)
		return err
	})
}

func (s *dsService) rows(t *testing.T) (total, distinct int) {
	t.Helper()
	if err := s.db.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT event_id) FROM announcements`).Scan(&total, &distinct); err != nil {
		t.Fatal(err)
	}
	return total, distinct
}

func (s *dsService) eventIDs(t *testing.T) map[string]bool {
	t.Helper()
	rows, err := s.db.Query(`SELECT event_id FROM announcements`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out[id] = true
	}
	return out
}

// dsWait polls cond until it holds (a generous bound, not a timing claim).
func dsWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dsQuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func dsSettled(t *testing.T, js jetstream.JetStream, durable string) func() bool {
	return func() bool {
		c, err := js.Consumer(context.Background(), "SETTLE_INTENTS", durable)
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0
	}
}

func (f *dsFixture) wantReceipts(t *testing.T, got map[string]bool) {
	t.Helper()
	if len(got) != len(f.receipts) {
		t.Fatalf("announced %v, want %v", got, f.receipts)
	}
	for _, id := range f.receipts {
		if !got[id] {
			t.Fatalf("receipt %s not announced: %v", id, got)
		}
	}
}

// TestSubscribeHandlerErrorsRedeliverAndEffectOnce: the handler fails the
// first two deliveries of every receipt; each is redelivered until it
// succeeds, other events and routes never reach it, every message ends
// acked, and the effect happened once per receipt. Calling the handler
// again with a delivery it has handled changes nothing.
func TestSubscribeHandlerErrorsRedeliverAndEffectOnce(t *testing.T) {
	f := newDSFixture(t)
	svc := newDSService(t)
	var mu sync.Mutex
	var seen []Delivery
	handler := func(ctx context.Context, d Delivery) error {
		mu.Lock()
		seen = append(seen, d)
		mu.Unlock()
		if d.NumDelivered < 3 {
			return errors.New("downstream database is warming up")
		}
		_, err := svc.announce(ctx, d)
		return err
	}
	stop, err := Subscribe(context.Background(), f.node.JS, SubscribeConfig{Durable: "announcer", Routes: []string{"social_post"},
		RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond, Logger: dsQuietLogger()}, handler)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	dsWait(t, "four announcements", func() bool { n, _ := svc.rows(t); return n >= len(f.receipts) })
	dsWait(t, "every message acked", dsSettled(t, f.node.JS, "announcer"))
	stop()

	total, distinct := svc.rows(t)
	if total != len(f.receipts) || distinct != len(f.receipts) {
		t.Fatalf("announcement rows %d (distinct %d), want %d", total, distinct, len(f.receipts))
	}
	f.wantReceipts(t, svc.eventIDs(t))
	mu.Lock()
	deliveries := append([]Delivery(nil), seen...)
	mu.Unlock()
	per := map[string][]uint64{}
	for _, d := range deliveries {
		if d.Route != "social_post" || d.EventID != d.Event.EventID || d.Receipt() == nil || d.Seq == 0 {
			t.Fatalf("delivery %+v", d)
		}
		if d.Redelivered != (d.NumDelivered > 1) {
			t.Fatalf("redelivered flag %+v", d)
		}
		per[d.EventID] = append(per[d.EventID], d.NumDelivered)
	}
	for _, id := range f.receipts {
		if got := per[id]; len(got) != 3 || got[0] != 1 || got[2] != 3 {
			t.Fatalf("deliveries of %s: %v", id, got)
		}
	}
	if len(per) != len(f.receipts) {
		t.Fatalf("handler saw %d events, want the %d receipts only (other route %s): %v", len(per), len(f.receipts), f.other, per)
	}
	// A duplicate of an applied delivery is a no-op.
	last := deliveries[len(deliveries)-1]
	if err := handler(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	if applied, err := svc.announce(context.Background(), last); err != nil || applied {
		t.Fatalf("second apply: applied %v err %v", applied, err)
	}
	if total, _ := svc.rows(t); total != len(f.receipts) {
		t.Fatalf("rows after duplicates: %d", total)
	}
}

// TestSubscribeCrashBeforeAckRedeliversToNextProcess: the first process
// applies a receipt's effect and dies before acking it (its connection is
// closed). A second process on the same durable gets the receipt again
// after AckWait, finds it applied, acks it, and applies the rest: one row
// per receipt.
func TestSubscribeCrashBeforeAckRedeliversToNextProcess(t *testing.T) {
	f := newDSFixture(t)
	svc := newDSService(t)
	cfg := SubscribeConfig{Durable: "announcer", Routes: []string{"social_post"}, AckWait: 400 * time.Millisecond,
		RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond, Logger: dsQuietLogger()}

	ncA, jsA := f.node.Connect()
	applied := make(chan string, 1)
	release := make(chan struct{})
	stopA, err := Subscribe(context.Background(), jsA, cfg, func(ctx context.Context, d Delivery) error {
		if _, err := svc.announce(ctx, d); err != nil {
			return err
		}
		select {
		case applied <- d.EventID:
		default:
		}
		<-release // the process dies here: effect committed, no ack sent
		return errors.New("killed")
	})
	if err != nil {
		t.Fatal(err)
	}
	var crashed string
	select {
	case crashed = <-applied:
	case <-time.After(20 * time.Second):
		t.Fatal("first process never applied anything")
	}
	ncA.Close()
	close(release)
	stopA()
	if n, _ := svc.rows(t); n != 1 {
		t.Fatalf("rows after the crash: %d", n)
	}

	_, jsB := f.node.Connect()
	var mu sync.Mutex
	calls := map[string][]Delivery{}
	results := map[string]bool{}
	stopB, err := Subscribe(context.Background(), jsB, cfg, func(ctx context.Context, d Delivery) error {
		ok, err := svc.announce(ctx, d)
		mu.Lock()
		calls[d.EventID] = append(calls[d.EventID], d)
		if ok {
			results[d.EventID] = true
		}
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stopB()
	dsWait(t, "all receipts announced", func() bool { n, _ := svc.rows(t); return n >= len(f.receipts) })
	dsWait(t, "every message acked", dsSettled(t, f.node.JS, "announcer"))
	stopB()

	total, distinct := svc.rows(t)
	if total != len(f.receipts) || distinct != len(f.receipts) {
		t.Fatalf("announcement rows %d (distinct %d), want %d", total, distinct, len(f.receipts))
	}
	f.wantReceipts(t, svc.eventIDs(t))
	mu.Lock()
	defer mu.Unlock()
	redelivered := calls[crashed]
	if len(redelivered) == 0 || !redelivered[0].Redelivered || redelivered[0].NumDelivered < 2 {
		t.Fatalf("the crashed receipt %s was not redelivered: %+v", crashed, redelivered)
	}
	if results[crashed] {
		t.Fatalf("the crashed receipt %s was applied twice", crashed)
	}
}

// TestSubscribeDuplicateDeliveriesFromTwoConsumersEffectOnce: two durables
// (say, an old and a new deployment) each deliver every receipt to the
// same service concurrently: every receipt is handled twice, applied once.
func TestSubscribeDuplicateDeliveriesFromTwoConsumersEffectOnce(t *testing.T) {
	f := newDSFixture(t)
	svc := newDSService(t)
	var mu sync.Mutex
	handled := map[string]int{}
	appliedN := map[string]int{}
	handler := func(ctx context.Context, d Delivery) error {
		ok, err := svc.announce(ctx, d)
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			handled[d.EventID]++
			if ok {
				appliedN[d.EventID]++
			}
		}
		return err
	}
	for _, durable := range []string{"announcer-blue", "announcer-green"} {
		_, js := f.node.Connect()
		stop, err := Subscribe(context.Background(), js, SubscribeConfig{Durable: durable, Logger: dsQuietLogger()}, handler)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
	}
	dsWait(t, "both consumers done", func() bool {
		return dsSettled(t, f.node.JS, "announcer-blue")() && dsSettled(t, f.node.JS, "announcer-green")()
	})
	mu.Lock()
	defer mu.Unlock()
	// No route filter: the other route's receipt is delivered too.
	want := append([]string{f.other}, f.receipts...)
	for _, id := range want {
		if handled[id] != 2 || appliedN[id] != 1 {
			t.Errorf("%s handled %d applied %d, want 2 and 1", id, handled[id], appliedN[id])
		}
	}
	total, distinct := svc.rows(t)
	if total != len(want) || distinct != len(want) {
		t.Fatalf("announcement rows %d (distinct %d), want %d", total, distinct, len(want))
	}
}

func TestDeduperEffectErrorRecordsNothing(t *testing.T) {
	svc := newDSService(t)
	ctx := context.Background()
	boom := errors.New("boom")
	insert := func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO announcements VALUES ('e1', 'i1', 'x1')`)
		return err
	}
	applied, err := svc.dedup.ApplyOnce(ctx, "e1", func(tx *sql.Tx) error {
		if err := insert(tx); err != nil {
			return err
		}
		return boom
	})
	if applied || !errors.Is(err, boom) {
		t.Fatalf("failed effect: applied %v err %v", applied, err)
	}
	if ok, _ := svc.dedup.Applied(ctx, "e1"); ok {
		t.Fatal("a failed effect was recorded as applied")
	}
	if n, _ := svc.rows(t); n != 0 {
		t.Fatalf("a failed effect left %d rows", n)
	}
	for k, want := range []bool{true, false, false} {
		applied, err := svc.dedup.ApplyOnce(ctx, "e1", insert)
		if err != nil || applied != want {
			t.Fatalf("apply #%d: applied %v err %v", k+1, applied, err)
		}
	}
	if n, _ := svc.rows(t); n != 1 {
		t.Fatalf("rows %d", n)
	}
	if _, err := svc.dedup.ApplyOnce(ctx, "", insert); err == nil {
		t.Fatal("empty event id accepted")
	}
	if _, err := NewDeduper(ctx, svc.db, "bad name;"); err == nil {
		t.Fatal("bad table name accepted")
	}
}

func TestSubscribeConfigRefusesBadFields(t *testing.T) {
	n := testharness.StartNode(t)
	ok := func(context.Context, Delivery) error { return nil }
	for _, c := range []struct {
		cfg  SubscribeConfig
		want string
	}{
		{SubscribeConfig{}, "Durable"},
		{SubscribeConfig{Durable: "a.b"}, "Durable"},
		{SubscribeConfig{Durable: "d", Routes: []string{"Bad Route"}}, "Routes[0]"},
		{SubscribeConfig{Durable: "d", Types: []events.Type{"Nope"}}, "Types[0]"},
		{SubscribeConfig{Durable: "d", MaxDeliver: -2}, "MaxDeliver"},
	} {
		if _, err := Subscribe(context.Background(), n.JS, c.cfg, ok); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
	if _, err := Subscribe(context.Background(), n.JS, SubscribeConfig{Durable: "d"}, nil); err == nil {
		t.Error("nil handler accepted")
	}
}

// A program not told where to keep its database keeps it in the user's
// cache directory, never the working directory.
func TestDefaultDBPath(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", t.TempDir())
	p, err := DefaultDBPath("downstream.db")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "settle-examples", "downstream.db"); p != want {
		t.Fatalf("DefaultDBPath = %q, want %q", p, want)
	}
	if st, err := os.Stat(filepath.Dir(p)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("its directory: %v %v", st, err)
	}
	for _, bad := range []string{"", "../x.db", `a\b`} {
		if _, err := DefaultDBPath(bad); err == nil {
			t.Errorf("DefaultDBPath(%q) accepted", bad)
		}
	}
}

// A handler that asks for WriteStarted (or IntentRecorded) also gets the
// IntentStarted of an intent recorded and started in one message: it sees
// every first attempt, whether started with its record or apart.
func TestSubscribeStartsIncludeIntentStarted(t *testing.T) {
	f := newDSFixture(t)
	var mu sync.Mutex
	got := map[string]events.Type{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop, err := Subscribe(ctx, f.node.JS, SubscribeConfig{Durable: "starts", Routes: []string{"social_post"},
		Types: []events.Type{events.WriteStarted}, Logger: dsQuietLogger()}, func(ctx context.Context, d Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		if ws := events.Started(d.Event); ws == nil || ws.Attempt != 1 {
			t.Errorf("delivered %s", d.Event.Type)
		}
		got[d.Event.IntentID] = d.Event.Type
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	dsWait(t, "every start delivered", dsSettled(t, f.node.JS, "starts"))
	mu.Lock()
	defer mu.Unlock()
	started := 0
	for _, typ := range got {
		if typ == events.IntentStarted {
			started++
		}
	}
	// ds-a, ds-b (IntentStarted), ds-readback, ds-operator, ds-rejected.
	if len(got) != 5 || started != 1 {
		t.Fatalf("starts delivered %v", got)
	}
}
