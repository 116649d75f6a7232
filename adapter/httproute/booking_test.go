package httproute_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/booking"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

const reflection = 5 * time.Second

func bookingPair(t *testing.T, opts ...fakeapi.BookingOption) (*fakeapi.BookingAPI, *testharness.ManualClock, *httproute.Adapter, *booking.Adapter) {
	t.Helper()
	clock := testharness.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	opts = append([]fakeapi.BookingOption{fakeapi.WithBookingToken(secretToken), fakeapi.WithBookingClock(clock.Now),
		fakeapi.WithBookingReflectionDelay(reflection)}, opts...)
	api := fakeapi.NewBookingAPI(t, opts...)
	gen := loadExample(t, "booking.yaml", api.URL())
	hand, err := booking.New(booking.Config{BaseURL: api.URL(), Token: secretToken, KeyRetention: 24 * time.Hour, ReflectionDelay: reflection})
	if err != nil {
		t.Fatal(err)
	}
	if g, h := gen.Capabilities(), hand.Capabilities(); g != h {
		t.Fatalf("capabilities: generic %+v, hand-written %+v", g, h)
	}
	return api, clock, gen, hand
}

func bookingPayload(t *testing.T, a adapter.PayloadNormalizer, id string, version int, change string) json.RawMessage {
	t.Helper()
	raw := `{"booking_id":"` + id + `","expected_version":` + itoa(version) + `,"change":` + change + `}`
	p, err := a.NormalizePayload(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("normalize %s: %v", raw, err)
	}
	return p
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// sameStatus asserts both adapters read the same status for q.
func sameStatus(t *testing.T, gen, hand adapter.StatusQuerier, q adapter.StatusQuery) adapter.StatusResult {
	t.Helper()
	g, e1 := gen.Status(bg, q)
	h, e2 := hand.Status(bg, q)
	if (e1 == nil) != (e2 == nil) || (e1 != nil && !errors.Is(e1, adapter.ErrNotFound) != !errors.Is(e2, adapter.ErrNotFound)) {
		t.Fatalf("status %+v: generic %v, hand-written %v", q, e1, e2)
	}
	noSecret(t, "status", g)
	if e1 != nil {
		return adapter.StatusResult{}
	}
	if !reflect.DeepEqual(g, h) {
		t.Fatalf("status %+v:\n generic      %+v\n hand-written %+v", q, g, h)
	}
	return g
}

// TestBookingParity: the booking example drives the fake booking service
// like adapter/booking: same write outcomes, same status results
// (completed, processing, failed, 404), same readback.
func TestBookingParity(t *testing.T) {
	api, clock, gen, hand := bookingPair(t)
	api.Seed("B-1", 1, map[string]any{"seat": "12A"})
	api.Seed("B-2", 1, map[string]any{"seat": "12A"})

	// Success: the generic adapter changes B-1, the hand-written B-2.
	reqG := writeReq(1, "acct", "", bookingPayload(t, gen, "B-1", 1, `{"seat":"14C"}`))
	reqH := writeReq(2, "acct", "", bookingPayload(t, hand, "B-2", 1, `{"seat":"14C"}`))
	resG, errG := gen.Write(bg, reqG)
	resH, errH := hand.Write(bg, reqH)
	if errG != nil || errH != nil {
		t.Fatalf("write: generic %v, hand-written %v", errG, errH)
	}
	if resG.ExternalID != "B-1@v2" || resG.LiveURL != api.URL()+"/v1/bookings/B-1" || resG.StatusCode != http.StatusOK {
		t.Fatalf("generic write: %+v", resG)
	}
	if resH.ExternalID != "B-2@v2" {
		t.Fatalf("hand-written write: %+v", resH)
	}
	if w, _ := api.Request(reqG.RequestID); w.AttemptID != reqG.AttemptID || w.IdempotencyKey != reqG.IdempotencyKey {
		t.Fatalf("the service saw key %q attempt %q", w.IdempotencyKey, w.AttemptID)
	}
	if api.Effects() != 2 {
		t.Fatalf("%d effects", api.Effects())
	}

	// Status: not reflected yet -> ErrNotFound; then completed.
	q := adapter.StatusQuery{RequestID: reqG.RequestID, IdempotencyKey: reqG.IdempotencyKey, Account: "acct"}
	if _, err := gen.Status(bg, q); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("status inside the reflection delay: %v, want ErrNotFound", err)
	}
	clock.Advance(reflection + time.Second)
	st := sameStatus(t, gen, hand, q)
	if st.State != adapter.StatusCompleted || st.ExternalID != "B-1@v2" || st.AppliedVersion != "2" || st.Version != "2" {
		t.Fatalf("completed status: %+v", st)
	}
	if hashOf(t, st.Payload) != hashOf(t, reqG.Payload) {
		t.Fatalf("status payload %s does not hash like the intent %s", st.Payload, reqG.Payload)
	}
	// A later change by someone else: current and applied versions apart.
	api.ChangeBy("B-1", "someone-else", map[string]any{"meal": "veg"})
	if st := sameStatus(t, gen, hand, q); st.Version != "3" || st.AppliedVersion != "2" {
		t.Fatalf("after a later change: %+v", st)
	}
	// Unknown request id: 404 -> ErrNotFound.
	if _, err := gen.Status(bg, adapter.StatusQuery{RequestID: "never-sent", Account: "acct"}); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("status of an unknown request: %v, want ErrNotFound", err)
	}
	sameStatus(t, gen, hand, adapter.StatusQuery{RequestID: "never-sent", Account: "acct"})

	// Readback of the booking as it is now.
	g, e1 := gen.Get(bg, "B-1@v2")
	h, e2 := hand.Get(bg, "B-1@v2")
	if e1 != nil || e2 != nil || !reflect.DeepEqual(g, h) {
		t.Fatalf("get: generic %+v %v, hand-written %+v %v", g, e1, h, e2)
	}
	if _, err := gen.Get(bg, "B-404"); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("get of a missing booking: %v", err)
	}
	if recs, err := gen.Search(bg, adapter.SearchQuery{Account: "acct"}); recs != nil || err != nil {
		t.Fatalf("a route without search: %v %v", recs, err)
	}

	// Rejections: stale version, key reused with another body, no booking.
	stale := writeReq(3, "acct", "", bookingPayload(t, gen, "B-1", 1, `{"seat":"1A"}`))
	_, errG = gen.Write(bg, stale)
	stale.RequestID, stale.IdempotencyKey = "req-3h", stale.IdempotencyKey+"h"
	_, errH = hand.Write(bg, stale)
	sameClass(t, "version conflict", errG, errH)
	if ce := callError(t, errG); ce.Class != adapter.Rejected || ce.Code != "version_conflict" {
		t.Fatalf("stale version: %+v", *ce)
	}
	reused := reqG
	reused.Payload = bookingPayload(t, gen, "B-1", 3, `{"seat":"2B"}`)
	_, errG = gen.Write(bg, reused)
	_, errH = hand.Write(bg, reused)
	sameClass(t, "key reused", errG, errH)
	if ce := callError(t, errG); ce.Class != adapter.Unknown || ce.Code != adapter.CodeKeyReused {
		t.Fatalf("key reused: %+v", *ce)
	}
	missing := writeReq(4, "acct", "", bookingPayload(t, gen, "B-404", 1, `{"seat":"2B"}`))
	_, errG = gen.Write(bg, missing)
	missing.IdempotencyKey += "h"
	_, errH = hand.Write(bg, missing)
	sameClass(t, "no booking", errG, errH)
	if ce := callError(t, errG); ce.Code != "booking_not_found" {
		t.Fatalf("no booking: %+v", *ce)
	}

	// A replay with the same key answers the first result.
	if res, err := gen.Write(bg, reqG); err != nil || res.ExternalID != "B-1@v2" {
		t.Fatalf("replay: %+v %v", res, err)
	}

	// Lost response and transport faults.
	for _, f := range []fakeapi.Fault{fakeapi.CommitThenDrop(), fakeapi.ResetBeforeCommit(), fakeapi.Status(503), fakeapi.Status(429)} {
		api.Seed("B-f", 1, map[string]any{})
		api.Next(f)
		_, errG := gen.Write(bg, writeReq(10, "acct", "", bookingPayload(t, gen, "B-f", 1, `{"x":1}`)))
		api.Seed("B-f", 1, map[string]any{})
		api.Next(f)
		_, errH := hand.Write(bg, writeReq(11, "acct", "", bookingPayload(t, gen, "B-f", 1, `{"x":1}`)))
		sameClass(t, f.String(), errG, errH)
	}
}

