package fakeapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

type bkResp struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// bkSend sends one request with a client that cannot replay it.
func bkSend(t *testing.T, base, token string, client *http.Client, method, path, body string, hdr map[string]string) bkResp {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.GetBody = nil
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	}
	resp, err := client.Do(req)
	if err != nil {
		return bkResp{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return bkResp{status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

func bkPut(t *testing.T, api *fakeapi.BookingAPI, client *http.Client, id, key, body string) bkResp {
	t.Helper()
	hdr := map[string]string{}
	if key != "" {
		hdr["Idempotency-Key"] = key
	}
	return bkSend(t, api.URL(), api.Token(), client, http.MethodPut, "/v1/bookings/"+id, body, hdr)
}

func bkStatus(t *testing.T, api *fakeapi.BookingAPI, requestID string) (int, map[string]any) {
	t.Helper()
	r := bkSend(t, api.URL(), api.Token(), nil, http.MethodGet, "/v1/requests/"+requestID, "", nil)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status body %q: %v", r.body, err)
	}
	return r.status, m
}

func bkJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body %q: %v", b, err)
	}
	return m
}

func bkTimeoutClient(d time.Duration) *http.Client {
	return &http.Client{Timeout: d, Transport: &http.Transport{DisableKeepAlives: true}}
}

// The change: B-001 from 14:00-15:00 to 15:00-16:00, approved
// against version 7.
const (
	bkChange = `{"request_id":"R-001","expected_version":7,"change":{"start":"15:00","end":"16:00"}}`
	bkKey    = "K-001"
)

var bkT0 = time.Date(2026, 11, 12, 5, 0, 0, 0, time.UTC)

func bkSeeded(t *testing.T, opts ...fakeapi.BookingOption) (*fakeapi.BookingAPI, *testharness.ManualClock) {
	t.Helper()
	clock := testharness.NewManualClock(bkT0)
	api := fakeapi.NewBookingAPI(t, append([]fakeapi.BookingOption{fakeapi.WithBookingClock(clock.Now)}, opts...)...)
	api.Seed("B-001", 7, map[string]any{"room": "A", "start": "14:00", "end": "15:00"})
	return api, clock
}

func TestBookingChangeSuccess(t *testing.T) {
	api, _ := bkSeeded(t)
	r := bkPut(t, api, nil, "B-001", bkKey, bkChange)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("PUT: %d %v %s", r.status, r.err, r.body)
	}
	m := bkJSON(t, r.body)
	if m["booking_id"] != "B-001" || m["version"] != 8.0 || m["request_id"] != "R-001" || m["status"] != "completed" {
		t.Fatalf("response %v", m)
	}
	if r.header.Get("Idempotent-Replayed") != "" {
		t.Fatal("a first request is not a replay")
	}
	if api.Effects() != 1 || api.EffectsForRequest("R-001") != 1 || api.Writes() != 1 {
		t.Fatalf("effects %d for request %d writes %d", api.Effects(), api.EffectsForRequest("R-001"), api.Writes())
	}
	b, ok := api.Booking("B-001")
	if !ok || b.Version != 8 || b.Data["start"] != "15:00" || b.Data["end"] != "16:00" || b.Data["room"] != "A" || b.UpdatedByRequest != "R-001" {
		t.Fatalf("booking %+v", b)
	}

	g := bkSend(t, api.URL(), api.Token(), nil, http.MethodGet, "/v1/bookings/B-001", "", nil)
	gm := bkJSON(t, g.body)
	if g.status != 200 || gm["version"] != 8.0 || gm["updated_by_request"] != "R-001" || gm["data"].(map[string]any)["start"] != "15:00" {
		t.Fatalf("GET booking: %d %s", g.status, g.body)
	}
	if g := bkSend(t, api.URL(), api.Token(), nil, http.MethodGet, "/v1/bookings/B-404", "", nil); g.status != 404 {
		t.Fatalf("GET unknown booking: %d", g.status)
	}

	code, st := bkStatus(t, api, "R-001")
	if code != 200 || st["state"] != "completed" || st["booking_id"] != "B-001" || st["applied_version"] != 8.0 ||
		st["current_version"] != 8.0 || st["expected_version"] != 7.0 || st["received_at"] != "2026-11-12T05:00:00Z" {
		t.Fatalf("status %d %v", code, st)
	}
	if ch := st["change"].(map[string]any); ch["start"] != "15:00" || ch["end"] != "16:00" || len(ch) != 2 {
		t.Fatalf("status change %v", ch)
	}
	if pe, ok := st["partial_effects"].([]any); !ok || len(pe) != 0 {
		t.Fatalf("partial_effects %v", st["partial_effects"])
	}
	if code, _ := bkStatus(t, api, "R-404"); code != 404 {
		t.Fatalf("unknown request: %d", code)
	}
	rq, ok := api.Request("R-001")
	if !ok || rq.IdempotencyKey != bkKey || rq.State != "completed" || rq.AppliedVersion != 8 || *rq.ExpectedVersion != 7 {
		t.Fatalf("request %+v", rq)
	}
}

