package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/testharness"
)

var auditT0 = time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)

const auditSecret = "abcdefghijklmnopqrstuvwxyz0123"

// auditWriter appends hand-built histories to a real stream.
type auditWriter struct {
	t     *testing.T
	js    jetstream.JetStream
	store *ledger.Store
	at    time.Time
}

func (w *auditWriter) tick() time.Time { w.at = w.at.Add(time.Second); return w.at }

// record appends an IntentRecorded and returns the history and its fold.
func (w *auditWriter) record(requestID string) (*ledger.History, *fsm.Intent) {
	w.t.Helper()
	canon, err := events.Canonicalize([]byte(`{"body":"` + requestID + `"}`))
	if err != nil {
		w.t.Fatal(err)
	}
	sum, _ := events.PayloadSHA256(canon)
	id := events.ScopedIntentID("default", "social_post", "acct_1", requestID)
	e := events.New(id, 1, w.tick(), "writer", "", &events.IntentRecordedData{Tenant: "default", Route: "social_post",
		Account: "acct_1", RequestID: requestID, IdempotencyKey: events.IdempotencyKey(id), Payload: canon,
		PayloadSHA256: sum, Canon: events.CanonV1, PlannedAt: w.at, Policy: adapter.DefaultPolicy()})
	seq, err := w.store.Append(context.Background(), "social_post", e, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	h := &ledger.History{Route: "social_post", Events: []events.Event{e}, LastSeq: seq}
	i, err := h.Fold()
	if err != nil {
		w.t.Fatal(err)
	}
	return h, i
}

func (w *auditWriter) next(h *ledger.History, i *fsm.Intent, attemptID string, d events.Data) {
	w.t.Helper()
	if err := w.store.AppendNext(context.Background(), h, i, "writer", w.tick(), attemptID, d); err != nil {
		w.t.Fatal(err)
	}
}

// confirmed writes IntentRecorded, WriteStarted, WriteConfirmed.
func (w *auditWriter) confirmed(requestID string) string {
	h, i := w.record(requestID)
	a1 := events.AttemptID(i.ID, 1)
	w.next(h, i, a1, &events.WriteStartedData{Attempt: 1, IdempotencyKey: i.Recorded.IdempotencyKey, Deadline: w.at.Add(time.Minute)})
	w.next(h, i, a1, &events.WriteConfirmedData{StatusCode: 201, Receipt: events.Receipt{ExternalID: "p_" + requestID,
		PayloadSHA256: i.Recorded.PayloadSHA256, Source: "response"}})
	return i.ID
}

// withStore runs fill against an embedded server on dir, then stops it.
func withStore(t *testing.T, dir string, fill func(w *auditWriter)) {
	t.Helper()
	testharness.SkipShort(t, "an embedded nats-server")
	srv, err := embedded.Start(embedded.Config{Dir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	js := testharness.JetStreamOf(t)(srv.Connect())
	store, err := ledger.OpenStore(context.Background(), js, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	fill(&auditWriter{t: t, js: js, store: store, at: auditT0})
}

func runSettle(args ...string) (stdout, stderr string, err error) {
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb}
	err = m.Run(context.Background(), args)
	return out.String(), errb.String(), err
}

func TestAuditCommandCleanStoreWithProjection(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(t.TempDir(), "views.db")
	var first string
	withStore(t, dir, func(w *auditWriter) {
		first = w.confirmed("req-1")
		w.confirmed("req-2")
		p, err := projector.Open(context.Background(), w.js, projector.Config{DBPath: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.CatchUp(context.Background()); err != nil {
			t.Fatal(err)
		}
	})

	out, errs, err := runSettle("audit", "--data", dir, "--projection", db, "--progress-every", "2")
	if err != nil {
		t.Fatalf("audit: %v\n%s\n%s", err, out, errs)
	}
	for _, want := range []string{"stream SETTLE_INTENTS, 6 events", "2 intents", "confirmed", "unknown schema", "projection",
		"2 intent(s) compared at checkpoint 6", "result: OK"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errs, "audit: 2/6 events") || !strings.Contains(errs, "audit: 6/6 events") {
		t.Errorf("progress on stderr: %q", errs)
	}

	out, _, err = runSettle("audit", "--data", dir, "--intent", first)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"timeline of " + first, "IntentRecorded", "WriteStarted", "WriteConfirmed", "write_started", `receipt external id "p_req-1"`} {
		if !strings.Contains(out, want) {
			t.Errorf("timeline lacks %q:\n%s", want, out)
		}
	}

	out, _, err = runSettle("audit", "--data", dir, "--json", "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		OK         bool           `json:"ok"`
		Intents    int            `json:"intents"`
		Events     int            `json:"events"`
		States     map[string]int `json:"states"`
		Violations []any          `json:"violations"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if !rep.OK || rep.Intents != 2 || rep.Events != 6 || rep.States["confirmed"] != 2 || len(rep.Violations) != 0 {
		t.Fatalf("json report %+v", rep)
	}

	if out, _, err = runSettle("audit", "--data", dir, "--quiet"); err != nil || out != "" {
		t.Fatalf("quiet clean audit: %v %q", err, out)
	}
}

func TestAuditCommandFailsOnViolations(t *testing.T) {
	dir := t.TempDir()
	var clean, leaky, orphan string
	withStore(t, dir, func(w *auditWriter) {
		clean = w.confirmed("clean")
		h, i := w.record("leaky")
		leaky = i.ID
		a1 := events.AttemptID(i.ID, 1)
		w.next(h, i, a1, &events.WriteStartedData{Attempt: 1, IdempotencyKey: i.Recorded.IdempotencyKey, Deadline: w.at.Add(time.Minute)})
		w.next(h, i, a1, &events.WriteRejectedData{Code: "http_401", StatusCode: 401, Message: "Authorization: Bearer " + auditSecret})
		// An outcome appended without its WriteStarted (Append checks only
		// the encoding, not the lifecycle).
		h, i = w.record("orphan")
		orphan = i.ID
		e := events.New(i.ID, 2, w.tick(), "intruder", events.AttemptID(i.ID, 1), &events.WriteConfirmedData{StatusCode: 201,
			Receipt: events.Receipt{ExternalID: "p_orphan", PayloadSHA256: i.Recorded.PayloadSHA256, Source: "response"}})
		if _, err := w.store.Append(context.Background(), "social_post", e, h.LastSeq); err != nil {
			t.Fatal(err)
		}
	})

	out, _, err := runSettle("audit", "--data", dir)
	if err == nil || !strings.Contains(err.Error(), "3 violation(s)") {
		t.Fatalf("audit with violations returned %v\n%s", err, out)
	}
	for _, want := range []string{"violations: 3", "secret", leaky, "outcome_without_write_started", "illegal_transition", orphan,
		"result: FAIL", "secret 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, clean) || strings.Contains(out, auditSecret) {
		t.Errorf("output names the clean intent or repeats the secret:\n%s", out)
	}

	out, _, err = runSettle("audit", "--data", dir, "--quiet")
	if err == nil || strings.Count(out, "\n") != 3 || !strings.Contains(out, orphan) {
		t.Fatalf("quiet: %v\n%s", err, out)
	}
	out, _, err = runSettle("audit", "--data", dir, "--json", "--intent", leaky)
	if err == nil {
		t.Fatal("json audit with violations succeeded")
	}
	var rep struct {
		OK         bool `json:"ok"`
		Violations []struct {
			IntentID string `json:"intent_id"`
			Kind     string `json:"kind"`
		} `json:"violations"`
		Timeline []struct {
			Type   string `json:"type"`
			Detail string `json:"detail"`
		} `json:"timeline"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if rep.OK || len(rep.Violations) != 3 || len(rep.Timeline) != 3 || strings.Contains(out, auditSecret) ||
		!strings.Contains(rep.Timeline[2].Detail, "[redacted]") {
		t.Fatalf("json report %+v", rep)
	}
}

func TestAuditCommandOverNATSURLAndUsage(t *testing.T) {
	testharness.SkipShort(t, "an embedded nats-server")
	srv, err := embedded.Start(embedded.DefaultConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	js := testharness.JetStreamOf(t)(srv.Connect())
	store, err := ledger.OpenStore(context.Background(), js, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	(&auditWriter{t: t, js: js, store: store, at: auditT0}).confirmed("over-the-wire")
	out, _, err := runSettle("audit", "--nats-url", srv.ClientURL())
	if err != nil || !strings.Contains(out, "1 intents") || !strings.Contains(out, "result: OK") {
		t.Fatalf("audit over --nats-url: %v\n%s", err, out)
	}
	if _, _, err := runSettle("audit", "--nats-url", srv.ClientURL(), "--intent", events.ScopedIntentID("default", "social_post", "acct_1", "nope")); err == nil ||
		!strings.Contains(err.Error(), "no event") {
		t.Fatalf("unknown intent: %v", err)
	}
	if _, _, err := runSettle("audit", "--nats-url", srv.ClientURL(), "--stream", "NOPE"); err == nil {
		t.Fatal("missing stream audited")
	}
	for _, args := range [][]string{{"audit"}, {"audit", "--data", "x", "--nats-url", "y"}, {"audit", "--bogus"}} {
		if _, errs, err := runSettle(args...); err != errUsage {
			t.Errorf("%v: %v %s", args, err, errs)
		}
	}
	if _, _, err := runSettle("audit", "--data", filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("audit of a missing data dir succeeded")
	}
}
