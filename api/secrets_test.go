package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/fakeapi"
)

// A token secret and the route's own secret (the fake API's bearer token,
// held by the adapter) never appear in a response, a log line, an event on
// the log or the projected views — through successes, refusals, lost
// responses, failed calls, reconciliation and operator decisions.
func TestSecretsNeverLeak(t *testing.T) {
	e := newEnv(t, envOptions{accessLog: true})
	e.seen = &transcript{}
	secrets := []string{secretAdmin, secretReader, secretSubmitter, secretOperator, secretRouteLtd, secretAcctLtd, routeSecret}

	// Writes through every outcome class.
	e.Social.Next(fakeapi.CommitThenDrop(), fakeapi.Status(500), fakeapi.ResetBeforeCommit(), fakeapi.Status(401))
	var ids []string
	for _, rid := range []string{"s-drop", "s-500", "s-reset", "s-401", "s-ok"} {
		r := e.do("POST", "/v1/intents", secretAdmin, submitBodyJSON("social_post", "acct_1", rid, `{"body":"secret test `+rid+`"}`))
		if r.code != http.StatusCreated {
			t.Fatalf("submit %s: %d %s", rid, r.code, r.body)
		}
		ids = append(ids, r.str(t, "intent_id"))
		e.do("POST", "/v1/intents", secretAdmin, submitBodyJSON("social_post", "acct_1", rid, `{"body":"secret test `+rid+`"}`))
	}
	e.Settle("social_post", ids[0]) // reconciliation reads the fake with the route secret
	manual := e.manualIntent("s-manual")
	e.do("POST", "/v1/intents/"+manual+"/resolve", secretOperator, `{"reason":"checked","resolution":"abandoned"}`)
	e.do("POST", "/v1/intents", secretAdmin, submitBodyJSON("social_approval", "acct_1", "s-approve", `{"body":"approve"}`))

	// Refusals of every kind, some carrying (parts of) secrets in the header.
	e.do("POST", "/v1/intents", secretAdmin, submitBodyJSON("social_post", "acct_1", "s-drop", `{"body":"other"}`))
	e.do("POST", "/v1/intents", secretAdmin, `{"route":`)
	e.do("POST", "/v1/intents", secretAdmin+"x", submitBodyJSON("social_post", "acct_1", "s-x", `{"body":"x"}`))
	e.do("GET", "/v1/intents", "Bearer "+secretAdmin, "")
	e.do("GET", "/v1/intents", "", "", "Authorization", "Basic "+secretReader)
	e.do("GET", "/v1/intents", secretSubmitter, "")
	e.do("GET", "/metrics", secretRouteLtd, "")
	e.do("POST", "/v1/intents/"+ids[0]+"/approve", secretOperator, `{"reason":"no"}`)
	e.do("POST", "/v1/intents", secretAdmin, submitBodyJSON("social_post", "acct_1", "s-dry", `{"body":"dry"}`, "dry_run", "true"))

	// Reads.
	e.CatchUp()
	for _, id := range append(ids, manual) {
		e.do("GET", "/v1/intents/"+id, secretReader, "")
	}
	e.do("GET", "/v1/intents?limit=1000", secretReader, "")
	e.do("GET", "/metrics", secretReader, "")
	e.do("GET", "/readyz", "", "")
	e.do("GET", "/console", "", "")
	e.do("GET", "/openapi.json", "", "")

	// Sanity: the fake really was called with the route secret, and the
	// transcript and logs are not empty.
	if e.Social.Writes() < 5 {
		t.Fatalf("writes %d", e.Social.Writes())
	}
	responses := e.seen.String()
	logs := e.Logs.String()
	if len(responses) < 1000 || !strings.Contains(logs, `"status":401`) {
		t.Fatalf("too little captured: %d bytes of responses, logs:\n%s", len(responses), logs)
	}

	// Every raw message on the stream, body and headers.
	var stream strings.Builder
	info, err := e.Store.Stream().Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := e.Store.Stream().GetMsg(context.Background(), seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		stream.WriteString(m.Subject)
		stream.Write(m.Data)
		for k, vs := range m.Header {
			stream.WriteString(k + strings.Join(vs, ","))
		}
	}
	if info.State.Msgs < 20 {
		t.Fatalf("only %d events on the log", info.State.Msgs)
	}
	dump, err := e.Proj.Dump(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	for where, text := range map[string]string{"responses": responses, "logs": logs, "stream": stream.String(), "projector": dump} {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("secret %s…  appears in %s", s[:8], where)
			}
			// Not even a distinctive part of it.
			if strings.Contains(text, s[len(s)-12:]) {
				t.Errorf("the tail of secret %s… appears in %s", s[:8], where)
			}
		}
		if strings.Contains(strings.ToLower(text), "authorization: bearer") {
			t.Errorf("an Authorization header appears in %s", where)
		}
	}
	// The operator recorded is the token's name.
	if !strings.Contains(stream.String(), `"by":"ops"`) {
		t.Error("the operator's name is not on the log")
	}
}