func TestBookingRefusals(t *testing.T) {
	api, _ := bkSeeded(t, fakeapi.WithBookingToken("tok_secret_booking"))
	if r := bkSend(t, api.URL(), "", nil, http.MethodPut, "/v1/bookings/B-001", bkChange, map[string]string{"Idempotency-Key": bkKey}); r.status != 401 {
		t.Fatalf("no token: %d", r.status)
	}
	if r := bkSend(t, api.URL(), "wrong", nil, http.MethodGet, "/v1/requests/R-001", "", nil); r.status != 401 {
		t.Fatalf("wrong token: %d", r.status)
	}
	if r := bkPut(t, api, nil, "B-001", "", bkChange); r.status != 400 || !strings.Contains(string(r.body), "idempotency_key_required") {
		t.Fatalf("no key: %d %s", r.status, r.body)
	}
	for _, body := range []string{
		`{`,
		`{"expected_version":7,"change":{}}`,
		`{"request_id":"R-1","expected_version":7}`,
		`{"request_id":"R-1","expected_version":7,"change":[1]}`,
		`{"request_id":"R-1","expected_version":-1,"change":{}}`,
		`{"request_id":"R-1","expected_version":7.5,"change":{}}`,
		`{"request_id":"R-1","expected_version":7,"change":{},"extra":1}`,
		`{"request_id":"R-1","expected_version":7,"change":{}} {}`,
	} {
		if r := bkPut(t, api, nil, "B-001", "K-bad", body); r.status != 400 {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
	}
	if r := bkPut(t, api, nil, "B-404", "K-404", bkChange); r.status != 404 {
		t.Fatalf("unknown booking: %d", r.status)
	}
	if api.Effects() != 0 || api.Writes() != 11 {
		t.Fatalf("effects %d writes %d", api.Effects(), api.Writes())
	}
	// Nothing above was recorded under a key: the same key now works.
	if r := bkPut(t, api, nil, "B-001", "K-bad", bkChange); r.status != 200 {
		t.Fatalf("after refusals: %d %s", r.status, r.body)
	}
	if strings.Contains(string(bkPut(t, api, nil, "B-001", "", bkChange).body), "tok_secret_booking") {
		t.Fatal("the token leaked into a response")
	}
}

// The change was applied but the response was lost; the
// status query proves it, nothing is applied twice.
func TestBookingResponseLostStatusCompleted(t *testing.T) {
	api, _ := bkSeeded(t)
	api.Next(fakeapi.CommitThenDrop())
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.err == nil {
		t.Fatalf("expected a lost response, got %d", r.status)
	}
	if api.Effects() != 1 {
		t.Fatalf("effects %d", api.Effects())
	}
	code, st := bkStatus(t, api, "R-001")
	if code != 200 || st["state"] != "completed" || st["applied_version"] != 8.0 || st["current_version"] != 8.0 {
		t.Fatalf("status %d %v", code, st)
	}
	// A retry with the same key is answered from the stored result.
	r := bkPut(t, api, nil, "B-001", bkKey, bkChange)
	if r.status != 200 || bkJSON(t, r.body)["version"] != 8.0 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	if api.Effects() != 1 || api.EffectsForRequest("R-001") != 1 {
		t.Fatalf("effects %d", api.Effects())
	}
	// Someone else changes it later: the status keeps the past success
	// apart from the current version.
	if v := api.ChangeBy("B-001", "R-other", map[string]any{"room": "B"}); v != 9 {
		t.Fatalf("ChangeBy version %d", v)
	}
	_, st = bkStatus(t, api, "R-001")
	if st["applied_version"] != 8.0 || st["current_version"] != 9.0 {
		t.Fatalf("status after ChangeBy %v", st)
	}
	if _, st := bkStatus(t, api, "R-other"); st["state"] != "completed" || st["applied_version"] != 9.0 {
		t.Fatalf("status of the other change %v", st)
	}
	if api.Effects() != 1 {
		t.Fatalf("ChangeBy counted as an effect: %d", api.Effects())
	}
}

// The request never arrived. The status query says 404,
// before and after the reflection delay.
func TestBookingResetBeforeCommitNotFound(t *testing.T) {
	api, clock := bkSeeded(t, fakeapi.WithBookingReflectionDelay(30*time.Second))
	api.Next(fakeapi.ResetBeforeCommit())
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.err == nil {
		t.Fatalf("expected a reset, got %d", r.status)
	}
	for _, d := range []time.Duration{0, 30 * time.Second, time.Hour} {
		clock.Advance(d)
		if code, _ := bkStatus(t, api, "R-001"); code != 404 {
			t.Fatalf("+%v: status %d", d, code)
		}
	}
	if b, _ := api.Booking("B-001"); b.Version != 7 || api.Effects() != 0 || api.Writes() != 1 {
		t.Fatalf("version %d effects %d writes %d", b.Version, api.Effects(), api.Writes())
	}
	// The key was never recorded: a retry is a first receipt.
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 200 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	if api.Effects() != 1 {
		t.Fatalf("effects %d", api.Effects())
	}
}

func TestBookingReflectionDelay(t *testing.T) {
	api, clock := bkSeeded(t, fakeapi.WithBookingReflectionDelay(30*time.Second))
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 200 {
		t.Fatalf("PUT: %d", r.status)
	}
	if code, _ := bkStatus(t, api, "R-001"); code != 404 {
		t.Fatalf("at once: %d", code)
	}
	clock.Advance(29 * time.Second)
	if code, _ := bkStatus(t, api, "R-001"); code != 404 {
		t.Fatalf("+29s: %d", code)
	}
	clock.Advance(time.Second)
	if code, st := bkStatus(t, api, "R-001"); code != 200 || st["state"] != "completed" || st["applied_version"] != 8.0 {
		t.Fatalf("+30s: %d %v", code, st)
	}
	// The booking itself is current at once.
	if b, _ := api.Booking("B-001"); b.Version != 8 {
		t.Fatalf("version %d", b.Version)
	}
}

func TestBookingStaleVersion(t *testing.T) {
	api, _ := bkSeeded(t)
	api.ChangeBy("B-001", "R-other", map[string]any{"room": "C"})  // now version 8
	api.ChangeBy("B-001", "R-other2", map[string]any{"room": "D"}) // now version 9
	before, _ := api.Booking("B-001")
	r := bkPut(t, api, nil, "B-001", bkKey, bkChange)
	if r.status != http.StatusConflict {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	if m := bkJSON(t, r.body); m["error"] != "version_conflict" || m["current_version"] != 9.0 {
		t.Fatalf("409 body %v", m)
	}
	after, _ := api.Booking("B-001")
	if after.Version != 9 || after.Data["start"] != "14:00" || after.Data["room"] != "D" || after.UpdatedByRequest != before.UpdatedByRequest {
		t.Fatalf("booking overwritten: %+v", after)
	}
	if api.Effects() != 0 {
		t.Fatalf("effects %d", api.Effects())
	}
	if code, st := bkStatus(t, api, "R-001"); code != 200 || st["state"] != "failed" || st["code"] != "version_conflict" {
		t.Fatalf("status %d %v", code, st)
	}
	// The outcome is stored under the key: the same request gets it again.
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 409 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d", r.status)
	}
}

func TestBookingSameKeySameBody(t *testing.T) {
	api, _ := bkSeeded(t)
	first := bkPut(t, api, nil, "B-001", bkKey, bkChange)
	// Same content, other key order and spacing: the same request.
	same := `{ "change": {"end":"16:00", "start":"15:00"}, "expected_version": 7, "request_id": "R-001" }`
	second := bkPut(t, api, nil, "B-001", bkKey, same)
	if first.status != 200 || second.status != 200 || string(first.body) != string(second.body) {
		t.Fatalf("first %d %s second %d %s", first.status, first.body, second.status, second.body)
	}
	if second.header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("the replay is not marked")
	}
	if api.Effects() != 1 || api.Writes() != 2 {
		t.Fatalf("effects %d writes %d", api.Effects(), api.Writes())
	}
	if b, _ := api.Booking("B-001"); b.Version != 8 {
		t.Fatalf("version %d", b.Version)
	}
}

