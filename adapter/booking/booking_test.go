package booking_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/adaptertest"
	"github.com/settle-dev/settle/adapter/booking"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

// token is distinctive so that a leak into any error string is caught.
const token = "tok_B00KING_S3CRET_never_leak"

// The approved change of seed 001.
const approved = `{"booking_id":"B-001","expected_version":7,"change":{"start":"15:00","end":"16:00"}}`

var t0 = time.Date(2026, 11, 12, 5, 0, 0, 0, time.UTC)

func newAPI(t *testing.T, opts ...fakeapi.BookingOption) (*fakeapi.BookingAPI, *testharness.ManualClock) {
	t.Helper()
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewBookingAPI(t, append([]fakeapi.BookingOption{
		fakeapi.WithBookingToken(token), fakeapi.WithBookingClock(clock.Now)}, opts...)...)
	api.Seed("B-001", 7, map[string]any{"room": "A", "start": "14:00", "end": "15:00"})
	return api, clock
}

func newAdapter(t *testing.T, baseURL string, mod func(*booking.Config)) *booking.Adapter {
	t.Helper()
	return adaptertest.Build(t, booking.New, booking.Config{BaseURL: baseURL, Token: token, KeyRetention: 24 * time.Hour}, mod)
}

// writeReq is attempt n of intent R-001: same request id and key on every
// attempt, a new attempt id.
func writeReq(t *testing.T, raw string, n int) adapter.WriteRequest {
	t.Helper()
	return adaptertest.WriteRequest(t, booking.NormalizePayload, intentR001, "a"+strconv.Itoa(n), raw)
}

var intentR001 = adaptertest.Intent{IntentID: "in_R-001", RequestID: "R-001", IdempotencyKey: "K-001", Account: "acct_1"}

func TestWriteSuccess(t *testing.T) {
	api, _ := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()
	req := writeReq(t, approved, 1)
	res, err := a.Write(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExternalID != "B-001@v8" || res.LiveURL != api.URL()+"/v1/bookings/B-001" || res.StatusCode != 200 {
		t.Fatalf("result %+v", res)
	}
	if api.Effects() != 1 || api.EffectsForRequest("R-001") != 1 {
		t.Fatalf("effects %d", api.Effects())
	}
	rq, _ := api.Request("R-001")
	if rq.IdempotencyKey != "K-001" || rq.AttemptID != "in_R-001.a1" || *rq.ExpectedVersion != 7 {
		t.Fatalf("the service saw %+v", rq)
	}
	st, err := a.Status(ctx, adapter.StatusQuery{RequestID: "R-001", IdempotencyKey: "K-001"})
	if err != nil {
		t.Fatal(err)
	}
	if st.State != adapter.StatusCompleted || st.ExternalID != "B-001@v8" || st.AppliedVersion != "8" || st.Version != "8" ||
		!st.ReceivedAt.Equal(t0) || hash(t, st.Payload) != hash(t, req.Payload) || len(st.PartialEffects) != 0 {
		t.Fatalf("status %+v payload %s", st, st.Payload)
	}
	if code, err := a.Probe(ctx, res.LiveURL); err != nil || code != 200 {
		t.Fatalf("probe: %d %v", code, err)
	}
}

// The response is lost after the change was applied: Unknown, one effect;
// the status query proves it; the next attempt carries the SAME key and is
// answered from the stored result.
func TestWriteCommitThenDrop(t *testing.T) {
	api, _ := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()
	api.Next(fakeapi.CommitThenDrop())
	_, err := a.Write(ctx, writeReq(t, approved, 1))
	if ce := callError(t, err); ce.Class != adapter.Unknown {
		t.Fatalf("got %+v", ce)
	}
	if api.Effects() != 1 {
		t.Fatalf("effects %d", api.Effects())
	}
	st, err := a.Status(ctx, adapter.StatusQuery{RequestID: "R-001"})
	if err != nil || st.State != adapter.StatusCompleted || st.AppliedVersion != "8" {
		t.Fatalf("status %+v %v", st, err)
	}
	res, err := a.Write(ctx, writeReq(t, approved, 2))
	if err != nil || res.ExternalID != "B-001@v8" {
		t.Fatalf("second attempt: %+v %v", res, err)
	}
	if api.Effects() != 1 || api.Writes() != 2 {
		t.Fatalf("effects %d writes %d", api.Effects(), api.Writes())
	}
	if rq, _ := api.Request("R-001"); rq.IdempotencyKey != "K-001" || rq.AttemptID != "in_R-001.a1" {
		t.Fatalf("request %+v", rq)
	}
}

// The request never reached the service: Unknown (it was written), no
// effect, and the status query finds nothing.
func TestWriteResetBeforeCommit(t *testing.T) {
	api, clock := newAPI(t, fakeapi.WithBookingReflectionDelay(30*time.Second))
	a := newAdapter(t, api.URL(), func(c *booking.Config) { c.ReflectionDelay = 30 * time.Second })
	ctx := context.Background()
	api.Next(fakeapi.ResetBeforeCommit())
	_, err := a.Write(ctx, writeReq(t, approved, 1))
	if ce := callError(t, err); ce.Class != adapter.Unknown {
		t.Fatalf("got %+v", ce)
	}
	if api.Effects() != 0 {
		t.Fatalf("effects %d", api.Effects())
	}
	clock.Advance(time.Hour)
	if _, err := a.Status(ctx, adapter.StatusQuery{RequestID: "R-001"}); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("status: %v", err)
	}
}

