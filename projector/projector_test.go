package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

func TestConfigValidateNamesTheField(t *testing.T) {
	ok := DefaultConfig()
	ok.DBPath = "/tmp/x.db"
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		field  string
		mutate func(*Config)
	}{
		{"Stream", func(c *Config) { c.Stream = "" }},
		{"Stream", func(c *Config) { c.Stream = "A.B" }},
		{"DBPath", func(c *Config) { c.DBPath = "" }},
		{"DBPath", func(c *Config) { c.DBPath = "x.db?mode=ro" }},
		{"Durable", func(c *Config) { c.Durable = "" }},
		{"Durable", func(c *Config) { c.Durable = "a.b" }},
		{"Batch", func(c *Config) { c.Batch = 0 }},
		{"Batch", func(c *Config) { c.Batch = MaxBatch + 1 }},
		{"CacheSize", func(c *Config) { c.CacheSize = -1 }},
		{"UnsyncedBacklog", func(c *Config) { c.UnsyncedBacklog = -2 }},
	}
	for _, c := range cases {
		cfg := ok
		c.mutate(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field+":") {
			t.Errorf("%+v: error %v does not name %s", cfg, err, c.field)
		}
	}
	// Open fills zero fields with the defaults.
	lg := newTestLog(t)
	p, err := Open(context.Background(), lg.node.JS, Config{DBPath: t.TempDir() + "/v.db", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if c := p.Config(); c.Stream != "SETTLE_INTENTS" || c.Durable != "settle-projector" || c.Batch != DefaultConfig().Batch || c.UnsyncedBacklog != DefaultUnsyncedBacklog {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if _, err := Open(context.Background(), lg.node.JS, Config{DBPath: t.TempDir() + "/v.db", Stream: "NOPE"}); err == nil {
		t.Fatal("opened a projector on a missing stream")
	}
}

// A database projected from one log refuses another log (a recreated
// stream), shorter or longer: the views would silently mix two histories.
func TestOpenRefusesAStreamBehindTheCheckpoint(t *testing.T) {
	lg := newTestLog(t)
	g := newGenerator(3)
	route, rec := g.recorded(0)
	lg.append(route, rec)
	p := openProjector(t, lg.node.JS, "", nil)
	catchUp(t, p)
	path := p.cfg.DBPath
	p.Close()
	other := newTestLog(t)
	_, err := Open(context.Background(), other.node.JS, Config{DBPath: path, Logger: quietLogger()})
	if !errors.Is(err, ErrStreamMismatch) {
		t.Fatalf("empty stream: want ErrStreamMismatch, got %v", err)
	}
	// A recreated stream that already grew past the checkpoint: the event
	// at the checkpoint is not the one applied.
	for k := 1; k < 4; k++ {
		route, rec := g.recorded(k)
		other.append(route, rec)
	}
	_, err = Open(context.Background(), other.node.JS, Config{DBPath: path, Logger: quietLogger()})
	if !errors.Is(err, ErrStreamMismatch) {
		t.Fatalf("other history: want ErrStreamMismatch, got %v", err)
	}
	// The right stream still opens.
	openProjector(t, lg.node.JS, path, nil)
}

// TestQuarantineKeepsGoing publishes, on intent subjects, a message with an
// unknown schema, one with an unknown type, one on a malformed subject, an
// illegal transition and the version gap it leaves, and an event on another
// route's subject than its intent's: each is quarantined,
// counted, listed and logged, and every legal event around them is
// projected.
func TestQuarantineKeepsGoing(t *testing.T) {
	ctx := context.Background()
	lg := newTestLog(t)
	logs := &testharness.SyncBuffer{}
	p := openProjector(t, lg.node.JS, "", func(c *Config) {
		c.Batch = 3
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	g := newGenerator(11)
	rA, a1 := g.recorded(1)
	rB, b1 := g.recorded(2)
	rC, c1 := g.recorded(3)
	rD, d1 := g.recorded(4)
	lg.append(rA, a1)
	lg.append(rB, b1)
	lg.append(rC, c1)

	type want struct {
		seq  uint64
		code string
	}
	var wants []want
	// A future schema on A's subject.
	fa, _ := fsm.Fold([]events.Event{a1})
	a2 := events.New(a1.IntentID, 2, a1.At.Add(time.Second), "test", "", &events.AbandonedData{By: "x", Reason: "y"})
	b, err := events.Encode(a2)
	if err != nil {
		t.Fatal(err)
	}
	future := strings.Replace(string(b), `"schema":"settle.event/v1"`, `"schema":"settle.event/v2"`, 1)
	wants = append(wants, want{lg.publishRaw(events.Subject(rA, a1.IntentID), []byte(future)), events.CodeUnknownSchema})
	// An unknown event type on B's subject.
	unknownType := fmt.Sprintf(`{"schema":"settle.event/v1","event_id":"%s","intent_id":"%s","version":2,"type":"PostBoosted","at":"2026-07-22T09:00:05Z","actor":"future","data":{"boost":3}}`,
		events.MsgID(b1.IntentID, 2), b1.IntentID)
	wants = append(wants, want{lg.publishRaw(events.Subject(rB, b1.IntentID), []byte(unknownType)), events.CodeUnknownType})
	// A subject that names no intent.
	wants = append(wants, want{lg.publishRaw("settle.intents."+rB+".not-an-intent", []byte(unknownType)), QuarantineBadSubject})
	// An illegal transition on C (readback with nothing written), then C's
	// next event, which now has a version the projection cannot place.
	fc, _ := fsm.Fold([]events.Event{c1})
	c2 := events.New(c1.IntentID, 2, c1.At.Add(time.Second), "test", "", &events.ReadbackPassedData{Receipt: events.Receipt{
		ExternalID: "p1", Source: "response", PayloadSHA256: fc.Recorded.PayloadSHA256}})
	wants = append(wants, want{lg.append(rC, c2), fsm.CodeIllegalTransition})
	c3 := events.New(c1.IntentID, 3, c1.At.Add(2*time.Second), "test", "", &events.AbandonedData{By: "x", Reason: "y"})
	wants = append(wants, want{lg.append(rC, c3), fsm.CodeBadHistory})
	// Legal events after all that: A's real version 2, and a new intent D.
	a2legal := events.New(a1.IntentID, 2, a1.At.Add(3*time.Second), "test", events.AttemptID(a1.IntentID, 1),
		&events.WriteStartedData{Attempt: 1, IdempotencyKey: fa.Recorded.IdempotencyKey, Deadline: a1.At.Add(time.Minute)})
	if fa.Recorded.Policy.FirstWrite == events.PolicyApproval {
		a2legal = events.New(a1.IntentID, 2, a1.At.Add(3*time.Second), "test", "", &events.ApprovalRequiredData{For: "first_write"})
	}
	lg.append(rA, a2legal)
	lg.append(rD, d1)
	// D's next event on another route's subject escapes D's CAS.
	otherRoute := genRoutes[0]
	if otherRoute == rD {
		otherRoute = genRoutes[1]
	}
	d2, err := events.Encode(events.New(d1.IntentID, 2, d1.At.Add(time.Second), "test", "", &events.AbandonedData{By: "x", Reason: "y"}))
	if err != nil {
		t.Fatal(err)
	}
	wants = append(wants, want{lg.publishRaw(events.Subject(otherRoute, d1.IntentID), d2), QuarantineRouteMismatch})

	catchUp(t, p)
	st := p.Stats()
	if st.Quarantined != uint64(len(wants)) || st.Applied != 5 || st.Checkpoint != lg.lastSeq() {
		t.Fatalf("stats %+v: want %d quarantined, 5 applied, checkpoint %d", st, len(wants), lg.lastSeq())
	}
	qs, err := p.Quarantined(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != len(wants) {
		t.Fatalf("quarantined %+v", qs)
	}
	for i, q := range qs {
		if q.Seq != wants[i].seq || q.Code != wants[i].code || q.Reason == "" || len(q.Raw) == 0 || q.Subject == "" {
			t.Errorf("quarantine %d = %+v, want seq %d code %s", i, q, wants[i].seq, wants[i].code)
		}
		line := fmt.Sprintf("code=%s", q.Code)
		if !strings.Contains(logs.String(), line) {
			t.Errorf("no warning logged with %s:\n%s", line, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "quarantined") {
		t.Errorf("no quarantine warning:\n%s", logs.String())
	}
	for id, version := range map[string]uint64{a1.IntentID: 2, b1.IntentID: 1, c1.IntentID: 1, d1.IntentID: 1} {
		v, err := p.Get(ctx, id)
		if err != nil || v.Version != version {
			t.Fatalf("Get %s: %+v, %v (want version %d)", id, v, err, version)
		}
	}
	if d, r := dump(t, p), rebuildDump(t, lg.node.JS); d != r {
		t.Fatalf("projection with quarantine differs from a rebuild: %s", firstDiff(d, r))
	}
}

// TestListPagingAndFilters pages through every filter combination with
// several page sizes and checks that the pages hold exactly the matching
// intents, newest first, each once; a cursor stays valid while new intents
// are projected.
func TestListPagingAndFilters(t *testing.T) {
	ctx := context.Background()
	lg := newTestLog(t)
	p := openProjector(t, lg.node.JS, "", nil)
	type row struct {
		id, route, account string
		created            time.Time
		state              fsm.State
	}
	var rows []row
	add := func(k int) {
		tenant, route, account := "acme", genRoutes[k%3], genAccounts[k%2]
		reqID := fmt.Sprintf("list-%d", k)
		id := events.ScopedIntentID(tenant, route, account, reqID)
		payload := []byte(fmt.Sprintf(`{"n":%d}`, k))
		sum, _ := events.PayloadSHA256(payload)
		at := t0.Add(time.Duration(k/2) * time.Minute) // pairs share a creation time
		rec := events.New(id, 1, at, "test", "", &events.IntentRecordedData{Tenant: tenant, Route: route, Account: account,
			RequestID: reqID, IdempotencyKey: events.IdempotencyKey(id), Payload: payload, PayloadSHA256: sum,
			Canon: events.CanonV1, PlannedAt: at, Policy: events.Policy{FirstWrite: "auto", Retry: "auto", RetryBudget: 1,
				AttemptDeadline: events.Duration(time.Minute), SearchAfter: events.Duration(time.Hour)}})
		lg.append(route, rec)
		state := fsm.Recorded
		if k%3 == 1 {
			lg.append(route, events.New(id, 2, at.Add(time.Second), "test", events.AttemptID(id, 1),
				&events.WriteStartedData{Attempt: 1, IdempotencyKey: events.IdempotencyKey(id), Deadline: at.Add(time.Minute)}))
			state = fsm.WriteStarted
		}
		rows = append(rows, row{id, route, account, at, state})
	}
	for k := 0; k < 40; k++ {
		add(k)
	}
	catchUp(t, p)

	pageAll := func(f Filter) []string {
		t.Helper()
		var out []string
		seen := map[string]bool{}
		for n := 0; ; n++ {
			pg, err := p.List(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if f.Limit > 0 && len(pg.Items) > f.Limit {
				t.Fatalf("page of %d items with limit %d", len(pg.Items), f.Limit)
			}
			for _, v := range pg.Items {
				if seen[v.IntentID] {
					t.Fatalf("%+v: %s listed twice", f, v.IntentID)
				}
				seen[v.IntentID] = true
				out = append(out, v.IntentID)
			}
			if pg.Next == "" {
				return out
			}
			if len(pg.Items) == 0 || n > 100 {
				t.Fatalf("%+v: empty page with a cursor", f)
			}
			f.After = pg.Next
		}
	}
	expect := func(f Filter) []string {
		var m []row
		for _, r := range rows {
			if (f.Route == "" || r.route == f.Route) && (f.Account == "" || r.account == f.Account) &&
				(f.State == "" || r.state == f.State) && (f.From.IsZero() || !r.created.Before(f.From)) &&
				(f.To.IsZero() || r.created.Before(f.To)) {
				m = append(m, r)
			}
		}
		sort.Slice(m, func(i, j int) bool {
			if !m[i].created.Equal(m[j].created) {
				return m[i].created.After(m[j].created)
			}
			return m[i].id > m[j].id
		})
		out := []string{}
		for _, r := range m {
			out = append(out, r.id)
		}
		return out
	}
	filters := []Filter{
		{},
		{Route: "payment_create"},
		{Account: "acct_2"},
		{State: fsm.WriteStarted},
		{State: fsm.Confirmed},
		{From: t0.Add(5 * time.Minute), To: t0.Add(12 * time.Minute)},
		{Route: "social_post", Account: "acct_1", From: t0.Add(3 * time.Minute)},
		{Route: "booking_update", State: fsm.Recorded, To: t0.Add(15 * time.Minute)},
		{Route: "no_such_route"},
	}
	for _, f := range filters {
		want := expect(f)
		for _, limit := range []int{1, 3, 7, 0} {
			f.Limit = limit
			got := pageAll(f)
			if mustJSON(t, append([]string{}, got...)) != mustJSON(t, want) {
				t.Fatalf("List %+v:\n got  %v\n want %v", f, got, want)
			}
		}
	}

	// A cursor stays valid while the projection moves: intents created
	// before and after the cursor appear (or not) but nothing repeats and
	// nothing that existed is skipped.
	first, err := p.List(ctx, Filter{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	before := expect(Filter{})
	for k := 40; k < 50; k++ {
		add(k)
	}
	catchUp(t, p)
	rest := pageAll(Filter{Limit: 4, After: first.Next})
	var all []string
	for _, v := range first.Items {
		all = append(all, v.IntentID)
	}
	all = append(all, rest...)
	got := map[string]bool{}
	for _, id := range all {
		if got[id] {
			t.Fatalf("%s listed twice across the projection moving", id)
		}
		got[id] = true
	}
	for _, id := range before {
		if !got[id] {
			t.Fatalf("%s existed before paging and was skipped", id)
		}
	}

	for _, f := range []Filter{{Limit: -1}, {Limit: MaxLimit + 1}, {After: "garbage"}, {After: "eyJjIjoieCIsImkiOiJ5In0"}} {
		if _, err := p.List(ctx, f); err == nil {
			t.Errorf("List %+v: no error", f)
		}
	}
	if _, err := p.Get(ctx, events.ScopedIntentID("acme", "x", "acct_1", "nope")); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get unknown: %v", err)
	}
	if _, err := p.ByRequestID(ctx, "acme", "social_post", "acct_1", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ByRequestID unknown: %v", err)
	}
	if _, err := p.ByExternalID(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ByExternalID unknown: %v", err)
	}
	if _, err := p.Timeline(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Timeline unknown: %v", err)
	}
	if _, ok, err := p.OldestUnknownAge(ctx, t0); ok || err != nil {
		t.Errorf("OldestUnknownAge with nothing unknown: %v %v", ok, err)
	}
	if mq, err := p.ManualQueue(ctx, 0); err != nil || len(mq) != 0 {
		t.Errorf("ManualQueue: %v %v", mq, err)
	}
}

// TestRepeatedFirstEventOfAnEvictedIntent: a first event is not looked up
// in SQL when its intent is neither in the batch nor in the cache (it is
// taken for a new intent's). A damaged log that repeats the first event of
// an intent the cache no longer holds must still be quarantined exactly as
// a full lookup would: the batch is applied again, looking every intent
// up, and the views equal a rebuild's.
func TestRepeatedFirstEventOfAnEvictedIntent(t *testing.T) {
	// 0 more intents: A's row is written alone; 40: with others, by the
	// statement of intentRows rows.
	for _, more := range []int{0, 40} {
		t.Run(fmt.Sprintf("more=%d", more), func(t *testing.T) { repeatedFirstEvent(t, more) })
	}
}

func repeatedFirstEvent(t *testing.T, more int) {
	ctx := context.Background()
	lg := newTestLog(t)
	p := openProjector(t, lg.node.JS, "", func(c *Config) { c.CacheSize = 1 })
	g := newGenerator(5)
	rA, a1 := g.recorded(1)
	rB, b1 := g.recorded(2)
	lg.append(rA, a1)
	lg.append(rB, b1) // evicts A from the cache of one
	catchUp(t, p)
	if st := p.Stats(); st.Applied != 2 || st.Reapplied != 0 {
		t.Fatalf("stats %+v: want 2 applied, none reapplied", st)
	}
	raw, err := events.Encode(a1)
	if err != nil {
		t.Fatal(err)
	}
	rC, c1 := g.recorded(3)
	repeat := lg.publishRaw(events.Subject(rA, a1.IntentID), raw) // A's first event again
	lg.append(rC, c1)
	want := map[string]uint64{a1.IntentID: 1, b1.IntentID: 1, c1.IntentID: 1}
	for k := 0; k < more; k++ {
		r, e := g.recorded(10 + k)
		if _, dup := want[e.IntentID]; dup {
			continue
		}
		lg.append(r, e)
		want[e.IntentID] = 1
	}
	catchUp(t, p)
	st := p.Stats()
	if st.Applied != uint64(len(want)) || st.Quarantined != 1 || st.Reapplied != 1 || st.Checkpoint != lg.lastSeq() {
		t.Fatalf("stats %+v: want %d applied, 1 quarantined, 1 batch reapplied, checkpoint %d", st, len(want), lg.lastSeq())
	}
	qs, err := p.Quarantined(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Seq != repeat || qs[0].Code != fsm.CodeBadHistory {
		t.Fatalf("quarantined %+v: want seq %d with %s", qs, repeat, fsm.CodeBadHistory)
	}
	for id, version := range want {
		v, err := p.Get(ctx, id)
		if err != nil || v.Version != version {
			t.Fatalf("Get %s: %+v, %v (want version %d)", id, v, err, version)
		}
	}
	tl, err := p.Timeline(ctx, a1.IntentID)
	if err != nil || len(tl) != 1 || tl[0].EventID != a1.EventID {
		t.Fatalf("timeline of A: %+v, %v: want its one event", tl, err)
	}
	if d, r := dump(t, p), rebuildDump(t, lg.node.JS); d != r {
		t.Fatalf("projection differs from a rebuild: %s", firstDiff(d, r))
	}
}
