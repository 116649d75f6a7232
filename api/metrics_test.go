package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/internal/buildinfo"
	"github.com/settle-dev/settle/testharness"
)

func TestMetricsExposeTheNamedSeries(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.Social.Next(fakeapi.CommitThenDrop())
	dropped := e.do("POST", "/v1/intents", secretSubmitter, submitBodyJSON("social_post", "acct_1", "m-1", `{"body":"m"}`))
	if dropped.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", dropped.code, dropped.body)
	}
	plain := e.do("POST", "/v1/intents", secretSubmitter, submitBodyJSON("social_post", "acct_1", "m-2", `{"body":"m2"}`))
	if plain.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", plain.code, plain.body)
	}
	e.Social.Next(fakeapi.Status(http.StatusTooManyRequests))
	limited := e.do("POST", "/v1/intents", secretSubmitter, submitBodyJSON("social_post", "acct_1", "m-3", `{"body":"m3"}`))
	if limited.code != http.StatusCreated || limited.str(t, "state") != string(fsm.Rejected) {
		t.Fatalf("submit answered 429: %d %s", limited.code, limited.body)
	}
	e.do("GET", "/v1/intents/nope", secretReader, "")
	e.do("GET", "/readyz", "", "")
	e.do("GET", "/no/such/endpoint", "", "")

	// The unknown's settlement counts only the intent whose outcome was
	// unknown: from its OutcomeUnknown to its settlement, on the log's clock.
	e.Clock.Advance(42 * time.Second)
	var settled []string
	for _, id := range []string{dropped.str(t, "intent_id"), plain.str(t, "intent_id")} {
		if i := e.Settle("social_post", id); i.State != fsm.Confirmed {
			t.Fatalf("%s settled as %s", id, i.State)
		}
		d, result, ok := SettleLatency(e.history("social_post", id))
		if ok {
			e.srv.Metrics().ObserveSettle("social_post", string(result), d)
			settled = append(settled, id)
			if d < 42*time.Second {
				t.Fatalf("settle duration %s, the unknown lasted at least 42s on the log", d)
			}
		}
	}
	if len(settled) != 1 || settled[0] != dropped.str(t, "intent_id") {
		t.Fatalf("settle duration observed for %v, want only the dropped response's intent", settled)
	}
	e.CatchUp()

	r := e.do("GET", "/metrics", secretReader, "")
	if r.code != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("metrics: %d %q", r.code, r.header.Get("Content-Type"))
	}
	fams := parseMetrics(t, r.body)
	checkConventions(t, fams)
	bi := buildinfo.Read()
	m := metricSet{t: t, fams: fams}
	m.want("settle_build_info", dto.MetricType_GAUGE, []string{"goversion", "revision", "version"})
	m.value("settle_build_info", map[string]string{"version": bi.Version, "revision": bi.Revision, "goversion": bi.GoVersion}, 1)
	m.want("settle_intents", dto.MetricType_GAUGE, []string{"route", "state"})
	m.value("settle_intents", map[string]string{"state": "confirmed", "route": "social_post"}, 2)
	m.value("settle_intents", map[string]string{"state": "rejected", "route": "social_post"}, 1)
	m.value("settle_intents", map[string]string{"state": "unknown", "route": "social_post"}, 0)
	m.value("settle_intents", map[string]string{"state": "unknown", "route": "social_other"}, 0) // configured, no intents yet
	m.want("settle_unknown_oldest_age_seconds", dto.MetricType_GAUGE, nil)
	m.value("settle_unknown_oldest_age_seconds", nil, 0)
	m.want("settle_write_duration_seconds", dto.MetricType_HISTOGRAM, []string{"outcome", "route"})
	m.value("settle_write_duration_seconds", map[string]string{"outcome": "unknown", "route": "social_post"}, 1)
	m.value("settle_write_duration_seconds", map[string]string{"outcome": "succeeded", "route": "social_post"}, 1)
	m.want("settle_unknown_settle_duration_seconds", dto.MetricType_HISTOGRAM, []string{"result", "route"})
	m.value("settle_unknown_settle_duration_seconds", map[string]string{"result": "confirmed", "route": "social_post"}, 1)
	if h := m.find("settle_unknown_settle_duration_seconds", map[string]string{"result": "confirmed", "route": "social_post"}); h != nil {
		for _, b := range h.GetHistogram().GetBucket() {
			if b.GetUpperBound() == 30 && b.GetCumulativeCount() != 0 {
				t.Error("the 42 s settlement is in the 30 s bucket")
			}
		}
	}
	m.want("settle_external_calls_total", dto.MetricType_COUNTER, []string{"kind", "outcome", "route"})
	m.value("settle_external_calls_total", map[string]string{"route": "social_post", "kind": "write", "outcome": "unknown"}, 1)
	m.value("settle_external_calls_total", map[string]string{"route": "social_post", "kind": "write", "outcome": "2xx"}, 1)
	m.value("settle_external_calls_total", map[string]string{"route": "social_post", "kind": "write", "outcome": "4xx"}, 1)
	m.atLeast("settle_external_calls_total", map[string]string{"route": "social_post", "kind": "search", "outcome": "2xx"}, 1)
	m.atLeast("settle_external_calls_total", map[string]string{"route": "social_post", "kind": "readback", "outcome": "2xx"}, 1)
	m.want("settle_external_call_duration_seconds", dto.MetricType_HISTOGRAM, []string{"kind", "route"})
	m.value("settle_external_call_duration_seconds", map[string]string{"route": "social_post", "kind": "write"}, 3)
	m.want("settle_external_rate_limited_total", dto.MetricType_COUNTER, []string{"kind", "route"})
	m.value("settle_external_rate_limited_total", map[string]string{"route": "social_post", "kind": "write"}, 1)
	m.want("settle_http_requests_total", dto.MetricType_COUNTER, []string{"code", "handler"})
	m.value("settle_http_requests_total", map[string]string{"handler": "/v1/intents", "code": "201"}, 3)
	m.value("settle_http_requests_total", map[string]string{"handler": "/v1/intents/{id}", "code": "400"}, 1)
	m.value("settle_http_requests_total", map[string]string{"handler": "/readyz", "code": "200"}, 1)
	m.value("settle_http_requests_total", map[string]string{"handler": OtherHandler, "code": "404"}, 1)
	m.want("settle_http_request_duration_seconds", dto.MetricType_HISTOGRAM, []string{"handler"})
	m.value("settle_http_request_duration_seconds", map[string]string{"handler": "/v1/intents"}, 3)
	m.want("settle_projector_checkpoint_sequence", dto.MetricType_GAUGE, nil)
	for _, old := range []string{"settle_settle_latency_seconds", "settle_write_latency_seconds", "settle_reconcile_latency_seconds"} {
		if _, ok := fams[old]; ok {
			t.Errorf("%s is still exposed", old)
		}
	}
	// The scrape itself is counted once it is answered.
	r = e.do("GET", "/metrics", secretReader, "")
	metricSet{t: t, fams: parseMetrics(t, r.body)}.value("settle_http_requests_total", map[string]string{"handler": "/metrics", "code": "200"}, 1)
}