func TestWriteVersionConflict(t *testing.T) {
	api, _ := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	api.ChangeBy("B-001", "R-other", map[string]any{"room": "B"})
	_, err := a.Write(context.Background(), writeReq(t, approved, 1))
	ce := callError(t, err)
	if ce.Class != adapter.Rejected || ce.Code != "version_conflict" || ce.StatusCode != 409 || ce.Retryable {
		t.Fatalf("got %+v", ce)
	}
	if !strings.Contains(ce.Message, "version 8") || !strings.Contains(ce.Message, "version 7") {
		t.Fatalf("message %q", ce.Message)
	}
	if b, _ := api.Booking("B-001"); api.Effects() != 0 || b.Version != 8 || b.Data["start"] != "14:00" || b.Data["room"] != "B" {
		t.Fatalf("effects %d booking %+v", api.Effects(), b)
	}
	st, err := a.Status(context.Background(), adapter.StatusQuery{RequestID: "R-001"})
	if err != nil || st.State != adapter.StatusFailed || st.Code != "version_conflict" || st.AppliedVersion != "" {
		t.Fatalf("status %+v %v", st, err)
	}
}

func TestWriteKeyReusedWithOtherPayload(t *testing.T) {
	api, _ := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()
	if _, err := a.Write(ctx, writeReq(t, approved, 1)); err != nil {
		t.Fatal(err)
	}
	other := writeReq(t, `{"booking_id":"B-001","expected_version":7,"change":{"start":"16:00","end":"17:00"}}`, 2)
	_, err := a.Write(ctx, other)
	if ce := callError(t, err); ce.Class != adapter.Unknown || ce.Code != adapter.CodeKeyReused || ce.StatusCode != 422 {
		t.Fatalf("got %+v", ce)
	}
	if b, _ := api.Booking("B-001"); api.Effects() != 1 || b.Data["start"] != "15:00" {
		t.Fatalf("effects %d booking %+v", api.Effects(), b)
	}
}

func TestWriteProcessing(t *testing.T) {
	api, clock := newAPI(t, fakeapi.WithBookingProcessingFor(time.Minute))
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()
	req := writeReq(t, approved, 1)
	_, err := a.Write(ctx, req)
	if ce := callError(t, err); ce.Class != adapter.Unknown || ce.Code != "accepted_processing" || ce.StatusCode != 202 {
		t.Fatalf("got %+v", ce)
	}
	st, err := a.Status(ctx, adapter.StatusQuery{RequestID: "R-001"})
	if err != nil || st.State != adapter.StatusProcessing || st.AppliedVersion != "" || hash(t, st.Payload) != hash(t, req.Payload) {
		t.Fatalf("status %+v %v", st, err)
	}
	clock.Advance(time.Minute)
	st, err = a.Status(ctx, adapter.StatusQuery{RequestID: "R-001"})
	if err != nil || st.State != adapter.StatusCompleted || st.AppliedVersion != "8" {
		t.Fatalf("status %+v %v", st, err)
	}
	if api.Effects() != 1 {
		t.Fatalf("effects %d", api.Effects())
	}
}

