package mcp_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/mcp"
)

func toolNames(t testing.TB, cs *sdk.ClientSession) map[string]*sdk.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*sdk.Tool{}
	for _, tl := range res.Tools {
		m[tl.Name] = tl
	}
	return m
}

// TestToolsFollowScopesAndAnnotationsAreTruthful: each token sees exactly
// the tools its scopes allow; annotations say what each tool does; the
// submit tool's payload schema is the route's.
func TestToolsFollowScopesAndAnnotationsAreTruthful(t *testing.T) {
	e := newEnv(t, envOptions{})
	want := map[string][]string{
		secretAgent:     {"pending", "status", "submit_social_approval", "submit_social_post"},
		secretReader:    {"pending", "status"},
		secretOperator:  {"approve", "pending", "resolve", "status"},
		secretSubmitter: {"submit_social_approval", "submit_social_post"},
		secretAcctLtd:   {"approve", "pending", "resolve", "status", "submit_social_approval", "submit_social_post"},
	}
	for tok, names := range want {
		tools := toolNames(t, e.client(tok))
		var got []string
		for n := range tools {
			got = append(got, n)
		}
		slices.Sort(got)
		if !slices.Equal(got, names) {
			t.Fatalf("token %s…: tools %v, want %v", tok[:8], got, names)
		}
	}
	tools := toolNames(t, e.client(secretAcctLtd))
	for name, tl := range tools {
		a := tl.Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Fatalf("%s: annotations %+v", name, a)
		}
		switch {
		case strings.HasPrefix(name, "submit_"):
			// The social route POSTs: it creates, never changes what exists.
			if a.ReadOnlyHint || !a.IdempotentHint || *a.DestructiveHint || !*a.OpenWorldHint {
				t.Fatalf("%s: annotations %+v", name, a)
			}
		case name == "status" || name == "pending":
			if !a.ReadOnlyHint || *a.DestructiveHint || *a.OpenWorldHint {
				t.Fatalf("%s: annotations %+v", name, a)
			}
		default:
			if a.ReadOnlyHint || !*a.DestructiveHint {
				t.Fatalf("%s: annotations %+v", name, a)
			}
		}
	}
	// The submit tool's payload is the route's schema; account is fixed by
	// the token's only account.
	var in struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
		Additional bool                       `json:"additionalProperties"`
	}
	b, _ := json.Marshal(tools["submit_social_post"].InputSchema)
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	var payload, routeSchema any
	_ = json.Unmarshal(in.Properties["payload"], &payload)
	_ = json.Unmarshal(e.Routes[0].Adapter.(mcp.PayloadSchemer).PayloadSchema(), &routeSchema)
	pb, _ := json.Marshal(payload)
	rb, _ := json.Marshal(routeSchema)
	if string(pb) != string(rb) || !strings.Contains(string(pb), `"body"`) {
		t.Fatalf("payload schema %s, route's %s", pb, rb)
	}
	if in.Additional || !slices.Equal(in.Required, []string{"task_id", "step_id", "payload"}) {
		t.Fatalf("submit schema: required %v, additionalProperties %v", in.Required, in.Additional)
	}
	if !strings.Contains(string(in.Properties["account"]), `"acct_other"`) {
		t.Fatalf("account of a limited token: %s", in.Properties["account"])
	}
}

