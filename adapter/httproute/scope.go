package httproute

import (
	"cmp"
	"context"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
)

// DefaultIdentityRefresh is how long a resolved identity is trusted when
// identity.refresh is not set.
const DefaultIdentityRefresh = 10 * time.Minute

// ForIntent returns the adapter to make one intent's reads with: its read
// templates may use the intent's values (parent, intent_id, request_id,
// idempotency_key, account, payload fields). The copy shares everything
// else with a, including the identity cache.
func (a *Adapter) ForIntent(s adapter.ReadScope) adapter.Adapter {
	c := *a
	s.Payload = slices.Clone(s.Payload)
	c.scope = &s
	return &c
}

// SearchKey is the intent's values the search uses, rendered as a key:
// intents of one account whose keys are equal list the same objects. ""
// when the search uses none (account and window only).
func (a *Adapter) SearchKey(s adapter.ReadScope) string {
	if a.search == nil || len(a.search.needs) == 0 {
		return ""
	}
	vars, _ := scopeValues(&s)
	var b strings.Builder
	for _, n := range a.search.needs {
		b.WriteString(n)
		b.WriteByte('=')
		if n == varPayload {
			b.Write(s.Payload)
		} else {
			b.WriteString(vars[n])
		}
		b.WriteByte(0)
	}
	return b.String()
}

// scopeValues are the template variables of a read scope.
func scopeValues(s *adapter.ReadScope) (map[string]string, any) {
	vars := map[string]string{
		varAccount: s.Account, varRequestID: s.RequestID, varIntentID: s.IntentID,
		varIdempotencyKey: s.IdempotencyKey, varParent: s.ParentExternalID,
	}
	var payload any
	if len(s.Payload) > 0 {
		if v, err := decodeJSON(s.Payload); err == nil {
			payload = v
		}
	}
	return vars, payload
}

// readScope builds the scope of a read: base and what the call gives,
// and the intent's values when the adapter is intent-scoped. A read whose
// templates need an intent value the adapter does not have is refused
// (what names the read: "search", "get", "status").
func (a *Adapter) readScope(what string, needs []string, given map[string]string) (*scope, error) {
	s := &scope{vars: map[string]string{varBase: a.base}}
	if a.scope != nil {
		vars, payload := scopeValues(a.scope)
		maps.Copy(s.vars, vars)
		if payload != nil {
			s.payload, s.hasPay = payload, true
		}
	} else if len(needs) > 0 {
		return nil, a.errorf("%s: the route's %s uses {{%s}}, which only a read made for an intent has (adapter.ForIntent)", what, what, strings.Join(needs, "}}, {{"))
	}
	for k, v := range given {
		if v != "" || s.vars[k] == "" {
			s.vars[k] = v
		}
	}
	if slices.Contains(needs, varPayload) && !s.hasPay {
		return nil, a.errorf("%s: the route's %s uses payload values, and the intent's payload is not valid JSON", what, what)
	}
	return s, nil
}

// ReadbackChecks are the checks the route declares (readback.checks):
// default url, author, payload, parent, visibility.
func (a *Adapter) ReadbackChecks() []string {
	if a.readback != nil && a.readback.checks != nil {
		return slices.Clone(a.readback.checks)
	}
	return slices.Clone(allChecks)
}

// --- identity ---

type identitySpec struct {
	method  string // GET or POST
	body    []byte // the POST's JSON body (a GraphQL query)
	url     *urlTemplate
	id      *template
	expect  []expectation
	require []jpath
	refresh time.Duration
}

type identityCache struct {
	mu sync.Mutex
	id string
	at time.Time
}

// Identity is the identity the route's credential acts as (identity.id of
// the identity read), resolved on first use and again after
// identity.refresh. "" without an identity section. A failed read is an
// error wrapping a *adapter.CallError; nothing is cached then.
func (a *Adapter) Identity(ctx context.Context) (string, error) {
	if a.identity == nil {
		return "", nil
	}
	now := a.now()
	a.ident.mu.Lock()
	if a.ident.id != "" && now.Sub(a.ident.at) < a.identity.refresh && !now.Before(a.ident.at) {
		id := a.ident.id
		a.ident.mu.Unlock()
		return id, nil
	}
	a.ident.mu.Unlock()
	id, err := a.readIdentity(ctx)
	if err != nil {
		return "", err
	}
	a.ident.mu.Lock()
	a.ident.id, a.ident.at = id, now
	a.ident.mu.Unlock()
	return id, nil
}

