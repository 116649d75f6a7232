package projector

import (
	"context"
	"encoding/json"
	"flag"
	"sort"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
)

var (
	seedFlag     = flag.Int64("seed", 20260722, "seed of the generated histories (TestProjectionEqualsFold)")
	perStateFlag = flag.Int("per-state", 12, "generated intents ending in each lifecycle state")
)

// expectedReceipt is the fold's receipt as the view shows it: the intent's
// request id and idempotency key fill the receipt's when it left them out.
func expectedReceipt(i *fsm.Intent) *events.Receipt {
	if i.Receipt == nil {
		return nil
	}
	r := *i.Receipt
	if r.RequestID == "" {
		r.RequestID = i.Recorded.RequestID
	}
	if r.IdempotencyKey == "" {
		r.IdempotencyKey = i.Recorded.IdempotencyKey
	}
	return &r
}

// unknownSinceOf finds the start of the unsettled episode an intent is in
// at the end of its history, independently of the projector's forward
// rule: walk back over the trailing run of states in {unknown,
// reconciling, in_progress, verifying}; the episode starts at the first
// event of that run that entered unknown, reconciling or in_progress.
func unknownSinceOf(t *testing.T, h []events.Event) time.Time {
	t.Helper()
	states := make([]fsm.State, len(h))
	i := &fsm.Intent{State: fsm.None}
	for k, e := range h {
		if err := i.Apply(e); err != nil {
			t.Fatal(err)
		}
		states[k] = i.State
	}
	unsettled := func(s fsm.State) bool { return s == fsm.Unknown || s == fsm.Reconciling || s == fsm.InProgress }
	j := len(h)
	for j > 0 && (unsettled(states[j-1]) || states[j-1] == fsm.Verifying) {
		j--
	}
	for k := j; k < len(h); k++ {
		if unsettled(states[k]) {
			return h[k].At
		}
	}
	return time.Time{}
}