// TestTokenWithoutOperateCannotApproveOrResolve: approve and resolve are
// not offered to a token without the operate scope, and calling them
// anyway records nothing; an operator token approves, recorded under its
// name.
func TestTokenWithoutOperateCannotApproveOrResolve(t *testing.T) {
	e := newEnv(t, envOptions{})
	agent := e.client(secretAgent)
	var a mcp.Answer
	res := call(t, agent, "submit_social_approval", submitArgs("task-a", "step-1", "needs a yes"), &a)
	if res.IsError || a.Outcome != mcp.OutcomeAwaitingApproval || a.State != fsm.AwaitingApproval {
		t.Fatalf("submit on an approval route: %s", text(res))
	}
	before := e.StreamLen()
	for _, tok := range []string{secretAgent, secretReader, secretSubmitter} {
		cs := e.client(tok)
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"approve", map[string]any{"intent_id": a.IntentID, "reason": "I approve my own write"}},
			{"resolve", map[string]any{"intent_id": a.IntentID, "resolution": "abandoned", "reason": "drop it"}},
		} {
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: c.tool, Arguments: c.args})
			if err == nil && !res.IsError {
				t.Fatalf("token %s… called %s: %s", tok[:8], c.tool, text(res))
			}
		}
	}
	if e.StreamLen() != before || e.Intent("social_approval", a.IntentID).State != fsm.AwaitingApproval {
		t.Fatalf("a token without operate changed the intent: %d events (was %d), state %s", e.StreamLen(), before,
			e.Intent("social_approval", a.IntentID).State)
	}
	if e.Social.Writes() != 0 {
		t.Fatalf("%d POSTs before approval", e.Social.Writes())
	}

	// An operator sees it pending and approves it; the decision names it.
	ops := e.client(secretOperator)
	e.CatchUp()
	var p mcp.Pending
	call(t, ops, mcp.ToolPending, nil, &p)
	if len(p.Items) != 1 || p.Items[0].IntentID != a.IntentID || !slices.Contains(p.Items[0].Actions, "approve") {
		t.Fatalf("pending: %+v", p)
	}
	var r mcp.Pending
	call(t, e.client(secretReader), mcp.ToolPending, nil, &r)
	if len(r.Items) != 1 || len(r.Items[0].Actions) != 0 {
		t.Fatalf("pending for a reader (no operate): %+v", r)
	}
	res = call(t, ops, mcp.ToolApprove, map[string]any{"intent_id": a.IntentID, "reason": "looks right"}, &a)
	if res.IsError || a.State != fsm.ApprovedState {
		t.Fatalf("approve: %s", text(res))
	}
	if i := e.Intent("social_approval", a.IntentID); i.ApprovedBy != "ops" {
		t.Fatalf("approved by %q", i.ApprovedBy)
	}
	// A second approval is refused by the lifecycle, naming the state.
	var te mcp.ToolError
	res = call(t, ops, mcp.ToolApprove, map[string]any{"intent_id": a.IntentID, "reason": "again"}, &te)
	if !res.IsError || te.Error.Code != mcp.CodeNotAllowed || te.Intent == nil || te.Intent.State != fsm.ApprovedState {
		t.Fatalf("second approve: %s", text(res))
	}
	// The reconciler makes the approved write; the agent waits for it.
	e.RunReconciler("w1")
	res = call(t, agent, mcp.ToolStatus, map[string]any{"intent_id": a.IntentID, "wait_seconds": 45}, &a)
	if res.IsError || a.Outcome != mcp.OutcomeConfirmed || e.Social.Effects() != 1 {
		t.Fatalf("after approval: %s (effects %d)", text(res), e.Social.Effects())
	}
	// A token that may submit but not read learns the outcome of a replay,
	// not its receipt.
	var blind mcp.Answer
	res = call(t, e.client(secretSubmitter), "submit_social_approval", submitArgs("task-a", "step-1", "needs a yes"), &blind)
	if res.IsError || !blind.Replayed || blind.Outcome != mcp.OutcomeConfirmed || blind.Receipt != nil {
		t.Fatalf("replay to a submit-only token: %s", text(res))
	}
}

// TestAccountLimitedTokenSeesOnlyItsAccount: a token limited to one
// account cannot write as another, nor see or decide another account's
// intents, and is told nothing about them.
func TestAccountLimitedTokenSeesOnlyItsAccount(t *testing.T) {
	e := newEnv(t, envOptions{})
	var a mcp.Answer
	call(t, e.client(secretAgent), "submit_social_approval", submitArgs("task-l", "step-1", "acct_1 only"), &a)
	e.CatchUp()
	ltd := e.client(secretAcctLtd)
	before := e.StreamLen()
	var te mcp.ToolError
	res := call(t, ltd, "submit_social_post", submitArgs("task-l", "step-2", "as acct_1"), &te)
	if !res.IsError || te.Error.Code != mcp.CodeForbidden || te.Error.Field != "account" {
		t.Fatalf("submit as another account: %s", text(res))
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"status", map[string]any{"intent_id": a.IntentID}},
		{"status", map[string]any{"route": "social_approval", "task_id": "task-l", "step_id": "step-1"}},
		{"approve", map[string]any{"intent_id": a.IntentID, "reason": "not mine"}},
		{"resolve", map[string]any{"intent_id": a.IntentID, "resolution": "abandoned", "reason": "not mine"}},
	} {
		res := call(t, ltd, c.tool, c.args, &te)
		if !res.IsError || te.Error.Code != mcp.CodeNotFound || te.Intent != nil || strings.Contains(text(res), "awaiting") {
			t.Fatalf("%s %v by an account-limited token: %s", c.tool, c.args, text(res))
		}
	}
	var p mcp.Pending
	call(t, ltd, mcp.ToolPending, nil, &p)
	if len(p.Items) != 0 {
		t.Fatalf("pending shows another account's intent: %+v", p)
	}
	if e.StreamLen() != before {
		t.Fatalf("refused calls appended %d events", e.StreamLen()-before)
	}
	// Its own account is the default: no account argument needed.
	var own mcp.Answer
	res = call(t, ltd, "submit_social_post", map[string]any{"task_id": "task-l", "step_id": "step-3", "payload": map[string]any{"body": "mine"}}, &own)
	if res.IsError || own.Account != "acct_other" {
		t.Fatalf("submit with the default account: %s", text(res))
	}
}