func TestBookingSameKeyDifferentBody(t *testing.T) {
	api, _ := bkSeeded(t)
	api.Seed("B-002", 7, map[string]any{"room": "A"})
	other := `{"request_id":"R-001","expected_version":7,"change":{"start":"16:00","end":"17:00"}}`

	// The first use is refused (stale version): nothing applied, yet the key
	// is bound to that body.
	api.ChangeBy("B-001", "R-other", map[string]any{"note": "x"})
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 409 {
		t.Fatalf("first: %d", r.status)
	}
	if r := bkPut(t, api, nil, "B-001", bkKey, other); r.status != 422 || !strings.Contains(string(r.body), "idempotency_key_reused") {
		t.Fatalf("different body: %d %s", r.status, r.body)
	}
	if api.Effects() != 0 {
		t.Fatalf("effects %d", api.Effects())
	}

	// After a success the key refuses another body, and the same body on
	// another booking.
	if r := bkPut(t, api, nil, "B-002", "K-002", bkChange); r.status != 200 {
		t.Fatalf("B-002: %d", r.status)
	}
	if r := bkPut(t, api, nil, "B-002", "K-002", other); r.status != 422 {
		t.Fatalf("different body after success: %d", r.status)
	}
	if r := bkPut(t, api, nil, "B-001", "K-002", bkChange); r.status != 422 {
		t.Fatalf("other booking: %d", r.status)
	}
	if api.Effects() != 1 {
		t.Fatalf("effects %d", api.Effects())
	}
	if b, _ := api.Booking("B-002"); b.Version != 8 || b.Data["start"] != "15:00" {
		t.Fatalf("B-002 %+v", b)
	}
}

