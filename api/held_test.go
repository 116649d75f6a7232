package api

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
)

// A key whose intent the log lost whole, held after the accepted loss (its
// hold marker on its subject): a resubmission is a 409 intent-held naming
// the loss, not a new intent and not a 500; a read by id answers the
// same when the views know the intent as the caller's tenant's. This one
// was never in the views, and its marker does not say whose it is: a read
// by id is not found, for any token (an id names no tenant; see
// mcp.TestAnotherTenantsHeldIntentIsNotFound). Nothing is written.
func TestHeldIntentIsAProblemNotAWrite(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := events.ScopedIntentID("default", "social_post", "acct_1", "held-key")
	hold := events.NewHold(id, []uint64{1, 2, 3}, []uint64{10, 11, 14}, [][2]uint64{{9, 20}}, t0, "test", "a block file was lost.")
	if ok, err := ledger.MarkHeld(context.Background(), e.Node.JS, "SETTLE_INTENTS", "social_post", hold); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	r := e.do("POST", "/v1/intents", secretAdmin, submitBodyJSON("social_post", "acct_1", "held-key", `{"body":"again"}`))
	p := r.problem(t, 409, "")
	if p["type"] != ProblemTypePrefix+ProbIntentHeld || p["intent_id"] != id ||
		!strings.Contains(p["detail"].(string), "versions 1, 2, 3 (sequences 10..11, 14)") {
		t.Fatalf("resubmitting a held key: %s", r.body)
	}
	g := e.do("GET", "/v1/intents/"+id, secretAdmin, "")
	if gp := g.problem(t, 404, ""); gp["type"] != ProblemTypePrefix+ProbNotFound || strings.Contains(string(g.body), "held") {
		t.Fatalf("reading a held intent the views do not know: %s", g.body)
	}
	if e.Social.Writes() != 0 {
		t.Fatalf("%d writes for a held key", e.Social.Writes())
	}
	if h := e.history("social_post", id); len(h) != 0 {
		t.Fatalf("the held subject got events: %v", h)
	}
}