func (a *Adapter) readIdentity(ctx context.Context) (string, error) {
	is := a.identity
	s := &scope{vars: map[string]string{varBase: a.base}}
	r, ok, err := a.request(is.url, s, false)
	if err != nil || !ok {
		return "", a.errorf("identity: the identity URL cannot be built")
	}
	if r.tool == "" {
		r.method, r.body = cmp.Or(is.method, http.MethodGet), is.body
	}
	doc, code, err := a.read(ctx, r, nil, is.expect, is.require, &scope{vars: s.vars}, "identity")
	if errors.Is(err, adapter.ErrNotFound) {
		return "", a.errorf("identity: %w", &adapter.CallError{Class: adapter.Rejected, Code: "identity_not_found", StatusCode: code,
			Message: "the identity read answered not found"})
	}
	if err != nil {
		return "", err
	}
	id := renderText(is.id, &scope{vars: s.vars, doc: doc, hasDoc: true})
	if id == "" {
		return "", a.errorf("identity: %w", adapter.Unparseable(code, "the identity read"))
	}
	// An identity that is (part of) a credential would end up in errors
	// and receipts: a hostile or broken API is refused, not echoed.
	for _, v := range a.credentials() {
		if strings.Contains(id, v) || (len(id) >= 8 && strings.Contains(v, id)) {
			return "", a.errorf("identity: %w", &adapter.CallError{Class: adapter.Unknown, Code: "identity_is_a_credential", StatusCode: code,
				Message: "the identity read answered a route credential"})
		}
	}
	return id, nil
}

// CheckAccount refuses an account that is not the identity the route's
// credential acts as: a write would be authored by someone else, and no
// search or readback could tie it to the intent. The error wraps
// adapter.ErrAccountMismatch and carries a hint. Without an identity
// section every account passes; a failed identity read is an error that
// does not wrap ErrAccountMismatch (the caller cannot know yet).
func (a *Adapter) CheckAccount(ctx context.Context, account string) error {
	if a.identity == nil {
		return nil
	}
	id, err := a.Identity(ctx)
	if err != nil {
		return err
	}
	if account != id {
		return errors.WithHint(
			errors.Wrapf(adapter.ErrAccountMismatch, "httproute: route %s: account %q: the credential acts as %q", a.name, account, id),
			"submit the intent with account "+id+" (the credential's identity), or use a route whose credential acts as "+account)
	}
	return nil
}

// --- correlation ---

type corrSpec struct {
	marker *template
	re     *regexp.Regexp
	whole  bool // the marker is the whole value of its field
	// first: the write puts {{marker}} before the rest of its text, so
	// ours is the first marker there (text after it, a quote, may hold
	// another); otherwise it is the last.
	first bool
	read  jpath
}

// render is the marker that names intentID.
func (c *corrSpec) render(intentID string) string {
	return renderText(c.marker, &scope{vars: map[string]string{varIntentID: intentID}})
}

// extract finds the marker the write put in the text of the item's read
// field — the first when the write puts it before the rest of the text,
// else the last (text next to it may quote another) — returns the intent
// id it names, and removes the marker from the item (so that the payload
// mapped from the item does not hold it).
func (c *corrSpec) extract(item any) string {
	v, ok := c.read.eval(item)
	str, isStr := v.(string)
	if !ok || !isStr {
		return ""
	}
	ms := c.re.FindAllStringSubmatchIndex(str, -1)
	if len(ms) == 0 {
		return ""
	}
	m := ms[len(ms)-1]
	if c.first {
		m = ms[0]
	}
	if c.whole && (m[0] != 0 || m[1] != len(str)) {
		return ""
	}
	id := str[m[2]:m[3]]
	c.read.set(item, str[:m[0]]+str[m[1]:])
	return id
}

// stripText removes every occurrence of marker from the strings of doc.
func stripText(doc any, marker string) any {
	switch x := doc.(type) {
	case string:
		return strings.ReplaceAll(x, marker, "")
	case map[string]any:
		for k, v := range x {
			x[k] = stripText(v, marker)
		}
	case []any:
		for i, v := range x {
			x[i] = stripText(v, marker)
		}
	}
	return doc
}

// checkWriter refuses, before anything is sent, a write whose account is
// not the credential's identity (NotSent, not retryable: the same write
// would be refused again), and a write whose identity cannot be read now
// (NotSent, retryable: nothing was sent).
func (a *Adapter) checkWriter(ctx context.Context, account string) error {
	if a.identity == nil {
		return nil
	}
	err := a.CheckAccount(ctx, account)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, adapter.ErrAccountMismatch):
		return adapter.InvalidRequest("account_mismatch", "the intent's account is not the identity the route's credential acts as; nothing was sent")
	}
	return &adapter.CallError{Class: adapter.NotSent, Code: "identity_unavailable", Retryable: true,
		Message: "the credential's identity could not be read; the write was not sent"}
}