func TestBookingKeyRetention(t *testing.T) {
	api, clock := bkSeeded(t, fakeapi.WithBookingKeyRetention(time.Hour))
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 200 {
		t.Fatalf("first: %d", r.status)
	}
	clock.Advance(59 * time.Minute)
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 200 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("inside retention: %d", r.status)
	}
	// Retention counts from the first receipt, not the last.
	clock.Advance(time.Minute)
	r := bkPut(t, api, nil, "B-001", bkKey, bkChange)
	if r.status != 409 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("past retention the key is forgotten, the version check answers: %d %s", r.status, r.body)
	}
	if api.Effects() != 1 {
		t.Fatalf("effects %d", api.Effects())
	}

	// Without a version precondition a forgotten key applies again: that is
	// why settle must not retry past retention.
	blind := `{"request_id":"R-002","change":{"note":"bring a projector"}}`
	if r := bkPut(t, api, nil, "B-001", "K-blind", blind); r.status != 200 {
		t.Fatalf("blind: %d", r.status)
	}
	clock.Advance(30 * time.Minute)
	if r := bkPut(t, api, nil, "B-001", "K-blind", blind); r.status != 200 || api.EffectsForRequest("R-002") != 1 {
		t.Fatalf("blind inside retention: %d effects %d", r.status, api.EffectsForRequest("R-002"))
	}
	clock.Advance(30 * time.Minute)
	if r := bkPut(t, api, nil, "B-001", "K-blind", blind); r.status != 200 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("blind past retention: %d", r.status)
	}
	if api.EffectsForRequest("R-002") != 2 || api.Effects() != 3 {
		t.Fatalf("effects for R-002 %d total %d", api.EffectsForRequest("R-002"), api.Effects())
	}
}

