package api

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
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
	e.do("GET", "/v1/intents/nope", secretReader, "")
	e.srv.Metrics().CountCall("social_post", `odd"label\`)

	// Settle latency counts only the intent whose outcome was unknown:
	// from its OutcomeUnknown to its settlement, on the log's clock.
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
				t.Fatalf("settle latency %s, the unknown lasted at least 42s on the log", d)
			}
		}
	}
	if len(settled) != 1 || settled[0] != dropped.str(t, "intent_id") {
		t.Fatalf("settle latency observed for %v, want only the dropped response's intent", settled)
	}
	e.CatchUp()

	r := e.do("GET", "/metrics", secretReader, "")
	if r.code != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("metrics: %d %q", r.code, r.header.Get("Content-Type"))
	}
	text := string(r.body)
	for _, want := range []string{
		"# TYPE settle_intents gauge",
		`settle_intents{state="confirmed"} 2`,
		`settle_intents{state="unknown"} 0`,
		"# TYPE settle_unknown_oldest_age_seconds gauge",
		"settle_unknown_oldest_age_seconds 0",
		"# TYPE settle_write_latency_seconds histogram",
		`settle_write_latency_seconds_count{outcome="unknown",route="social_post"} 1`,
		`settle_write_latency_seconds_count{outcome="succeeded",route="social_post"} 1`,
		"# TYPE settle_settle_latency_seconds histogram",
		`settle_settle_latency_seconds_bucket{result="confirmed",route="social_post",le="30"} 0`,
		`settle_settle_latency_seconds_bucket{result="confirmed",route="social_post",le="+Inf"} 1`,
		`settle_settle_latency_seconds_count{result="confirmed",route="social_post"} 1`,
		"# TYPE settle_external_calls_total counter",
		`settle_external_calls_total{outcome="unknown",route="social_post"} 1`,
		`settle_external_calls_total{outcome="succeeded",route="social_post"} 1`,
		`settle_external_calls_total{outcome="odd\"label\\",route="social_post"} 1`,
		"# TYPE settle_http_requests_total counter",
		`settle_http_requests_total{code="201"} 2`,
		`settle_http_requests_total{code="400"} 1`,
		"# TYPE settle_projector_checkpoint_sequence gauge",
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(text, "settle_reconcile_latency_seconds") {
		t.Error("the old reconcile latency (which counted every confirmed write) is still exposed")
	}
	// Every sample line is well formed: name{labels} value.
	sample := regexp.MustCompile(`^[a-z_]+(\{([a-z_]+="([^"\\\n]|\\.)*",?)*\})? [-+0-9.eInf]+$`)
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") {
			continue
		}
		if !sample.MatchString(line) {
			t.Errorf("malformed sample line %q", line)
		}
	}
	if t.Failed() {
		t.Log(text)
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