func TestWriteNeverComplete(t *testing.T) {
	api, clock := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	api.Next(fakeapi.NeverComplete())
	if _, err := a.Write(context.Background(), writeReq(t, approved, 1)); callError(t, err).Class != adapter.Unknown {
		t.Fatalf("got %v", err)
	}
	clock.Advance(72 * time.Hour)
	st, err := a.Status(context.Background(), adapter.StatusQuery{RequestID: "R-001"})
	if err != nil || st.State != adapter.StatusProcessing || api.Effects() != 0 {
		t.Fatalf("status %+v %v effects %d", st, err, api.Effects())
	}
}

func TestWriteFailDefinite(t *testing.T) {
	t.Run("nothing applied", func(t *testing.T) {
		api, _ := newAPI(t)
		a := newAdapter(t, api.URL(), nil)
		api.Next(fakeapi.FailDefinite(422, nil))
		_, err := a.Write(context.Background(), writeReq(t, approved, 1))
		if ce := callError(t, err); ce.Class != adapter.Rejected || ce.Code != "change_failed" || ce.StatusCode != 422 {
			t.Fatalf("got %+v", ce)
		}
		st, err := a.Status(context.Background(), adapter.StatusQuery{RequestID: "R-001"})
		if err != nil || st.State != adapter.StatusFailed || st.Code != "change_failed" || len(st.PartialEffects) != 0 || api.Effects() != 0 {
			t.Fatalf("status %+v %v", st, err)
		}
	})
	t.Run("partial effects", func(t *testing.T) {
		api, _ := newAPI(t)
		a := newAdapter(t, api.URL(), nil)
		// Even a 4xx is no proof of "nothing happened" when effects remain.
		api.Next(fakeapi.FailDefinite(400, []string{"room_released", "email_sent"}))
		_, err := a.Write(context.Background(), writeReq(t, approved, 1))
		if ce := callError(t, err); ce.Class != adapter.Unknown || ce.Code != "failed_with_partial_effects" || ce.StatusCode != 400 {
			t.Fatalf("got %+v", ce)
		}
		st, err := a.Status(context.Background(), adapter.StatusQuery{RequestID: "R-001"})
		if err != nil || st.State != adapter.StatusFailed || strings.Join(st.PartialEffects, ",") != "room_released,email_sent" {
			t.Fatalf("status %+v %v", st, err)
		}
		if api.Effects() != 0 {
			t.Fatalf("effects %d", api.Effects())
		}
	})
}

func TestWriteStatuses(t *testing.T) {
	api, _ := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	for _, tc := range []struct {
		code      int
		class     adapter.Class
		retryable bool
	}{
		{400, adapter.Rejected, false},
		{409, adapter.Unknown, false}, // a 409 without version_conflict proves nothing
		{429, adapter.Rejected, true},
		{500, adapter.Unknown, false},
		{502, adapter.Unknown, false},
		{503, adapter.Unknown, false},
	} {
		api.Next(fakeapi.Status(tc.code))
		_, err := a.Write(context.Background(), writeReq(t, approved, 1))
		ce := callError(t, err)
		if ce.Class != tc.class || ce.Retryable != tc.retryable || ce.StatusCode != tc.code {
			t.Fatalf("%d: got %+v", tc.code, ce)
		}
	}
	if api.Effects() != 0 {
		t.Fatalf("effects %d", api.Effects())
	}
}