// TestEndpointNeedsAValidToken: without a token, or with a wrong one, the
// endpoint answers 401 before any MCP message is read.
func TestEndpointNeedsAValidToken(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, tok := range []string{"", "tok_wrong_0000000000000000000", secretAgent + "x"} {
		c := sdk.NewClient(&sdk.Implementation{Name: "intruder", Version: "1"}, nil)
		_, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: e.http.URL + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{token: tok}}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
		if err == nil {
			t.Fatalf("token %q connected", tok)
		}
		req, _ := http.NewRequest("POST", e.http.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("token %q: %d %q", tok, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
}

// TestNeedsHumanThenResolve: a write settle cannot prove (two identical
// posts behind a dropped response) answers needs_human, never a retry;
// an operator resolves it through the resolve tool, and bad resolutions
// are refused naming the argument.
func TestNeedsHumanThenResolve(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.Social.Next(fakeapi.Duplicate().Dropped())
	agent := e.client(secretAgent)
	var a mcp.Answer
	call(t, agent, "submit_social_post", submitArgs("task-h", "step-1", "twice?"), &a)
	if i := e.Settle("social_post", a.IntentID); i.State != fsm.ManualAction {
		t.Fatalf("state %s", i.State)
	}
	res := call(t, agent, mcp.ToolStatus, map[string]any{"intent_id": a.IntentID}, &a)
	if res.IsError || a.Outcome != mcp.OutcomeNeedsHuman || a.Reason == "" || !a.Settled {
		t.Fatalf("status of a manual action: %s", text(res))
	}
	e.CatchUp()
	ops := e.client(secretOperator)
	var p mcp.Pending
	call(t, ops, mcp.ToolPending, map[string]any{"route": "social_post"}, &p)
	if len(p.Items) != 1 || p.Items[0].Outcome != mcp.OutcomeNeedsHuman || !slices.Contains(p.Items[0].Actions, "resolve_confirmed") {
		t.Fatalf("pending: %+v", p)
	}
	before := e.StreamLen()
	for _, c := range []struct {
		args  map[string]any
		field string
	}{
		{map[string]any{"intent_id": a.IntentID, "resolution": "confirmed", "reason": "found it"}, "external_id"},
		{map[string]any{"intent_id": a.IntentID, "resolution": "confirmed", "reason": "found it", "external_id": "p_1", "live_url": "https://u:p@x.example/p"}, "live_url"},
		{map[string]any{"intent_id": a.IntentID, "resolution": "maybe", "reason": "?"}, "resolution"},
		{map[string]any{"intent_id": a.IntentID, "resolution": "abandoned", "reason": " "}, "reason"},
		{map[string]any{"intent_id": "in_nope", "resolution": "abandoned", "reason": "x"}, "intent_id"},
	} {
		var te mcp.ToolError
		res := call(t, ops, mcp.ToolResolve, c.args, &te)
		if !res.IsError || te.Error.Field != c.field {
			t.Fatalf("%v: %s", c.args, text(res))
		}
	}
	if e.StreamLen() != before {
		t.Fatal("a refused resolve appended")
	}
	posts := e.Social.Posts()
	res = call(t, ops, mcp.ToolResolve, map[string]any{"intent_id": a.IntentID, "resolution": "confirmed",
		"reason": "kept the first post, deleted the copy", "external_id": posts[0].ID, "live_url": posts[0].URL}, &a)
	if res.IsError || a.Outcome != mcp.OutcomeConfirmed || a.Receipt == nil || a.Receipt.ExternalID != posts[0].ID || a.Receipt.Source != "operator" {
		t.Fatalf("resolve: %s", text(res))
	}
	if e.Social.Writes() != 1 {
		t.Fatalf("%d POSTs", e.Social.Writes())
	}
}

// TestEndpointRefusesContentCodings: /mcp reads bodies as sent, as the
// API does: a request labelled with a content coding is refused (415,
// Accept-Encoding: identity) before any message is read, compressed or
// not; identity is served.
func TestEndpointRefusesContentCodings(t *testing.T) {
	e := newEnv(t, envOptions{})
	const msg = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(msg))
	_ = zw.Close()
	for _, c := range []struct {
		body, encoding string
		code           int
	}{
		{msg, "gzip", http.StatusUnsupportedMediaType},
		{gz.String(), "gzip", http.StatusUnsupportedMediaType},
		{msg, "identity, br", http.StatusUnsupportedMediaType},
		{msg, "identity", http.StatusOK},
	} {
		req, _ := http.NewRequest("POST", e.http.URL+"/mcp", strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+secretAgent)
		req.Header.Set("Content-Encoding", c.encoding)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Fatalf("%q: %d %s", c.encoding, resp.StatusCode, b)
		}
		if c.code == http.StatusUnsupportedMediaType && (resp.Header.Get("Accept-Encoding") != "identity" || !strings.Contains(string(b), "Content-Encoding")) {
			t.Fatalf("%q: Accept-Encoding %q, %s", c.encoding, resp.Header.Get("Accept-Encoding"), b)
		}
	}
}
