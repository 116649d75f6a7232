package api

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
)

func TestOperatorActionsChangeTheLogAndRecordTheOperator(t *testing.T) {
	e := newEnv(t, envOptions{})

	t.Run("approve", func(t *testing.T) {
		r := e.do("POST", "/v1/intents", secretSubmitter, submitBodyJSON("social_approval", "acct_1", "op-approve", `{"body":"approve me"}`))
		if r.code != http.StatusCreated || r.str(t, "state") != string(fsm.AwaitingApproval) {
			t.Fatalf("submit: %d %s", r.code, r.body)
		}
		id := r.str(t, "intent_id")
		if e.Social.Writes() != 0 {
			t.Fatal("an approval route wrote before approval")
		}
		// The body's operator is ignored with a token: the token's name is recorded.
		r = e.do("POST", "/v1/intents/"+id+"/approve", secretOperator, `{"operator":"mallory","reason":"checked the copy"}`)
		if r.code != http.StatusOK || r.str(t, "state") != string(fsm.ApprovedState) {
			t.Fatalf("approve: %d %s", r.code, r.body)
		}
		i := e.intent("social_approval", id)
		if i.State != fsm.ApprovedState || i.ApprovedBy != "ops" {
			t.Fatalf("on the log: state %s approved by %q", i.State, i.ApprovedBy)
		}
		d := lastOf(e.history("social_approval", id), events.Approved).Data.(*events.ApprovedData)
		if d.Operator != "ops" || d.Reason != "checked the copy" {
			t.Fatalf("Approved %+v", d)
		}
		p := e.do("POST", "/v1/intents/"+id+"/approve", secretOperator, `{"reason":"again"}`).problem(t, http.StatusConflict, "")
		if p["state"] != string(fsm.ApprovedState) || p["intent_id"] != id {
			t.Fatalf("409 problem %v", p)
		}
	})

	t.Run("resolve confirmed", func(t *testing.T) {
		id := e.manualIntent("op-confirm")
		writes := e.Social.Writes()
		post := e.Social.Posts()[len(e.Social.Posts())-2]
		e.do("POST", "/v1/intents/"+id+"/resolve", secretOperator, `{"reason":"kept the first","resolution":"confirmed"}`).
			problem(t, http.StatusBadRequest, "external_id")
		body, _ := json.Marshal(map[string]string{"reason": "kept the first, deleted the copy by hand", "resolution": "confirmed",
			"external_id": post.ID, "live_url": post.URL})
		r := e.do("POST", "/v1/intents/"+id+"/resolve", secretOperator, string(body))
		if r.code != http.StatusOK || r.str(t, "state") != string(fsm.Confirmed) {
			t.Fatalf("resolve: %d %s", r.code, r.body)
		}
		i := e.intent("social_post", id)
		if i.State != fsm.Confirmed || i.Receipt == nil || i.Receipt.ExternalID != post.ID || i.Receipt.Source != "operator" {
			t.Fatalf("on the log: %s %+v", i.State, i.Receipt)
		}
		d := lastOf(e.history("social_post", id), events.OperatorConfirmed).Data.(*events.OperatorConfirmedData)
		if d.Operator != "ops" {
			t.Fatalf("OperatorConfirmed by %q", d.Operator)
		}
		if e.Social.Writes() != writes {
			t.Fatal("a resolution wrote")
		}
		e.do("POST", "/v1/intents/"+id+"/resolve", secretOperator, `{"reason":"again","resolution":"abandoned"}`).problem(t, http.StatusConflict, "")
		e.do("POST", "/v1/intents/"+id+"/abandon", secretOperator, `{"reason":"too late"}`).problem(t, http.StatusConflict, "")
	})

	t.Run("resolve not executed", func(t *testing.T) {
		id := e.manualIntent("op-release")
		r := e.do("POST", "/v1/intents/"+id+"/resolve", secretOperator, `{"reason":"both copies were removed by the platform","resolution":"not_executed"}`)
		if r.code != http.StatusOK || r.str(t, "state") != string(fsm.Recorded) {
			t.Fatalf("resolve: %d %s", r.code, r.body)
		}
		i := e.intent("social_post", id)
		if i.State != fsm.Recorded || !i.Released {
			t.Fatalf("on the log: %s released=%v", i.State, i.Released)
		}
		if d := lastOf(e.history("social_post", id), events.OperatorReleased).Data.(*events.OperatorReleasedData); d.Operator != "ops" {
			t.Fatalf("OperatorReleased by %q", d.Operator)
		}
	})

	t.Run("resolve abandoned", func(t *testing.T) {
		id := e.manualIntent("op-abandon")
		r := e.do("POST", "/v1/intents/"+id+"/resolve", secretOperator, `{"reason":"duplicates stay, no further writes","resolution":"abandoned"}`)
		if r.code != http.StatusOK || r.str(t, "state") != string(fsm.Abandoned) {
			t.Fatalf("resolve: %d %s", r.code, r.body)
		}
		i := e.intent("social_post", id)
		if i.State != fsm.Abandoned || i.AbandonedFrom != fsm.ManualAction {
			t.Fatalf("on the log: %s from %s", i.State, i.AbandonedFrom)
		}
		if d := lastOf(e.history("social_post", id), events.Abandoned).Data.(*events.AbandonedData); d.By != "ops" {
			t.Fatalf("Abandoned by %q", d.By)
		}
	})

	t.Run("abandon", func(t *testing.T) {
		r := e.do("POST", "/v1/intents", secretSubmitter, submitBodyJSON("social_approval", "acct_1", "op-abandon-2", `{"body":"never mind"}`))
		id := r.str(t, "intent_id")
		e.do("POST", "/v1/intents/"+id+"/abandon", secretOperator, `{}`).problem(t, http.StatusBadRequest, "reason")
		e.do("POST", "/v1/intents/"+id+"/abandon", secretOperator, `{"reason":"x","resolution":"abandoned"}`).problem(t, http.StatusBadRequest, "resolution")
		// A reason that is not valid Unicode is refused, never recorded
		// as U+FFFD.
		e.do("POST", "/v1/intents/"+id+"/abandon", secretOperator, `{"reason":"cancelled \ud800"}`).problem(t, http.StatusBadRequest, "reason")
		e.do("POST", "/v1/intents/"+id+"/abandon", secretOperator, "{\"reason\":\"cancelled \xff\"}").problem(t, http.StatusBadRequest, "reason")
		r = e.do("POST", "/v1/intents/"+id+"/abandon", secretOperator, `{"reason":"campaign cancelled"}`)
		if r.code != http.StatusOK || r.str(t, "state") != string(fsm.Abandoned) {
			t.Fatalf("abandon: %d %s", r.code, r.body)
		}
		if i := e.intent("social_approval", id); i.State != fsm.Abandoned {
			t.Fatalf("on the log: %s", i.State)
		}
		e.do("POST", "/v1/intents/"+id+"/approve", secretOperator, `{"reason":"changed my mind"}`).problem(t, http.StatusConflict, "")
	})

	t.Run("refusals", func(t *testing.T) {
		r := e.do("POST", "/v1/intents", secretSubmitter, submitBodyJSON("social_approval", "acct_1", "op-refuse", `{"body":"r"}`))
		id := r.str(t, "intent_id")
		base := "/v1/intents/" + id
		e.do("POST", base+"/resolve", secretOperator, `{"reason":"x"}`).problem(t, http.StatusBadRequest, "resolution")
		e.do("POST", base+"/resolve", secretOperator, `{"reason":"x","resolution":"maybe"}`).problem(t, http.StatusBadRequest, "resolution")
		e.do("POST", base+"/resolve", secretOperator, `{"reason":"x","resolution":"confirmed","external_id":"p1","live_url":"javascript:alert(1)"}`).
			problem(t, http.StatusBadRequest, "live_url")
		e.do("POST", base+"/resolve", secretOperator, `{"reason":"x","resolution":"not_executed","external_id":"p1"}`).problem(t, http.StatusBadRequest, "external_id")
		e.do("POST", base+"/resolve", secretOperator, `{"reason":"x","resolution":"abandoned","extra":1}`).problem(t, http.StatusBadRequest, "extra")
		e.do("POST", base+"/approve", secretOperator, `{"reason":`).problem(t, http.StatusBadRequest, "")
		e.do("POST", base+"/approve", secretOperator, `reason=x`, "Content-Type", "text/plain").problem(t, http.StatusUnsupportedMediaType, "")
		// Resolving something not in manual_action is not allowed.
		e.do("POST", base+"/resolve", secretOperator, `{"reason":"x","resolution":"not_executed"}`).problem(t, http.StatusConflict, "")
		e.do("POST", "/v1/intents/in_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/approve", secretOperator, `{"reason":"x"}`).problem(t, http.StatusNotFound, "")
		if i := e.intent("social_approval", id); i.State != fsm.AwaitingApproval || i.Version != 2 {
			t.Fatalf("a refusal changed the log: %s v%d", i.State, i.Version)
		}
	})
}