// TestBookingProcessingAndFailed: 202 and failures with partial effects
// are unknown at write time; Status then says processing or failed.
func TestBookingProcessingAndFailed(t *testing.T) {
	api, clock, gen, hand := bookingPair(t, fakeapi.WithBookingProcessingFor(time.Hour))
	api.Seed("B-1", 1, map[string]any{"seat": "12A"})

	req := writeReq(1, "acct", "", bookingPayload(t, gen, "B-1", 1, `{"seat":"14C"}`))
	_, err := gen.Write(bg, req)
	if ce := callError(t, err); ce.Class != adapter.Unknown || ce.Code != "accepted_processing" || ce.StatusCode != http.StatusAccepted {
		t.Fatalf("202: %+v", *ce)
	}
	_, errH := hand.Write(bg, req) // the same key: the service replays 202
	sameClass(t, "processing", err, errH)
	clock.Advance(reflection + time.Second)
	q := adapter.StatusQuery{RequestID: req.RequestID, IdempotencyKey: req.IdempotencyKey, Account: req.Account}
	if st := sameStatus(t, gen, hand, q); st.State != adapter.StatusProcessing || st.ExternalID != "" || st.AppliedVersion != "" {
		t.Fatalf("processing status: %+v", st)
	}
	clock.Advance(time.Hour)
	if st := sameStatus(t, gen, hand, q); st.State != adapter.StatusCompleted || st.ExternalID != "B-1@v2" {
		t.Fatalf("completed status: %+v", st)
	}

	api.Seed("B-2", 1, map[string]any{"seat": "1A"})
	api.Next(fakeapi.FailDefinite(500, []string{"email_sent", "hold_released"}))
	failing := writeReq(2, "acct", "", bookingPayload(t, gen, "B-2", 1, `{"seat":"3C"}`))
	_, err = gen.Write(bg, failing)
	if ce := callError(t, err); ce.Class != adapter.Unknown { // 202 first: it fails when processing ends
		t.Fatalf("failing change: %+v", *ce)
	}
	clock.Advance(time.Hour + reflection + time.Second)
	st := sameStatus(t, gen, hand, adapter.StatusQuery{RequestID: failing.RequestID, Account: failing.Account})
	if st.State != adapter.StatusFailed || st.Code != "change_failed" || !reflect.DeepEqual(st.PartialEffects, []string{"email_sent", "hold_released"}) {
		t.Fatalf("failed status: %+v", st)
	}
}