func TestBookingProcessing(t *testing.T) {
	api, clock := bkSeeded(t, fakeapi.WithBookingProcessingFor(10*time.Second))
	r := bkPut(t, api, nil, "B-001", bkKey, bkChange)
	if r.status != http.StatusAccepted || bkJSON(t, r.body)["status"] != "processing" {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	if api.Effects() != 0 {
		t.Fatalf("effects while processing %d", api.Effects())
	}
	if code, st := bkStatus(t, api, "R-001"); code != 200 || st["state"] != "processing" || st["applied_version"] != nil {
		t.Fatalf("status %d %v", code, st)
	}
	// The same request joins the in-flight change.
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 202 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay while processing: %d", r.status)
	}
	clock.Advance(9 * time.Second)
	if api.Effects() != 0 {
		t.Fatal("completed early")
	}
	clock.Advance(time.Second)
	if api.Effects() != 1 {
		t.Fatalf("effects after ProcessingFor %d", api.Effects())
	}
	if code, st := bkStatus(t, api, "R-001"); code != 200 || st["state"] != "completed" || st["applied_version"] != 8.0 {
		t.Fatalf("status %d %v", code, st)
	}
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 200 || bkJSON(t, r.body)["version"] != 8.0 {
		t.Fatalf("replay after completion: %d %s", r.status, r.body)
	}
	if api.Effects() != 1 {
		t.Fatalf("effects %d", api.Effects())
	}
}

func TestBookingProcessingWithReflectionDelay(t *testing.T) {
	api, clock := bkSeeded(t, fakeapi.WithBookingProcessingFor(10*time.Second), fakeapi.WithBookingReflectionDelay(5*time.Second))
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 202 {
		t.Fatalf("PUT: %d", r.status)
	}
	steps := []struct {
		at    time.Duration
		code  int
		state string
	}{{4 * time.Second, 404, ""}, {5 * time.Second, 200, "processing"}, {14 * time.Second, 200, "processing"}, {15 * time.Second, 200, "completed"}}
	for _, s := range steps {
		clock.Set(bkT0.Add(s.at))
		code, st := bkStatus(t, api, "R-001")
		if code != s.code || (s.state != "" && st["state"] != s.state) {
			t.Fatalf("+%v: %d %v", s.at, code, st)
		}
	}
}

func TestBookingProcessingVersionMovedMeanwhile(t *testing.T) {
	api, clock := bkSeeded(t, fakeapi.WithBookingProcessingFor(10*time.Second))
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 202 {
		t.Fatalf("PUT: %d", r.status)
	}
	api.ChangeBy("B-001", "R-other", map[string]any{"room": "Z"})
	clock.Advance(10 * time.Second)
	if code, st := bkStatus(t, api, "R-001"); code != 200 || st["state"] != "failed" || st["code"] != "version_conflict" {
		t.Fatalf("status %d %v", code, st)
	}
	if b, _ := api.Booking("B-001"); api.Effects() != 0 || b.Version != 8 || b.Data["room"] != "Z" {
		t.Fatalf("effects %d booking %+v", api.Effects(), b)
	}
}

func TestBookingNeverComplete(t *testing.T) {
	api, clock := bkSeeded(t)
	api.Next(fakeapi.NeverComplete())
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 202 {
		t.Fatalf("PUT: %d", r.status)
	}
	clock.Advance(1000 * time.Hour)
	if code, st := bkStatus(t, api, "R-001"); code != 200 || st["state"] != "processing" {
		t.Fatalf("status %d %v", code, st)
	}
	if b, _ := api.Booking("B-001"); api.Effects() != 0 || b.Version != 7 {
		t.Fatalf("effects %d version %d", api.Effects(), b.Version)
	}
}

