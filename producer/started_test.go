package producer_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// bigRequest renders every write as a large recordable request (it sends
// with Write, as the social adapter does).
type bigRequest struct{ adapter.Adapter }

func (b bigRequest) PrepareWrite(req adapter.WriteRequest) (events.SentRequest, error) {
	return events.SentRequest{Method: http.MethodPost, Path: "/posts", ContentType: "application/json",
		Body: `{"pad":"` + strings.Repeat("r", 200<<10) + `"}`}, nil
}

func (b bigRequest) WritePrepared(ctx context.Context, req adapter.WriteRequest, _ events.SentRequest) (adapter.WriteResult, error) {
	return b.Adapter.Write(ctx, req)
}

// A record and a first start that together exceed an event's limit (a
// large payload and a large rendered request, each within its own) are
// appended as IntentRecorded and WriteStarted, one unit, the request
// still recorded, and the write is made once: the start is on the log
// before the call either way.
func TestExecuteOverLimitStartIsTwoMessages(t *testing.T) {
	n := testharness.StartNode(t)
	s := testharness.OpenStore(t, n.JS)
	api := fakeapi.NewSocialAPI(t)
	ad := testharness.ExampleRoute(t, "social.yaml", api).Adapter
	p, err := producer.New(s, producer.DefaultConfig(), adapter.Route{Name: "social_post", Adapter: bigRequest{ad}, Policy: adapter.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("b", 900<<10)
	res, err := p.Execute(context.Background(), producer.Request{Route: "social_post", Account: "acct_1", RequestID: "big",
		Payload: json.RawMessage(`{"body":"` + body + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.Load(context.Background(), "social_post", res.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	got := types(h.Events)
	if len(got) != 3 || got[0] != events.IntentRecorded || got[1] != events.WriteStarted || res.State != fsm.Verifying {
		t.Fatalf("history %v state %s", got, res.State)
	}
	if ws := events.Started(h.Events[1]); ws.Request == nil || len(ws.Request.Body) < 200<<10 {
		t.Fatal("the request was not recorded")
	}
	if api.Writes() != 1 || api.Effects() != 1 {
		t.Fatalf("writes %d effects %d", api.Writes(), api.Effects())
	}
	// A small one on the same route is one message.
	small, err := p.Execute(context.Background(), req("small", "hello"))
	if err != nil || small.History[0].Type != events.IntentStarted || len(small.History) != 2 {
		t.Fatalf("%v %v", err, types(small.History))
	}
}