// TestProjectionEqualsFold appends generated legal histories covering every
// lifecycle state to a real stream, projects them (incrementally with tiny
// batches and cache, and from scratch with the defaults), and checks every
// query against fsm.Fold of each history.
func TestProjectionEqualsFold(t *testing.T) {
	seed := *seedFlag
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("generated with -seed=%d -per-state=%d", seed, *perStateFlag)
		}
	})
	ctx := context.Background()
	intents := generate(t, seed, *perStateFlag)
	order := interleave(seed, intents)
	t.Logf("seed %d: %d intents, %d events", seed, len(intents), len(order))
	used := map[events.Type]bool{}
	for _, x := range order {
		used[x.Event.Type] = true
	}
	for _, typ := range events.AllTypes() {
		if !used[typ] {
			t.Errorf("no generated history uses %s", typ)
		}
	}

	lg := newTestLog(t)
	// Projector A follows the log as it grows: batches of 7, a cache of 5
	// intents, so histories straddle batches and refold from SQL.
	a := openProjector(t, lg.node.JS, "", func(c *Config) { c.Batch, c.CacheSize = 7, 5 })
	seqOf := map[string]uint64{} // intent -> stream seq of its last event
	for n, x := range order {
		seq := lg.append(x.Route, x.Event)
		seqOf[x.Event.IntentID] = seq
		if n == len(order)/3 || n == 2*len(order)/3 {
			catchUp(t, a)
		}
	}
	catchUp(t, a)
	if st := a.Stats(); st.Applied != uint64(len(order)) || st.Quarantined != 0 || st.CacheMisses == 0 {
		t.Fatalf("stats %+v: want %d applied, none quarantined, some cache misses", st, len(order))
	}
	// Projector B rebuilds from an empty database with the defaults.
	b := openProjector(t, lg.node.JS, "", nil)
	catchUp(t, b)
	da, db := dump(t, a), dump(t, b)
	if da != db {
		t.Fatalf("incremental projection differs from a rebuild: %s", firstDiff(da, db))
	}

	counts := map[fsm.State]int{}
	byState := map[fsm.State][]string{}
	byExternal := map[string][]string{}
	var oldest time.Time
	for _, gi := range intents {
		id := gi.ID()
		f, err := fsm.Fold(gi.History)
		if err != nil {
			t.Fatal(err)
		}
		counts[f.State]++
		byState[f.State] = append(byState[f.State], id)
		if f.ExternalID != "" {
			byExternal[f.ExternalID] = append(byExternal[f.ExternalID], id)
		}
		if s := unknownSinceOf(t, gi.History); !s.IsZero() && (oldest.IsZero() || s.Before(oldest)) {
			oldest = s
		}

		v, err := a.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get %s: %v", id, err)
		}
		if v.State != f.State || v.Attempts != len(f.Attempts) || v.ExternalID != f.ExternalID || v.LiveURL != f.LiveURL ||
			v.ManualReason != f.ManualReason || v.ManualOwner != f.ManualOwner || v.Version != f.Version || v.LastSeq != seqOf[id] ||
			v.Failure != f.Failure || v.LastEventType != f.LastType {
			t.Fatalf("Get %s = %+v\nfold: state %s attempts %d ext %q manual %q version %d seq %d", id, v,
				f.State, len(f.Attempts), f.ExternalID, f.ManualReason, f.Version, seqOf[id])
		}
		if got, want := mustJSON(t, v.Receipt), mustJSON(t, expectedReceipt(f)); got != want {
			t.Fatalf("%s receipt:\n got  %s\n want %s", id, got, want)
		}
		if got, want := mustJSON(t, v.Evidence), mustJSON(t, f.Evidence); got != want {
			t.Fatalf("%s evidence:\n got  %s\n want %s", id, got, want)
		}
		if !v.CreatedAt.Equal(f.CreatedAt) || !v.UpdatedAt.Equal(f.UpdatedAt) || !v.NextCheckAt.Equal(f.NextCheckAt) ||
			!v.PlannedAt.Equal(f.Recorded.PlannedAt) || !v.UnknownSince.Equal(unknownSinceOf(t, gi.History)) {
			t.Fatalf("%s times: %+v", id, v)
		}
		// FoldView is the same mapping, LastSeq aside.
		fv, err := FoldView(gi.History)
		if err != nil {
			t.Fatal(err)
		}
		fv.LastSeq = v.LastSeq
		if got, want := mustJSON(t, v), mustJSON(t, fv); got != want {
			t.Fatalf("%s view differs from FoldView:\n got  %s\n want %s", id, got, want)
		}
		rv, err := b.ByRequestID(ctx, f.Recorded.Tenant, f.Recorded.Route, f.Recorded.Account, f.Recorded.RequestID)
		if err != nil {
			t.Fatalf("ByRequestID %s: %v", id, err)
		}
		if mustJSON(t, rv) != mustJSON(t, v) {
			t.Fatalf("ByRequestID %s differs from Get", id)
		}
		tl, err := a.Timeline(ctx, id)
		if err != nil || len(tl) != len(gi.History) {
			t.Fatalf("Timeline %s: %d events, %v (want %d)", id, len(tl), err, len(gi.History))
		}
		for k, e := range tl {
			got, err := events.Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := events.Encode(gi.History[k])
			if string(got) != string(want) {
				t.Fatalf("Timeline %s event %d:\n got  %s\n want %s", id, k, got, want)
			}
		}
	}

	// Every lifecycle state is covered and counted.
	got, err := a.CountByState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range fsm.AllStates() {
		if s == fsm.None {
			continue
		}
		if counts[s] == 0 {
			t.Errorf("no generated intent ends in %s", s)
		}
		if got[s] != counts[s] {
			t.Errorf("CountByState[%s] = %d, fold says %d", s, got[s], counts[s])
		}
	}
	// List by state, paged 7 at a time, returns exactly that state's intents.
	for s, ids := range byState {
		var listed []string
		after := ""
		for {
			pg, err := a.List(ctx, Filter{State: s, Limit: 7, After: after})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range pg.Items {
				if v.State != s {
					t.Fatalf("List(%s) returned %s in %s", s, v.IntentID, v.State)
				}
				listed = append(listed, v.IntentID)
			}
			if pg.Next == "" {
				break
			}
			after = pg.Next
		}
		sort.Strings(ids)
		sort.Strings(listed)
		if mustJSON(t, listed) != mustJSON(t, ids) {
			t.Fatalf("List(%s) = %v, want %v", s, listed, ids)
		}
	}
	for ext, ids := range byExternal {
		vs, err := a.ByExternalID(ctx, ext)
		if err != nil {
			t.Fatalf("ByExternalID %s: %v", ext, err)
		}
		var listed []string
		for _, v := range vs {
			listed = append(listed, v.IntentID)
		}
		sort.Strings(ids)
		sort.Strings(listed)
		if mustJSON(t, listed) != mustJSON(t, ids) {
			t.Fatalf("ByExternalID(%s) = %v, want %v", ext, listed, ids)
		}
	}
	now := t0.Add(1000 * time.Hour)
	age, ok, err := a.OldestUnknownAge(ctx, now)
	if err != nil || ok != !oldest.IsZero() || (ok && age != now.Sub(oldest)) {
		t.Fatalf("OldestUnknownAge = %s, %v, %v; want %s", age, ok, err, now.Sub(oldest))
	}
	mq, err := a.ManualQueue(ctx, MaxLimit)
	if err != nil || len(mq) != counts[fsm.ManualAction] {
		t.Fatalf("ManualQueue: %d, %v (want %d)", len(mq), err, counts[fsm.ManualAction])
	}
	for k, v := range mq {
		if v.ManualReason == "" || v.Evidence == nil {
			t.Fatalf("manual queue item %s has no reason or evidence", v.IntentID)
		}
		if k > 0 && v.LastEventAt.Before(mq[k-1].LastEventAt) {
			t.Fatalf("manual queue not oldest first")
		}
	}
	// Reopening resumes at the checkpoint and changes nothing.
	cp, _ := a.Checkpoint(ctx)
	if cp != lg.lastSeq() {
		t.Fatalf("checkpoint %d, stream last %d", cp, lg.lastSeq())
	}
	a.Close()
	a2 := openProjector(t, lg.node.JS, a.cfg.DBPath, nil)
	catchUp(t, a2)
	if d := dump(t, a2); d != db {
		t.Fatalf("reopened projection changed: %s", firstDiff(d, db))
	}
	if st := a2.Stats(); st.Applied != 0 {
		t.Fatalf("reopened projector applied %d events again", st.Applied)
	}
}

// mustJSON is json.Marshal's encoding of v, failing the test if it
// cannot be encoded.
func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
