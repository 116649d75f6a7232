package main

import (
	"fmt"
	"testing"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

// Two settle serve processes on one NATS with different route files (two
// teams, or a rolling deploy where only the new version has a route): each
// settles the intents of the routes it has, and neither drops the other's
// (a worker used to ack the wake-up of an intent whose route it lacked, and
// the intent never moved again).
func TestTwoServesWithDifferentRouteFilesSettleBothRoutes(t *testing.T) {
	t.Parallel() // processes and waits: overlaps the package's other long tests
	node := testharness.StartNode(t)
	social := fakeapi.NewSocialAPI(t)
	bk := fakeapi.NewBookingAPI(t)
	posts := startServe(t, t.TempDir(), social, "--nats-url", node.URL())
	bookings := startServe(t, t.TempDir(), social, "--nats-url", node.URL(),
		"--routes", "../../examples/routes/booking.yaml", "ENV:BOOKING_BASE_URL="+bk.URL(), "ENV:BOOKING_TOKEN="+bk.Token())
	const n = 6
	var postIDs, bookingIDs []string
	for k := 0; k < n; k++ {
		social.Next(fakeapi.CommitThenDrop())
		r := posts.call("POST", "/v1/intents", map[string]any{"route": "social_post", "account": "acct_1",
			"request_id": fmt.Sprintf("post:%d", k), "payload": map[string]any{"body": fmt.Sprintf("team A post %d", k)}})
		if r.code != 201 {
			t.Fatalf("social submit %d: %d %s", k, r.code, r.raw)
		}
		postIDs = append(postIDs, r.body["intent_id"].(string))

		booking := fmt.Sprintf("B-%d", k)
		bk.Seed(booking, 8, nil)
		bk.Next(fakeapi.CommitThenDrop())
		r = bookings.call("POST", "/v1/intents", map[string]any{"route": "booking_change", "account": "acct_1",
			"request_id": fmt.Sprintf("booking:%d", k), "payload": map[string]any{"booking_id": booking, "expected_version": 8, "change": map[string]any{"seat": "12A"}}})
		if r.code != 201 {
			t.Fatalf("booking submit %d: %d %s", k, r.code, r.raw)
		}
		bookingIDs = append(bookingIDs, r.body["intent_id"].(string))
	}
	for _, id := range postIDs {
		posts.waitState(id, "confirmed")
	}
	for _, id := range bookingIDs {
		bookings.waitState(id, "confirmed")
	}
	if social.Effects() != n || social.Writes() != n || bk.Effects() != n || bk.Writes() != n {
		t.Fatalf("social effects %d writes %d; booking effects %d writes %d, want %d each",
			social.Effects(), social.Writes(), bk.Effects(), bk.Writes(), n)
	}
	posts.stop()
	bookings.stop()
}