func TestWriteUnauthorized(t *testing.T) {
	api, _ := newAPI(t)
	a, err := booking.New(booking.Config{BaseURL: api.URL(), Token: "wrong_token", KeyRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Write(context.Background(), writeReq(t, approved, 1))
	if ce := callError(t, err); ce.Class != adapter.Rejected || ce.StatusCode != 401 {
		t.Fatalf("got %+v", ce)
	}
}

// Seed 001: T-001 is stuck on the way, T-002 (same R-001, K-001, change)
// applies, T-001 lands late: one effect.
func TestWriteLateArrival(t *testing.T) {
	api, _ := newAPI(t)
	a := newAdapter(t, api.URL(), func(c *booking.Config) {
		c.Client = &http.Client{Timeout: 200 * time.Millisecond}
	})
	ctx := context.Background()
	api.Next(fakeapi.HoldForLateArrival())
	_, err := a.Write(ctx, writeReq(t, approved, 1))
	if ce := callError(t, err); ce.Class != adapter.Unknown {
		t.Fatalf("T-001: %+v", ce)
	}
	if _, err := a.Status(ctx, adapter.StatusQuery{RequestID: "R-001"}); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("status before retry: %v", err)
	}
	res, err := a.Write(ctx, writeReq(t, approved, 2))
	if err != nil || res.ExternalID != "B-001@v8" {
		t.Fatalf("T-002: %+v %v", res, err)
	}
	if n := api.ReleaseHeld(); n != 1 {
		t.Fatalf("released %d", n)
	}
	if b, _ := api.Booking("B-001"); api.Effects() != 1 || api.EffectsForRequest("R-001") != 1 || b.Version != 8 {
		t.Fatalf("effects %d version %d", api.Effects(), b.Version)
	}
}

func TestStatusReflectionDelayAndLaterChange(t *testing.T) {
	api, clock := newAPI(t, fakeapi.WithBookingReflectionDelay(20*time.Second))
	a := newAdapter(t, api.URL(), func(c *booking.Config) { c.ReflectionDelay = 20 * time.Second })
	ctx := context.Background()
	req := writeReq(t, approved, 1)
	if _, err := a.Write(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Status(ctx, adapter.StatusQuery{RequestID: "R-001"}); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("before the reflection delay: %v", err)
	}
	clock.Advance(20 * time.Second)
	api.ChangeBy("B-001", "R-other", map[string]any{"room": "B"})
	st, err := a.Status(ctx, adapter.StatusQuery{RequestID: "R-001"})
	if err != nil || st.State != adapter.StatusCompleted || st.AppliedVersion != "8" || st.Version != "9" || hash(t, st.Payload) != hash(t, req.Payload) {
		t.Fatalf("status %+v %v", st, err)
	}
	if caps := a.Capabilities(); caps.ReflectionDelay != 20*time.Second || !caps.StatusQuery || !caps.IdempotencyKey ||
		caps.KeyRetention != 24*time.Hour || caps.Search {
		t.Fatalf("capabilities %+v", caps)
	}
}

func TestStatusPayloadDiffersForAnotherChange(t *testing.T) {
	api, _ := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	// Someone else used our request id for another change.
	api.ChangeBy("B-001", "R-001", map[string]any{"start": "16:00"})
	st, err := a.Status(context.Background(), adapter.StatusQuery{RequestID: "R-001"})
	if err != nil || st.State != adapter.StatusCompleted {
		t.Fatalf("status %+v %v", st, err)
	}
	if len(st.Payload) != 0 && hash(t, st.Payload) == hash(t, writeReq(t, approved, 1).Payload) {
		t.Fatal("a different change hashes like the approved one")
	}
}

func TestStatusServerError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	a := newAdapter(t, srv.URL, nil)
	if _, err := a.Status(context.Background(), adapter.StatusQuery{RequestID: "R-001"}); callError(t, err).StatusCode != 503 {
		t.Fatalf("got %v", err)
	}
	if _, err := a.Status(context.Background(), adapter.StatusQuery{}); err == nil {
		t.Fatal("an empty request id was accepted")
	}
}