func TestBookingFailDefinite(t *testing.T) {
	t.Run("no partial effects", func(t *testing.T) {
		api, _ := bkSeeded(t)
		api.Next(fakeapi.FailDefinite(422, nil))
		r := bkPut(t, api, nil, "B-001", bkKey, bkChange)
		if r.status != 422 || bkJSON(t, r.body)["error"] != "change_failed" {
			t.Fatalf("PUT: %d %s", r.status, r.body)
		}
		code, st := bkStatus(t, api, "R-001")
		if code != 200 || st["state"] != "failed" || st["code"] != "change_failed" || len(st["partial_effects"].([]any)) != 0 {
			t.Fatalf("status %d %v", code, st)
		}
		if b, _ := api.Booking("B-001"); api.Effects() != 0 || b.Version != 7 {
			t.Fatalf("effects %d version %d", api.Effects(), b.Version)
		}
		// The failure is stored under the key: retrying it makes no progress.
		if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 422 || r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d", r.status)
		}
		if api.Effects() != 0 {
			t.Fatalf("effects %d", api.Effects())
		}
	})
	t.Run("partial effects", func(t *testing.T) {
		api, _ := bkSeeded(t)
		api.Next(fakeapi.FailDefinite(500, []string{"room_released"}))
		r := bkPut(t, api, nil, "B-001", bkKey, bkChange)
		if r.status != 500 || !strings.Contains(string(r.body), "room_released") {
			t.Fatalf("PUT: %d %s", r.status, r.body)
		}
		_, st := bkStatus(t, api, "R-001")
		if pe := st["partial_effects"].([]any); st["state"] != "failed" || len(pe) != 1 || pe[0] != "room_released" {
			t.Fatalf("status %v", st)
		}
		rq, _ := api.Request("R-001")
		if api.Effects() != 0 || len(rq.PartialEffects) != 1 {
			t.Fatalf("effects %d request %+v", api.Effects(), rq)
		}
	})
	t.Run("after processing, response dropped", func(t *testing.T) {
		api, clock := bkSeeded(t, fakeapi.WithBookingProcessingFor(time.Minute))
		api.Next(fakeapi.FailDefinite(500, []string{"email_sent"}).Dropped())
		if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.err == nil {
			t.Fatalf("expected a dropped response, got %d", r.status)
		}
		if _, st := bkStatus(t, api, "R-001"); st["state"] != "processing" {
			t.Fatalf("status %v", st)
		}
		clock.Advance(time.Minute)
		if _, st := bkStatus(t, api, "R-001"); st["state"] != "failed" || st["partial_effects"].([]any)[0] != "email_sent" {
			t.Fatalf("status %v", st)
		}
		if api.Effects() != 0 {
			t.Fatalf("effects %d", api.Effects())
		}
	})
}

// T-001 is held in the network, T-002 (same R-001, same K-001,
// same change) is applied, then T-001 arrives late: still one effect.
func TestBookingHoldForLateArrival(t *testing.T) {
	api, _ := bkSeeded(t)
	api.Next(fakeapi.HoldForLateArrival())
	start := time.Now()
	if r := bkPut(t, api, bkTimeoutClient(200*time.Millisecond), "B-001", bkKey, bkChange); r.err == nil {
		t.Fatalf("T-001 should time out, got %d", r.status)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("the timeout took too long")
	}
	if api.Held() != 1 || api.Effects() != 0 {
		t.Fatalf("held %d effects %d", api.Held(), api.Effects())
	}
	if code, _ := bkStatus(t, api, "R-001"); code != 404 {
		t.Fatalf("a held request is unknown to the service: %d", code)
	}
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 200 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("T-002: %d", r.status)
	}
	if n := api.ReleaseHeld(); n != 1 {
		t.Fatalf("released %d", n)
	}
	if api.Held() != 0 || api.Effects() != 1 || api.EffectsForRequest("R-001") != 1 || api.Writes() != 2 {
		t.Fatalf("held %d effects %d writes %d", api.Held(), api.Effects(), api.Writes())
	}
	if b, _ := api.Booking("B-001"); b.Version != 8 {
		t.Fatalf("version %d", b.Version)
	}
}