// TestBookingFailsWithPartialEffects: a definite failure that left effects
// is unknown, not rejected.
func TestBookingFailsWithPartialEffects(t *testing.T) {
	api, _, gen, hand := bookingPair(t)
	for i, a := range []adapter.Adapter{gen, hand} {
		api.Seed("B-1", 1, nil)
		api.Next(fakeapi.FailDefinite(400, []string{"email_sent"}))
		_, err := a.Write(bg, writeReq(i, "acct", "", bookingPayload(t, gen, "B-1", 1, `{"seat":"3C"}`)))
		if ce := callError(t, err); ce.Class != adapter.Unknown || ce.Code != "failed_with_partial_effects" {
			t.Fatalf("%v: %+v", a, *ce)
		}
	}
}

// TestStatusIsScopedByAccount: request ids are the
// callers', and two accounts may use one. Account A's change is applied
// under request id "shared"; account B's intent with the same request id
// never reached the service. B's status lookup must not find A's change:
// before, both adapters answered "completed" with A's change (a false
// confirmation of B's intent), looking it up by the bare request id. Now
// the lookup names the account, and an answer of another account is not
// found; A's own lookup carries A's account.
func TestStatusIsScopedByAccount(t *testing.T) {
	api, clock, gen, hand := bookingPair(t)
	api.Seed("B-1", 1, map[string]any{"seat": "12A"})
	reqA := writeReq(1, "acct_a", "", bookingPayload(t, gen, "B-1", 1, `{"seat":"14C"}`))
	reqA.RequestID = "shared"
	if _, err := gen.Write(bg, reqA); err != nil {
		t.Fatal(err)
	}
	clock.Advance(reflection + time.Second)
	for name, a := range map[string]adapter.StatusQuerier{"generic": gen, "hand-written": hand} {
		_, err := a.Status(bg, adapter.StatusQuery{RequestID: "shared", IdempotencyKey: "sk_of_b", Account: "acct_b"})
		if !errors.Is(err, adapter.ErrNotFound) {
			t.Fatalf("%s: B's lookup found %v, want ErrNotFound", name, err)
		}
	}
	st := sameStatus(t, gen, hand, adapter.StatusQuery{RequestID: "shared", IdempotencyKey: reqA.IdempotencyKey, Account: "acct_a"})
	if st.State != adapter.StatusCompleted || st.Account != "acct_a" {
		t.Fatalf("A's lookup: %+v", st)
	}
	if w, _ := api.Request("shared"); w.Account != "acct_a" {
		t.Fatalf("the service recorded account %q", w.Account)
	}

	// The route language refuses a status query by a bare request id that
	// neither names the account nor declares credential scoping.
	bookingFile := readExample(t, "booking.yaml")
	env := exampleEnv("http://127.0.0.1:9")
	oneError(t, mutate(t, bookingFile, "?account={{account}}", "", "      account: $.account\n", ""), env,
		"booking_change", "status.url", "two accounts", "credential_scoped: true")
	for _, ok := range [][]byte{
		mutate(t, bookingFile, "?account={{account}}", ""), // the answer's account is read and checked
		mutate(t, bookingFile, "?account={{account}}", "", "      account: $.account\n", "      credential_scoped: true\n"),
	} {
		if errs := httproute.Check(ok, envOf(env)); errs != nil {
			t.Fatal(errs)
		}
	}
}