// A handler mounted beside the API (/mcp) is counted under its name.
func TestInstrumentCountsAMountedHandler(t *testing.T) {
	e := newEnv(t, envOptions{})
	h := e.srv.Instrument("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	hs := httptest.NewServer(h)
	defer hs.Close()
	for range 2 {
		resp, err := http.Post(hs.URL+"/mcp", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	r := e.do("GET", "/metrics", secretReader, "")
	m := metricSet{t: t, fams: parseMetrics(t, r.body)}
	m.value("settle_http_requests_total", map[string]string{"handler": "/mcp", "code": "202"}, 2)
	m.value("settle_http_request_duration_seconds", map[string]string{"handler": "/mcp"}, 2)
}

// parseMetrics reads an exposition through client_golang's own text
// parser (prometheus/common/expfmt): what Prometheus would read.
func parseMetrics(t *testing.T, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return fams
}

// checkConventions checks client_golang's naming conventions on every
// settle_ family: a counter ends in _total and nothing else does; a
// duration is _duration_seconds; the name does not repeat the prefix.
func checkConventions(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	for name, f := range fams {
		if !strings.HasPrefix(name, "settle_") {
			continue
		}
		counter := f.GetType() == dto.MetricType_COUNTER
		if counter != strings.HasSuffix(name, "_total") {
			t.Errorf("%s is a %s: only counters end in _total", name, f.GetType())
		}
		if strings.HasPrefix(name, "settle_settle_") {
			t.Errorf("%s repeats the prefix", name)
		}
		if f.GetType() == dto.MetricType_HISTOGRAM && !strings.HasSuffix(name, "_duration_seconds") {
			t.Errorf("%s: a histogram of durations is named _duration_seconds", name)
		}
		if strings.Contains(name, "latency") {
			t.Errorf("%s: durations are _duration_seconds", name)
		}
		if f.GetHelp() == "" {
			t.Errorf("%s has no help", name)
		}
	}
}

// metricSet asserts on parsed metric families.
type metricSet struct {
	t    *testing.T
	fams map[string]*dto.MetricFamily
}

// want checks a family's type and label names.
func (m metricSet) want(name string, typ dto.MetricType, labels []string) {
	m.t.Helper()
	f, ok := m.fams[name]
	if !ok {
		m.t.Errorf("%s is not exposed", name)
		return
	}
	if f.GetType() != typ {
		m.t.Errorf("%s is a %s, want %s", name, f.GetType(), typ)
	}
	for _, s := range f.GetMetric() {
		var got []string
		for _, l := range s.GetLabel() {
			got = append(got, l.GetName())
		}
		slices.Sort(got)
		if !slices.Equal(got, labels) {
			m.t.Errorf("%s has labels %v, want %v", name, got, labels)
			return
		}
	}
}

// find returns the sample of name with exactly labels.
func (m metricSet) find(name string, labels map[string]string) *dto.Metric {
	for _, s := range m.fams[name].GetMetric() {
		if len(s.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, l := range s.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				match = false
			}
		}
		if match {
			return s
		}
	}
	return nil
}

// sample is a sample's value: a gauge's or counter's, a histogram's count.
func sample(s *dto.Metric) float64 {
	switch {
	case s.GetGauge() != nil:
		return s.GetGauge().GetValue()
	case s.GetCounter() != nil:
		return s.GetCounter().GetValue()
	case s.GetHistogram() != nil:
		return float64(s.GetHistogram().GetSampleCount())
	}
	return -1
}

func (m metricSet) value(name string, labels map[string]string, want float64) {
	m.t.Helper()
	s := m.find(name, labels)
	if s == nil {
		m.t.Errorf("%s%v is not exposed", name, labels)
		return
	}
	if got := sample(s); got != want {
		m.t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func (m metricSet) atLeast(name string, labels map[string]string, want float64) {
	m.t.Helper()
	s := m.find(name, labels)
	if s == nil || sample(s) < want {
		m.t.Errorf("%s%v is not exposed or below %v", name, labels, want)
	}
}

// The OpenAPI document is valid JSON, OpenAPI 3.1, and documents exactly
// the routes the server serves.
func TestOpenAPIListsEveryServedRoute(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.do("GET", "/openapi.json", "", "")
	if r.code != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("openapi: %d %q", r.code, r.header.Get("Content-Type"))
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
		Comps   struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	served := e.srv.Routes()
	for _, rt := range served {
		method, path, _ := strings.Cut(rt, " ")
		ops, ok := doc.Paths[path]
		if !ok {
			t.Errorf("served path %s is not in openapi.json", path)
			continue
		}
		if _, ok := ops[strings.ToLower(method)]; !ok {
			t.Errorf("served %s is not in openapi.json", rt)
		}
	}
	for path, ops := range doc.Paths {
		for m := range ops {
			if m == "parameters" {
				continue
			}
			if !slices.Contains(served, strings.ToUpper(m)+" "+path) {
				t.Errorf("openapi.json documents %s %s, which is not served", m, path)
			}
		}
	}
	// Every $ref points at a defined component.
	refs := regexp.MustCompile(`"\$ref":\s*"#/components/([a-zA-Z]+)/([A-Za-z]+)"`).FindAllStringSubmatch(string(r.body), -1)
	var all map[string]map[string]any
	var full struct {
		Components map[string]map[string]any `json:"components"`
	}
	if err := json.Unmarshal(r.body, &full); err != nil {
		t.Fatal(err)
	}
	all = full.Components
	for _, ref := range refs {
		if _, ok := all[ref[1]][ref[2]]; !ok {
			t.Errorf("dangling $ref %s/%s", ref[1], ref[2])
		}
	}
	if string(OpenAPI()) != string(r.body) {
		t.Fatal("OpenAPI() differs from what is served")
	}
}

func TestHealthAndReadiness(t *testing.T) {
	e := newEnv(t, envOptions{})
	if r := e.do("GET", "/healthz", "", ""); r.code != http.StatusOK || r.str(t, "status") != "ok" {
		t.Fatalf("healthz: %d %s", r.code, r.body)
	}
	r := e.do("GET", "/readyz", "", "")
	if r.code != http.StatusOK || r.str(t, "status") != "ready" {
		t.Fatalf("readyz: %d %s", r.code, r.body)
	}
	e.Node.Stop()
	r = e.do("GET", "/readyz", "", "")
	p := r.problem(t, http.StatusServiceUnavailable, "")
	checks, _ := p["checks"].(map[string]any)
	if checks["nats"] != "failed" || checks["stream"] != "failed" || checks["projector"] != "ok" {
		t.Fatalf("checks %v", checks)
	}
	if r := e.do("GET", "/healthz", "", ""); r.code != http.StatusOK {
		t.Fatalf("healthz while NATS is down: %d", r.code)
	}
}

// An intent is counted once in the settle histogram: from its first
// unknown outcome to its first settlement after it. A retryable rejection
// settles it (rejected); the resend that follows and settles it again is
// not a second settlement of that unknown.
func TestSettleLatencyCountsTheFirstSettlementOnly(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	pol := adapter.DefaultPolicy()
	pol.RetryBudget = 2
	rec := testharness.RecordedEvent("social_post", "twice", pol, t0)
	id, key := rec.IntentID, rec.Data.(*events.IntentRecordedData).IdempotencyKey
	h := []events.Event{rec}
	add := func(attempt int, d events.Data) {
		at := t0.Add(time.Duration(len(h)) * time.Minute)
		att := ""
		if attempt > 0 {
			att = events.AttemptID(id, attempt)
		}
		h = append(h, events.New(id, uint64(len(h))+1, at, "w1", att, d))
		if _, err := fsm.Fold(h); err != nil {
			t.Fatalf("event %d (%T): %v", len(h), d, err)
		}
	}
	start := func(n int) {
		owner := ""
		if n > 1 {
			owner = "w1"
		}
		add(n, &events.WriteStartedData{Attempt: n, IdempotencyKey: key, Deadline: t0.Add(time.Hour), ClaimOwner: owner})
	}
	start(1)
	add(1, &events.OutcomeUnknownData{Code: "timeout_after_send"}) // v3, at +2m
	add(0, &events.ReconcileStartedData{Worker: "w1", LeaseUntil: t0.Add(time.Hour), Strategy: "search", Check: 1})
	add(0, &events.SearchWindowElapsedData{WindowTo: t0.Add(3 * time.Minute)})
	add(0, &events.RetryClaimedData{Owner: "w1", LeaseUntil: t0.Add(time.Hour), Attempt: 2, BudgetLeft: 1})
	start(2)
	add(2, &events.WriteRejectedData{Code: "http_429", StatusCode: 429, Retryable: true}) // v8, at +7m: settled
	if _, err := fsm.Fold(h); err != nil {
		t.Fatal(err)
	}
	d, result, ok := SettleLatency(h)
	if !ok || result != fsm.Rejected || d != 5*time.Minute {
		t.Fatalf("first settlement: %s %s %v, want 5m0s rejected true", d, result, ok)
	}
	add(0, &events.RetryClaimedData{Owner: "w1", LeaseUntil: t0.Add(time.Hour), Attempt: 3, BudgetLeft: 0})
	start(3)
	add(3, &events.WriteRejectedData{Code: "http_400", StatusCode: 400}) // settled again
	if d, result, ok := SettleLatency(h); ok {
		t.Fatalf("the resend's settlement counted again: %s %s", d, result)
	}
}
