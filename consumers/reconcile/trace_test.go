package reconcile

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/internal/telemetry"
	"github.com/settle-dev/settle/producer"
)

// A write whose response is lost, settled by reconciliation, is one trace
// that starts at the caller's traceparent: the submit under the caller's
// span, the record and the attempt under the submit, the external POST
// under the attempt (HTTP client conventions, route, attempt id), and the
// reconciliation — started from the traceparent the intent recorded, as a
// reconciler on another node would — under the submit, its search and
// readback each with their GET. No attribute or status holds the route's
// credential, and no URL its query.
func TestTraceOfALostResponseSettledByReconciliation(t *testing.T) {
	w := newWorld(t, nil)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer telemetry.Use(tp, adapter.NewScrubber(w.api.Token()).Scrub)()

	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := telemetry.WithTraceparent(context.Background(), "00-"+callerTrace+"-"+callerSpan+"-01")
	w.api.Next(fakeapi.CommitThenDrop())
	res, err := w.prod.Execute(ctx, producer.Request{Route: "social_post", Account: "acct_1",
		RequestID: "traced-1", Payload: json.RawMessage(`{"body":"traced"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != fsm.Unknown {
		t.Fatalf("execute: %s, want unknown", res.State)
	}
	// Another node's reconciler: nothing but the log links it to the caller.
	if i := w.settle(w.reconciler("other-node", nil), res.IntentID); i.State != fsm.Confirmed {
		t.Fatalf("settled %s, want confirmed", i.State)
	}
	if w.api.Effects() != 1 {
		t.Fatalf("effects %d, want 1", w.api.Effects())
	}

	spans := rec.Ended()
	byID := map[string]sdktrace.ReadOnlySpan{}
	var named = map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s.SpanContext().TraceID().String() != callerTrace {
			t.Errorf("span %s is in trace %s, not the caller's", s.Name(), s.SpanContext().TraceID())
		}
		byID[s.SpanContext().SpanID().String()] = s
		named[s.Name()] = append(named[s.Name()], s)
	}
	parent := func(s sdktrace.ReadOnlySpan) string {
		if p, ok := byID[s.Parent().SpanID().String()]; ok {
			return p.Name()
		}
		return s.Parent().SpanID().String()
	}
	attr := func(s sdktrace.ReadOnlySpan, k string) string {
		for _, a := range s.Attributes() {
			if string(a.Key) == k {
				return a.Value.Emit()
			}
		}
		return ""
	}
	one := func(name string) sdktrace.ReadOnlySpan {
		t.Helper()
		if len(named[name]) != 1 {
			t.Fatalf("%d spans %s, want 1 (spans: %v)", len(named[name]), name, names(spans))
		}
		return named[name][0]
	}

	submit := one("settle.submit")
	if parent(submit) != callerSpan || !submit.Parent().IsRemote() {
		t.Errorf("settle.submit's parent is %s, want the caller's %s", parent(submit), callerSpan)
	}
	if attr(submit, telemetry.AttrIntentID) != res.IntentID || attr(submit, telemetry.AttrRoute) != "social_post" || attr(submit, telemetry.AttrState) != "unknown" {
		t.Errorf("settle.submit attributes: %v", submit.Attributes())
	}
	attempt := one("settle.attempt")
	if parent(attempt) != "settle.submit" || attr(attempt, telemetry.AttrAttemptID) == "" || attr(attempt, telemetry.AttrOutcome) != string(events.OutcomeUnknown) {
		t.Errorf("settle.attempt: parent %s, attributes %v", parent(attempt), attempt.Attributes())
	}
	post := one("POST")
	if parent(post) != "settle.attempt" || attr(post, "http.request.method") != "POST" || attr(post, telemetry.AttrRoute) != "social_post" ||
		attr(post, telemetry.AttrAttemptID) != attr(attempt, telemetry.AttrAttemptID) || attr(post, telemetry.AttrIntentID) != res.IntentID ||
		attr(post, telemetry.AttrCallKind) != "write" || attr(post, "error.type") == "" || attr(post, "server.address") == "" {
		t.Errorf("POST: parent %s, attributes %v", parent(post), post.Attributes())
	}
	var records []string
	for _, s := range named["settle.record"] {
		records = append(records, parent(s)+">"+attr(s, telemetry.AttrEvent))
	}
	for _, want := range []string{"settle.submit>IntentStarted", "settle.attempt>OutcomeUnknown", "settle.reconcile>ReadbackPassed"} {
		if !strings.Contains(strings.Join(records, " "), want) {
			t.Errorf("records %v: none %s", records, want)
		}
	}

	// The intent recorded the submit's span; reconciliation continues it.
	started := w.history(res.IntentID)[0].Data.(*events.IntentStartedData)
	if want := "00-" + callerTrace + "-" + submit.SpanContext().SpanID().String() + "-01"; started.Traceparent != want {
		t.Errorf("IntentStarted.traceparent %q, want %q", started.Traceparent, want)
	}
	if len(named["settle.reconcile"]) == 0 {
		t.Fatalf("no settle.reconcile span (spans: %v)", names(spans))
	}
	settled := false
	for _, s := range named["settle.reconcile"] {
		if parent(s) != "settle.submit" || attr(s, telemetry.AttrIntentID) != res.IntentID {
			t.Errorf("settle.reconcile: parent %s, attributes %v", parent(s), s.Attributes())
		}
		settled = settled || attr(s, telemetry.AttrState) == "confirmed"
	}
	if !settled {
		t.Error("no settle.reconcile span leaves the intent confirmed")
	}
	for _, step := range []string{"settle.reconcile.search", "settle.reconcile.readback"} {
		s := one(step)
		if parent(s) != "settle.reconcile.decision" {
			t.Errorf("%s's parent is %s", step, parent(s))
		}
		var gets int
		for _, g := range named["GET"] {
			if parent(g) == step {
				gets++
			}
		}
		if gets == 0 {
			t.Errorf("%s made no GET span", step)
		}
	}
	decided := map[string]bool{}
	for _, s := range named["settle.reconcile.decision"] {
		if parent(s) != "settle.reconcile" {
			t.Errorf("settle.reconcile.decision's parent is %s", parent(s))
		}
		decided[attr(s, telemetry.AttrEvent)] = true
	}
	for _, e := range []string{"ReconcileStarted", "CandidateFound", "ReadbackPassed"} {
		if !decided[e] {
			t.Errorf("no decision span for %s: %v", e, decided)
		}
	}

	// No secret, no query string, anywhere.
	for _, s := range spans {
		texts := []string{s.Name(), s.Status().Description}
		for _, a := range s.Attributes() {
			texts = append(texts, a.Value.Emit())
			if a.Key == "url.full" && strings.ContainsAny(a.Value.AsString(), "?@#") {
				t.Errorf("%s: url.full %q keeps a query, fragment or user info", s.Name(), a.Value.AsString())
			}
		}
		for _, x := range texts {
			if strings.Contains(x, w.api.Token()) {
				t.Errorf("%s holds the route's credential", s.Name())
			}
		}
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for k, s := range spans {
		out[k] = s.Name()
	}
	return out
}
