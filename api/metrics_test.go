package api

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/testharness"
)

func TestMetricsExposeTheNamedSeries(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.social.Next(testharness.CommitThenDrop())
	if r := e.do("POST", "/v1/intents", secretSubmitter, submitBodyJSON("social_post", "acct_1", "m-1", `{"body":"m"}`)); r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/v1/intents", secretSubmitter, submitBodyJSON("social_post", "acct_1", "m-2", `{"body":"m2"}`)); r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	e.do("GET", "/v1/intents/nope", secretReader, "")
	e.srv.Metrics().ObserveReconcile(3 * time.Second)
	e.srv.Metrics().ObserveReconcile(90 * time.Second)
	e.srv.Metrics().CountCall("social_post", `odd"label\`)
	e.catchUp()
	e.clock.Advance(42 * time.Second)

	r := e.do("GET", "/metrics", secretReader, "")
	if r.code != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("metrics: %d %q", r.code, r.header.Get("Content-Type"))
	}
	text := string(r.body)
	for _, want := range []string{
		"# TYPE settle_intents gauge",
		`settle_intents{state="unknown"} 1`,
		`settle_intents{state="verifying"} 1`,
		`settle_intents{state="confirmed"} 0`,
		"# TYPE settle_unknown_oldest_age_seconds gauge",
		"settle_unknown_oldest_age_seconds 42",
		"# TYPE settle_reconcile_latency_seconds histogram",
		`settle_reconcile_latency_seconds_bucket{le="5"} 1`,
		`settle_reconcile_latency_seconds_bucket{le="120"} 2`,
		`settle_reconcile_latency_seconds_bucket{le="+Inf"} 2`,
		"settle_reconcile_latency_seconds_sum 93",
		"settle_reconcile_latency_seconds_count 2",
		"# TYPE settle_external_calls_total counter",
		`settle_external_calls_total{route="social_post",outcome="unknown"} 1`,
		`settle_external_calls_total{route="social_post",outcome="succeeded"} 1`,
		`settle_external_calls_total{route="social_post",outcome="odd\"label\\"} 1`,
		"# TYPE settle_http_requests_total counter",
		`settle_http_requests_total{code="201"} 2`,
		`settle_http_requests_total{code="400"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	// Every sample line is well formed: name{labels} value.
	sample := regexp.MustCompile(`^settle_[a-z_]+(\{([a-z]+="([^"\\\n]|\\.)*",?)*\})? [-+0-9.eInf]+$`)
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
	e.node.Stop()
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