func TestBookingHoldReleasedWhileWaiting(t *testing.T) {
	api, _ := bkSeeded(t)
	api.Next(fakeapi.HoldForLateArrival())
	done := make(chan bkResp, 1)
	go func() { done <- bkPut(t, api, nil, "B-001", bkKey, bkChange) }()
	deadline := time.Now().Add(5 * time.Second)
	for api.Held() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the PUT was never held")
		}
		time.Sleep(5 * time.Millisecond)
	}
	api.ReleaseHeld()
	r := <-done
	if r.status != 200 || bkJSON(t, r.body)["version"] != 8.0 || api.Effects() != 1 {
		t.Fatalf("released: %d %v effects %d", r.status, r.err, api.Effects())
	}
}

// A late arrival past the key's retention is no longer deduplicated by the
// key; here the optimistic version still refuses it.
func TestBookingHoldPastRetention(t *testing.T) {
	api, clock := bkSeeded(t, fakeapi.WithBookingKeyRetention(time.Hour))
	api.Next(fakeapi.HoldForLateArrival().Dropped())
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.err == nil {
		t.Fatalf("dropped hold answered %d", r.status)
	}
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 200 {
		t.Fatalf("retry: %d", r.status)
	}
	clock.Advance(2 * time.Hour)
	api.ReleaseHeld()
	if b, _ := api.Booking("B-001"); api.Effects() != 1 || b.Version != 8 {
		t.Fatalf("effects %d version %d", api.Effects(), b.Version)
	}
	if rq, _ := api.Request("R-001"); rq.State != "completed" || rq.AppliedVersion != 8 {
		t.Fatalf("request %+v", rq)
	}
}

func TestBookingTransportFaults(t *testing.T) {
	api, _ := bkSeeded(t)
	api.Next(fakeapi.Status(503))
	if r := bkPut(t, api, nil, "B-001", bkKey, bkChange); r.status != 503 {
		t.Fatalf("Status(503): %d", r.status)
	}
	if api.Effects() != 0 {
		t.Fatalf("effects %d", api.Effects())
	}
	api.Next(fakeapi.Delay(time.Minute))
	if r := bkPut(t, api, bkTimeoutClient(200*time.Millisecond), "B-001", bkKey, bkChange); r.err == nil {
		t.Fatalf("Delay: %d", r.status)
	}
	if api.Effects() != 1 {
		t.Fatalf("Delay commits first: effects %d", api.Effects())
	}
	if api.PendingFaults() != 0 {
		t.Fatalf("pending %d", api.PendingFaults())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Next accepted a fault the booking API does not implement")
		}
	}()
	api.Next(fakeapi.Duplicate())
}

func TestBookingCloseWithHeldRequest(t *testing.T) {
	api := fakeapi.NewBookingAPIServer(fakeapi.BookingConfig{})
	api.Seed("B-001", 7, nil)
	api.Next(fakeapi.HoldForLateArrival())
	done := make(chan bkResp, 1)
	go func() { done <- bkPut(t, api, nil, "B-001", bkKey, bkChange) }()
	deadline := time.Now().Add(5 * time.Second)
	for api.Held() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the PUT was never held")
		}
		time.Sleep(5 * time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { api.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung on a held request")
	}
	<-done
	api.Close()
}

func TestBookingConcurrent(t *testing.T) {
	api, _ := bkSeeded(t)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"request_id":"R-%d","change":{"n%d":true}}`, i%5, i%5)
			bkPut(t, api, nil, "B-001", fmt.Sprintf("K-%d", i%5), body)
			bkStatus(t, api, fmt.Sprintf("R-%d", i%5))
			_, _ = api.Booking("B-001")
		}()
	}
	wg.Wait()
	if b, _ := api.Booking("B-001"); api.Effects() != 5 || api.Writes() != 20 || b.Version != 12 {
		t.Fatalf("effects %d writes %d version %d", api.Effects(), api.Writes(), b.Version)
	}
}