func TestWriteNotSent(t *testing.T) {
	api, _ := newAPI(t)
	adaptertest.NotSent(t, newAdapter(t, api.URL(), nil), writeReq(t, approved, 1), api.Writes, map[string]func(*adapter.WriteRequest){
		"no key":        func(r *adapter.WriteRequest) { r.IdempotencyKey = "" },
		"no request id": func(r *adapter.WriteRequest) { r.RequestID = "" },
		"bad payload":   func(r *adapter.WriteRequest) { r.Payload = json.RawMessage(`{"booking_id":"B-001"}`) },
		"key with CRLF": func(r *adapter.WriteRequest) { r.IdempotencyKey = "K\r\nX: y" },
	})
}

func TestGetProbeSearch(t *testing.T) {
	api, clock := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()
	clock.Advance(time.Minute)
	if _, err := a.Write(ctx, writeReq(t, approved, 1)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"B-001", "B-001@v8", "B-001@v3"} {
		r, err := a.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.ExternalID != "B-001@v8" || r.LiveURL != api.URL()+"/v1/bookings/B-001" || !r.CreatedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("Get(%q) = %+v", id, r)
		}
		var state struct {
			BookingID        string            `json:"booking_id"`
			Data             map[string]string `json:"data"`
			UpdatedByRequest string            `json:"updated_by_request"`
			Version          int               `json:"version"`
		}
		if err := json.Unmarshal(r.Payload, &state); err != nil || state.Version != 8 || state.Data["start"] != "15:00" || state.UpdatedByRequest != "R-001" {
			t.Fatalf("payload %s", r.Payload)
		}
	}
	for _, id := range []string{"B-404", "../B-001", "B-001/x"} {
		if _, err := a.Get(ctx, id); !errors.Is(err, adapter.ErrNotFound) {
			t.Fatalf("Get(%q): %v", id, err)
		}
	}
	if _, err := a.Get(ctx, ""); err == nil {
		t.Fatal("empty id accepted")
	}
	if code, err := a.Probe(ctx, api.URL()+"/v1/bookings/B-404"); err != nil || code != 404 {
		t.Fatalf("probe unknown: %d %v", code, err)
	}
	recs, err := a.Search(ctx, adapter.SearchQuery{Account: "acct_1"})
	if recs != nil || err != nil {
		t.Fatalf("search: %v %v", recs, err)
	}

	// The token never goes to another origin.
	var hits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer other.Close()
	withUser := strings.Replace(api.URL(), "http://", "http://u:p@", 1)
	for _, u := range []string{other.URL + "/v1/bookings/B-001", withUser + "/v1/bookings/B-001", api.URL() + "/elsewhere", "::"} {
		if _, err := a.Probe(ctx, u); err == nil {
			t.Fatalf("probe %s accepted", u)
		} else {
			noToken(t, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatal("a foreign origin was contacted")
	}
}

func TestNewValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg   booking.Config
		field string
	}{
		{booking.Config{Token: token, KeyRetention: time.Hour}, "config.BaseURL"},
		{booking.Config{BaseURL: "ftp://x", Token: token, KeyRetention: time.Hour}, "config.BaseURL"},
		{booking.Config{BaseURL: "http://", Token: token, KeyRetention: time.Hour}, "config.BaseURL"},
		{booking.Config{BaseURL: "http://u:p@x", Token: token, KeyRetention: time.Hour}, "config.BaseURL"},
		{booking.Config{BaseURL: "http://x?q=1", Token: token, KeyRetention: time.Hour}, "config.BaseURL"},
		{booking.Config{BaseURL: "http://x", KeyRetention: time.Hour}, "config.Token"},
		{booking.Config{BaseURL: "http://x", Token: "a b", KeyRetention: time.Hour}, "config.Token"},
		{booking.Config{BaseURL: "http://x", Token: token}, "config.KeyRetention"},
		{booking.Config{BaseURL: "http://x", Token: token, KeyRetention: -time.Second}, "config.KeyRetention"},
		{booking.Config{BaseURL: "http://x", Token: token, KeyRetention: time.Hour, ReflectionDelay: -1}, "config.ReflectionDelay"},
	} {
		_, err := booking.New(tc.cfg)
		var fe *events.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, events.ErrInvalidField) {
			t.Fatalf("%+v: got %v, want field %s", tc.cfg, err, tc.field)
		}
		noToken(t, err)
	}
	if _, err := booking.New(booking.Config{BaseURL: "https://x/api/", Token: token, KeyRetention: time.Hour}); err != nil {
		t.Fatal(err)
	}
}

