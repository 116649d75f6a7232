package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/mcp"
	"github.com/settle-dev/settle/service"
)

// The cross-tenant contract: one suite of attempts by tenant B on tenant
// A's intents, run per transport (REST, MCP over /mcp, MCP over stdio
// as settle mcp serves it), expecting the
// same answer on each. An operation a transport does not have (a list
// over MCP) is skipped there; a tool the caller is not offered counts as
// forbidden, as a missing scope does over REST.

const (
	secretAcme   = "tok_acme_4b8e2c6a1f9d3e7b5c0a"
	secretGlobex = "tok_globex_7e2b9d4a1c8f3e6b5a0d"
)

func tenantTokens() []api.Token {
	all := []string{api.ScopeSubmit, api.ScopeRead, api.ScopeOperate}
	return append(testTokens(),
		api.Token{Name: "acme-agent", Secret: secretAcme, Tenant: "acme", Scopes: all},
		api.Token{Name: "globex-agent", Secret: secretGlobex, Tenant: "globex", Scopes: all},
	)
}

// tenantOf is the tenant of a test token (what its holder knows of itself).
var tenantOf = map[string]string{secretAcme: "acme", secretGlobex: "globex"}

// verdict is an answer reduced to what every transport can say.
type verdict string

const (
	vOK          verdict = "ok"
	vReplayed    verdict = "replayed"
	vNotFound    verdict = "not_found"
	vForbidden   verdict = "forbidden"
	vMismatch    verdict = "payload_mismatch"
	vNotAllowed  verdict = "not_allowed"
	vInvalid     verdict = "invalid"
	vUnavailable verdict = "unavailable"
	vNA          verdict = "n/a" // the transport has no such operation
)

type outcome struct {
	v     verdict
	id    string    // the intent answered about
	state fsm.State // its state
	ids   []string  // the intents a list or pending shows
	raw   string
}

// transport performs the operations of the contract as one protocol's
// client.
type transport interface {
	name() string
	submit(t *testing.T, tok, route, account, task, step, body string) outcome
	get(t *testing.T, tok, id string) outcome
	status(t *testing.T, tok, route, account, task, step string) outcome
	list(t *testing.T, tok string) outcome
	pending(t *testing.T, tok string) outcome
	approve(t *testing.T, tok, id string) outcome
	abandon(t *testing.T, tok, id string) outcome
	resolve(t *testing.T, tok, id, resolution string) outcome
	metrics(t *testing.T, tok string) outcome
}

// --- REST ---

type restTransport struct{ e *env }

func (r restTransport) name() string { return "rest" }

func (r restTransport) do(t *testing.T, method, path, tok string, body any) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, r.e.http.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func (r restTransport) intent(t *testing.T, method, path, tok string, body any) outcome {
	t.Helper()
	code, hdr, b := r.do(t, method, path, tok, body)
	var m struct {
		IntentID string    `json:"intent_id"`
		State    fsm.State `json:"state"`
		Type     string    `json:"type"`
	}
	_ = json.Unmarshal(b, &m)
	o := outcome{id: m.IntentID, state: m.State, raw: string(b)}
	switch {
	case code == http.StatusOK && hdr.Get("Idempotent-Replayed") == "true":
		o.v = vReplayed
	case code == http.StatusOK || code == http.StatusCreated:
		o.v = vOK
	default:
		o.v, o.id, o.state = restVerdict(code, m.Type), "", ""
	}
	return o
}

func restVerdict(code int, problemType string) verdict {
	switch {
	case code == http.StatusNotFound:
		return vNotFound
	case code == http.StatusForbidden:
		return vForbidden
	case code == http.StatusUnprocessableEntity && strings.Contains(problemType, "payload-mismatch"):
		return vMismatch
	case code == http.StatusConflict:
		return vNotAllowed
	case code == http.StatusBadRequest:
		return vInvalid
	case code == http.StatusServiceUnavailable:
		return vUnavailable
	}
	return verdict("http " + http.StatusText(code))
}

func (r restTransport) submit(t *testing.T, tok, route, account, task, step, body string) outcome {
	return r.intent(t, "POST", "/v1/intents", tok, map[string]any{"route": route, "account": account,
		"request_id": events.ToolKey(task, step, ""), "payload": map[string]any{"body": body}})
}

func (r restTransport) get(t *testing.T, tok, id string) outcome {
	return r.intent(t, "GET", "/v1/intents/"+id, tok, nil)
}

// status by task and step: a REST client names the intent by the id its
// own tenant, route, account and key make.
func (r restTransport) status(t *testing.T, tok, route, account, task, step string) outcome {
	return r.get(t, tok, events.ScopedIntentID(tenantOf[tok], route, account, events.ToolKey(task, step, "")))
}

func (r restTransport) listQuery(t *testing.T, tok, query string) outcome {
	t.Helper()
	code, _, b := r.do(t, "GET", "/v1/intents?"+query, tok, nil)
	if code != http.StatusOK {
		var m struct{ Type string }
		_ = json.Unmarshal(b, &m)
		return outcome{v: restVerdict(code, m.Type), raw: string(b)}
	}
	var page struct {
		Items []struct {
			IntentID string `json:"intent_id"`
		} `json:"items"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatalf("list: %v: %s", err, b)
	}
	o := outcome{v: vOK, raw: string(b), ids: []string{}}
	for _, it := range page.Items {
		o.ids = append(o.ids, it.IntentID)
	}
	return o
}

func (r restTransport) list(t *testing.T, tok string) outcome {
	r.e.CatchUp()
	return r.listQuery(t, tok, "limit=1000")
}

func (r restTransport) pending(t *testing.T, tok string) outcome {
	r.e.CatchUp()
	a := r.listQuery(t, tok, "state=awaiting_approval")
	if a.v != vOK {
		return a
	}
	m := r.listQuery(t, tok, "state=manual_action")
	if m.v != vOK {
		return m
	}
	a.ids = append(a.ids, m.ids...)
	return a
}

func (r restTransport) approve(t *testing.T, tok, id string) outcome {
	return r.intent(t, "POST", "/v1/intents/"+id+"/approve", tok, map[string]any{"reason": "cross-tenant contract"})
}

func (r restTransport) abandon(t *testing.T, tok, id string) outcome {
	return r.intent(t, "POST", "/v1/intents/"+id+"/abandon", tok, map[string]any{"reason": "cross-tenant contract"})
}

func (r restTransport) resolve(t *testing.T, tok, id, resolution string) outcome {
	return r.intent(t, "POST", "/v1/intents/"+id+"/resolve", tok, map[string]any{"resolution": resolution, "reason": "cross-tenant contract"})
}

func (r restTransport) metrics(t *testing.T, tok string) outcome {
	code, _, b := r.do(t, "GET", "/metrics", tok, nil)
	if code == http.StatusOK {
		return outcome{v: vOK}
	}
	return outcome{v: restVerdict(code, ""), raw: string(b)}
}

// --- MCP ---

// mcpTransport calls the tools over a session per token.
type mcpTransport struct {
	label   string
	session func(tok string) *sdk.ClientSession
	e       *env
}

func (m mcpTransport) name() string { return m.label }

func (m mcpTransport) call(t *testing.T, tok, tool string, args map[string]any) (*sdk.CallToolResult, outcome) {
	t.Helper()
	res, err := m.session(tok).CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		// A tool the caller is not offered: as a scope it lacks.
		return nil, outcome{v: vForbidden, raw: err.Error()}
	}
	b, _ := json.Marshal(res.StructuredContent)
	if res.IsError {
		var te mcp.ToolError
		_ = json.Unmarshal(b, &te)
		v := verdict(te.Error.Code)
		switch te.Error.Code {
		case mcp.CodeInvalidArgument:
			v = vInvalid
		case mcp.CodeConflict:
			v = vNotAllowed
		}
		return nil, outcome{v: v, raw: string(b)}
	}
	return res, outcome{v: vOK, raw: string(b)}
}

func (m mcpTransport) answer(t *testing.T, tok, tool string, args map[string]any) outcome {
	t.Helper()
	res, o := m.call(t, tok, tool, args)
	if res == nil {
		return o
	}
	var a mcp.Answer
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("%s: %v: %s", tool, err, b)
	}
	o.id, o.state = a.IntentID, a.State
	if a.Replayed {
		o.v = vReplayed
	}
	return o
}

func (m mcpTransport) submit(t *testing.T, tok, route, account, task, step, body string) outcome {
	return m.answer(t, tok, mcp.SubmitToolName(route), map[string]any{"task_id": task, "step_id": step, "account": account,
		"payload": map[string]any{"body": body}})
}

func (m mcpTransport) get(t *testing.T, tok, id string) outcome {
	return m.answer(t, tok, mcp.ToolStatus, map[string]any{"intent_id": id})
}

func (m mcpTransport) status(t *testing.T, tok, route, account, task, step string) outcome {
	return m.answer(t, tok, mcp.ToolStatus, map[string]any{"route": route, "account": account, "task_id": task, "step_id": step})
}

func (m mcpTransport) list(t *testing.T, tok string) outcome { return outcome{v: vNA} }

func (m mcpTransport) pending(t *testing.T, tok string) outcome {
	m.e.CatchUp()
	res, o := m.call(t, tok, mcp.ToolPending, map[string]any{"limit": 100})
	if res == nil {
		return o
	}
	var p mcp.Pending
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("pending: %v: %s", err, b)
	}
	o.ids = []string{}
	for _, it := range p.Items {
		o.ids = append(o.ids, it.IntentID)
	}
	return o
}

func (m mcpTransport) approve(t *testing.T, tok, id string) outcome {
	return m.answer(t, tok, mcp.ToolApprove, map[string]any{"intent_id": id, "reason": "cross-tenant contract"})
}

// abandon over MCP is the resolve tool's "abandoned".
func (m mcpTransport) abandon(t *testing.T, tok, id string) outcome {
	return m.resolve(t, tok, id, "abandoned")
}

func (m mcpTransport) resolve(t *testing.T, tok, id, resolution string) outcome {
	return m.answer(t, tok, mcp.ToolResolve, map[string]any{"intent_id": id, "resolution": resolution, "reason": "cross-tenant contract"})
}

// metrics: no tool shows figures over every intent.
func (m mcpTransport) metrics(t *testing.T, tok string) outcome {
	_, o := m.call(t, tok, "metrics", nil)
	return o
}

// httpMCP is the /mcp endpoint, one session per token.
func httpMCP(e *env) transport {
	sessions := map[string]*sdk.ClientSession{}
	return mcpTransport{label: "mcp-http", e: e, session: func(tok string) *sdk.ClientSession {
		if cs, ok := sessions[tok]; ok {
			return cs
		}
		cs := e.client(tok)
		sessions[tok] = cs
		return cs
	}}
}

// stdioMCP is settle mcp's transport: one stdio session per caller, the
// caller being what the token stands for (settle mcp takes it from its
// flags: --tenant, --scopes, --accounts, --name).
func stdioMCP(e *env) transport {
	sessions := map[string]*sdk.ClientSession{}
	return mcpTransport{label: "mcp-stdio", e: e, session: func(tok string) *sdk.ClientSession {
		if cs, ok := sessions[tok]; ok {
			return cs
		}
		var c service.Caller
		for _, k := range tenantTokens() {
			if k.Secret == tok {
				c = service.Caller{Name: k.Name, Tenant: k.Tenant, Scopes: k.Scopes, Routes: k.Routes, Accounts: k.Accounts}
			}
		}
		if c.Tenant == "" {
			c.Tenant = api.DefaultTenant
		}
		cs := e.stdio(c)
		sessions[tok] = cs
		return cs
	}}
}

// stdio runs one stdio session of caller (RunStdio over pipes) until the
// test ends, and connects an SDK client to it.
func (e *env) stdio(c service.Caller) *sdk.ClientSession {
	e.t.Helper()
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- e.mcp.RunStdio(e.Ctx, c, toServer, fromServer); fromServer.Close() }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "stdio-agent", Version: "1"}, nil).
		Connect(e.Ctx, &sdk.IOTransport{Reader: toClient, Writer: fromClient}, nil)
	if err != nil {
		e.t.Fatalf("stdio connect: %v", err)
	}
	e.t.Cleanup(func() { cs.Close(); fromClient.Close(); <-done })
	return cs
}

// transports are the protocols the contract runs over, each on a fresh
// env (its own log and fake API).
var transports = []struct {
	name string
	make func(e *env) transport
}{
	{"rest", func(e *env) transport { return restTransport{e: e} }},
	{"mcp-http", httpMCP},
	{"mcp-stdio", stdioMCP},
}

func expect(t *testing.T, what string, got outcome, want ...verdict) {
	t.Helper()
	if got.v == vNA {
		return
	}
	if !slices.Contains(want, got.v) {
		t.Errorf("%s: %s, want %v (%s)", what, got.v, want, clipText(got.raw, 300))
	}
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// TestCrossTenantContract: tenant globex (B) tries every operation on
// tenant acme's (A) intents, over each transport, and gets the same
// answers: another tenant's intent does not exist for it (not found,
// never its state), B's use of A's task and step (or key) is B's own new
// intent with its own write, B's lists and pending show none of A's,
// figures over every tenant are refused, and nothing B does changes A's
// history. A's own calls are the positive controls, and an intent
// submitted over one transport is the submitter's over every other.
func TestCrossTenantContract(t *testing.T) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{tokens: tenantTokens()})
			tr := tc.make(e)
			others := []transport{restTransport{e: e}, httpMCP(e), stdioMCP(e)}
			const A, B = secretAcme, secretGlobex

			// A's intents: an automatic post, and one awaiting approval.
			post := tr.submit(t, A, "social_post", "acct_1", "task-1", "step-1", "acme's post")
			expect(t, "A submits", post, vOK)
			wantPost := events.ScopedIntentID("acme", "social_post", "acct_1", events.ToolKey("task-1", "step-1", ""))
			if post.id != wantPost {
				t.Errorf("A's intent is %s, want %s (scoped by A's tenant, route, account and key)", post.id, wantPost)
			}
			appr := tr.submit(t, A, "social_approval", "acct_1", "task-1", "step-2", "acme's approval")
			expect(t, "A submits for approval", appr, vOK)
			if appr.state != fsm.AwaitingApproval {
				t.Fatalf("A's approval intent is %s: %s", appr.state, appr.raw)
			}
			if i := e.Intent("social_post", post.id); i.Recorded.Tenant != "acme" {
				t.Errorf("A's intent is recorded under tenant %q, want acme", i.Recorded.Tenant)
			}
			// The same task and step for another account: another intent.
			other := tr.submit(t, A, "social_post", "acct_2", "task-1", "step-1", "acme's post")
			expect(t, "A submits for another account", other, vOK)
			if want := events.ScopedIntentID("acme", "social_post", "acct_2", events.ToolKey("task-1", "step-1", "")); other.id != want {
				t.Errorf("A's acct_2 intent is %s, want %s", other.id, want)
			}
			// Every transport shows A its own intent.
			for _, o := range others {
				expect(t, "A reads its own over "+o.name(), o.get(t, A, post.id), vOK)
			}
			before := map[string]int{post.id: len(e.History("social_post", post.id)), appr.id: len(e.History("social_approval", appr.id))}
			effects := e.Social.Effects()

			// B's attempts on A's intents.
			expect(t, "B gets A's intent", tr.get(t, B, post.id), vNotFound)
			expect(t, "B gets A's intent awaiting approval", tr.get(t, B, appr.id), vNotFound)
			expect(t, "B asks the status of A's task and step", tr.status(t, B, "social_post", "acct_1", "task-1", "step-1"), vNotFound)
			for _, o := range []struct {
				what string
				got  outcome
			}{
				{"B lists", tr.list(t, B)},
				{"B asks what is pending", tr.pending(t, B)},
			} {
				expect(t, o.what, o.got, vOK)
				for _, id := range []string{post.id, appr.id, other.id} {
					if slices.Contains(o.got.ids, id) {
						t.Errorf("%s: shows A's intent %s", o.what, id)
					}
				}
			}
			expect(t, "B approves A's intent", tr.approve(t, B, appr.id), vNotFound)
			expect(t, "B abandons A's intent", tr.abandon(t, B, appr.id), vNotFound)
			expect(t, "B resolves A's intent", tr.resolve(t, B, appr.id, "not_executed"), vNotFound)
			expect(t, "B reads figures over every tenant", tr.metrics(t, B), vForbidden)

			// B using A's task and step (A's key) makes B's own intents.
			same := tr.submit(t, B, "social_post", "acct_1", "task-1", "step-1", "acme's post")
			expect(t, "B submits A's task and step with A's payload", same, vOK)
			diff := tr.submit(t, B, "social_approval", "acct_1", "task-1", "step-2", "globex's own text")
			expect(t, "B submits A's task and step with another payload", diff, vOK)
			for _, o := range []outcome{same, diff} {
				if o.id == post.id || o.id == appr.id || o.id == "" {
					t.Errorf("B's submit answered intent %q (A's are %s, %s)", o.id, post.id, appr.id)
				}
			}
			if want := events.ScopedIntentID("globex", "social_post", "acct_1", events.ToolKey("task-1", "step-1", "")); same.id != want {
				t.Errorf("B's intent is %s, want %s", same.id, want)
			}
			if e.Social.Effects() != effects+1 {
				t.Errorf("effects %d, want %d (B's post is its own write)", e.Social.Effects(), effects+1)
			}
			// A's intents are as they were.
			for id, n := range before {
				route := "social_post"
				if id == appr.id {
					route = "social_approval"
				}
				if h := e.History(route, id); len(h) != n {
					t.Errorf("A's intent %s: %d events, was %d: %s", id, len(h), n, h[len(h)-1].Type)
				}
			}
			if st := e.Intent("social_approval", appr.id).State; st != fsm.AwaitingApproval {
				t.Errorf("A's approval intent is %s after B's attempts", st)
			}

			// A's positive controls: it sees, lists and decides its own.
			expect(t, "A gets its own", tr.get(t, A, appr.id), vOK)
			expect(t, "A asks the status of its task and step", tr.status(t, A, "social_post", "acct_1", "task-1", "step-1"), vOK)
			l := tr.list(t, A)
			expect(t, "A lists", l, vOK)
			if l.v == vOK && (!slices.Contains(l.ids, post.id) || slices.Contains(l.ids, same.id)) {
				t.Errorf("A's list %v: want its own %s and not B's %s", l.ids, post.id, same.id)
			}
			p := tr.pending(t, A)
			expect(t, "A asks what is pending", p, vOK)
			if !slices.Contains(p.ids, appr.id) || slices.Contains(p.ids, diff.id) {
				t.Errorf("A's pending %v: want its own %s and not B's %s", p.ids, appr.id, diff.id)
			}
			again := tr.submit(t, A, "social_post", "acct_1", "task-1", "step-1", "acme's post")
			expect(t, "A resubmits its step", again, vReplayed)
			if again.id != post.id {
				t.Errorf("A's resubmit answered %s, want %s", again.id, post.id)
			}
			expect(t, "A approves its own", tr.approve(t, A, appr.id), vOK)
			if i := e.Intent("social_approval", appr.id); i.ApprovedBy != "acme-agent" {
				t.Errorf("A's intent approved by %q", i.ApprovedBy)
			}
			expect(t, "A reads figures over every tenant", tr.metrics(t, A), vForbidden)
		})
	}
}

// TestOneActionVocabulary: the operator actions an intent allows have
// the same names over REST (the detail's actions) and MCP (pending's),
// service.Actions': "abandon", never a transport's own word for it.
func TestOneActionVocabulary(t *testing.T) {
	e := newEnv(t, envOptions{})
	var a mcp.Answer
	call(t, e.client(secretAgent), "submit_social_approval", submitArgs("task-v", "step-1", "needs a yes"), &a)
	e.CatchUp()
	var p mcp.Pending
	call(t, e.client(secretOperator), mcp.ToolPending, nil, &p)
	if len(p.Items) != 1 || p.Items[0].IntentID != a.IntentID {
		t.Fatalf("pending: %+v", p)
	}
	r := restTransport{e: e}
	code, _, body := r.do(t, "GET", "/v1/intents/"+a.IntentID, secretOperator, nil)
	var d struct {
		Actions []string `json:"actions"`
	}
	if err := json.Unmarshal(body, &d); err != nil || code != http.StatusOK {
		t.Fatalf("GET: %d %s", code, body)
	}
	want := []string{service.ActionApprove, service.ActionAbandon}
	if !slices.Equal(p.Items[0].Actions, want) || !slices.Equal(d.Actions, want) {
		t.Fatalf("actions over MCP %v, over REST %v, want %v", p.Items[0].Actions, d.Actions, want)
	}
}

// TestAnotherTenantsHeldIntentIsNotFound: an intent whose history cannot
// be folded — one with an event this version cannot place, or one the
// log lost whole and holds after an accepted loss (its hold marker only)
// — is still its tenant's. Another tenant that names it by id, reading it
// or acting on it, is told there is no such intent, as for any other
// intent of another tenant, never that it is held (which shows that it
// exists, and the loss); its own tenant is told, and nothing is
// appended.
func TestAnotherTenantsHeldIntentIsNotFound(t *testing.T) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{tokens: tenantTokens()})
			tr := tc.make(e)
			ctx := context.Background()
			const A, B = secretAcme, secretGlobex

			// A's intent awaiting approval, known to the views, then an
			// event out of order on its subject: unreadable.
			appr := tr.submit(t, A, "social_approval", "acct_1", "task-u", "step-1", "acme's approval")
			expect(t, "A submits", appr, vOK)
			fine := tr.submit(t, A, "social_approval", "acct_1", "task-u", "step-3", "acme's other approval")
			expect(t, "A submits another", fine, vOK)
			e.CatchUp()
			h, err := e.Store.Load(ctx, "social_approval", appr.id)
			if err != nil {
				t.Fatal(err)
			}
			planted := events.New(appr.id, uint64(len(h.Events))+5, e.Clock.Now(), "planted", "",
				&events.ApprovalRequiredData{For: "first_write", Reason: "planted"})
			if _, err := e.Store.Append(ctx, "social_approval", planted, h.LastSeq); err != nil {
				t.Fatal(err)
			}
			// A's intent the log lost whole: its hold marker only.
			lost := events.ScopedIntentID("acme", "social_post", "acct_1", events.ToolKey("task-u", "step-2", ""))
			hold := events.NewHold(lost, []uint64{1, 2}, []uint64{10, 11}, [][2]uint64{{9, 20}}, e.Clock.Now(), "test", "a block file was lost.")
			if ok, err := ledger.MarkHeld(ctx, e.Node.JS, "SETTLE_INTENTS", "social_post", hold); err != nil || !ok {
				t.Fatalf("mark: %v %v", ok, err)
			}
			// B's own intents whose request ids read like A's intent ids:
			// a search of B's views by those ids finds B's intents, which
			// are not the ones named.
			for _, id := range []string{appr.id, lost} {
				o := restTransport{e: e}.intent(t, "POST", "/v1/intents", B, map[string]any{"route": "social_post",
					"account": "acct_1", "request_id": id, "payload": map[string]any{"body": "globex's post"}})
				expect(t, "B submits a request id like A's intent id", o, vOK)
			}
			e.CatchUp()
			msgs := e.StreamLen()

			for _, id := range []string{appr.id, lost} {
				for _, o := range []struct {
					what string
					got  outcome
				}{
					{"B gets A's held intent", tr.get(t, B, id)},
					{"B approves A's held intent", tr.approve(t, B, id)},
					{"B abandons A's held intent", tr.abandon(t, B, id)},
					{"B resolves A's held intent", tr.resolve(t, B, id, "not_executed")},
				} {
					expect(t, o.what, o.got, vNotFound)
					if strings.Contains(o.got.raw, "held") || strings.Contains(o.got.raw, "lost") || strings.Contains(o.got.raw, "fold") {
						t.Errorf("%s: the answer tells of the hold: %s", o.what, clipText(o.got.raw, 300))
					}
				}
			}
			// A is told its intent's history cannot be read (409 over
			// REST, held over MCP), never that it does not exist.
			expect(t, "A gets its unreadable intent", tr.get(t, A, appr.id), vNotAllowed, verdict(mcp.CodeHeld))
			// Acting on it is refused as held too, never "unavailable"
			// (which says calling again is safe and useful).
			expect(t, "A approves its unreadable intent", tr.approve(t, A, appr.id), vNotAllowed, verdict(mcp.CodeHeld))
			expect(t, "A resolves its unreadable intent", tr.resolve(t, A, appr.id, "abandoned"), vNotAllowed, verdict(mcp.CodeHeld))
			// What waits for A is still listed: one history that cannot
			// be folded does not fail the whole list.
			p := tr.pending(t, A)
			expect(t, "A asks what is pending", p, vOK)
			if p.v == vOK && !slices.Contains(p.ids, fine.id) {
				t.Errorf("A's pending %v: want its %s", p.ids, fine.id)
			}
			if n := e.StreamLen(); n != msgs {
				t.Errorf("the stream holds %d messages, had %d: something was appended", n, msgs)
			}
		})
	}
}