func TestNormalizePayload(t *testing.T) {
	want := `{"booking_id":"B-001","change":{"end":"16:00","start":"15:00"},"expected_version":7}`
	for _, in := range []string{
		approved,
		`{ "change": {"start":"15:00","end":"16:00"}, "expected_version": 7.0, "booking_id": "B-001" }`,
		`{"booking_id":"B-001","expected_version":7e0,"change":{"end":"16:00","start":"15:00"}}`,
	} {
		out, err := booking.NormalizePayload(json.RawMessage(in))
		if err != nil || string(out) != want {
			t.Fatalf("%s: %s %v", in, out, err)
		}
	}
	a := newAdapter(t, "http://x", nil)
	if out, err := a.NormalizePayload(json.RawMessage(approved)); err != nil || string(out) != want {
		t.Fatalf("method: %s %v", out, err)
	}
	for _, tc := range []struct{ in, field string }{
		{``, "payload"},
		{`[]`, "payload"},
		{`{"booking_id":"B-001","expected_version":7,"change":{"a":1},"extra":1}`, "payload.extra"},
		{`{"booking_id":"B-001","expected_version":7,"change":{"a":1},"a b":1}`, `payload["a b"]`},
		{`{"expected_version":7,"change":{"a":1}}`, "payload.booking_id"},
		{`{"booking_id":7,"expected_version":7,"change":{"a":1}}`, "payload.booking_id"},
		{`{"booking_id":"","expected_version":7,"change":{"a":1}}`, "payload.booking_id"},
		{`{"booking_id":"B 001","expected_version":7,"change":{"a":1}}`, "payload.booking_id"},
		{`{"booking_id":"B@v1","expected_version":7,"change":{"a":1}}`, "payload.booking_id"},
		{`{"booking_id":"..","expected_version":7,"change":{"a":1}}`, "payload.booking_id"},
		{`{"booking_id":"B-001","change":{"a":1}}`, "payload.expected_version"},
		{`{"booking_id":"B-001","expected_version":-1,"change":{"a":1}}`, "payload.expected_version"},
		{`{"booking_id":"B-001","expected_version":7.5,"change":{"a":1}}`, "payload.expected_version"},
		{`{"booking_id":"B-001","expected_version":"7","change":{"a":1}}`, "payload.expected_version"},
		{`{"booking_id":"B-001","expected_version":7}`, "payload.change"},
		{`{"booking_id":"B-001","expected_version":7,"change":[]}`, "payload.change"},
		{`{"booking_id":"B-001","expected_version":7,"change":null}`, "payload.change"},
		{`{"booking_id":"B-001","expected_version":7,"change":{}}`, "payload.change"},
		{`{"booking_id":"B-001","expected_version":7,"change":{"a":1,"a":2}}`, "payload.change.a"},
	} {
		_, err := booking.NormalizePayload(json.RawMessage(tc.in))
		var fe *events.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Fatalf("%s: got %v, want field %s", tc.in, err, tc.field)
		}
	}
}

func FuzzNormalizePayload(f *testing.F) {
	adaptertest.FuzzNormalizer(f, booking.NormalizePayload, nil,
		approved,
		`{"booking_id":"B-001","expected_version":0,"change":{"a":null,"b":[1,{"c":"\u00e9"}]}}`,
		`{"booking_id":"B-001","expected_version":1e30,"change":{"a":1}}`,
		`{"booking_id":"B-001","expected_version":7,"change":{"a":1},"booking_id":"B-002"}`,
		`{"change":"x"}`, `null`, `"x"`, `{`, ``)
}

func noToken(t *testing.T, err error) { t.Helper(); testharness.NoSecret(t, err, token) }

func callError(t *testing.T, err error) *adapter.CallError {
	t.Helper()
	return testharness.CallErrorOf(t, err, token)
}

func hash(t *testing.T, p []byte) string { t.Helper(); return testharness.Hash(t, p) }
