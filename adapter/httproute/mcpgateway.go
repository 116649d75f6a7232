package httproute

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/events"
)

// The gateway's side of an MCP route (settle's MCP server offers the
// upstream's own tools, package mcp): the tools the route file passes
// through (mcp.reads, mcp.unprotected), the arguments an agent gives the
// write tool mapped back to the intent they describe, and a call of any
// of the upstream's tools as it is.

// gatewaySpec is what the route file tells the gateway.
type gatewaySpec struct {
	reads, unprotected []string
	// unmapped says why the write's arguments cannot be mapped back to a
	// payload, a parent and an account ("" when they can).
	unmapped string
}

// compileGateway checks mcp.reads and mcp.unprotected, and whether the
// write's arguments can be mapped back (a warning when not: the route
// works, but the gateway cannot offer its write tool).
func (c *compiler) compileGateway(a *Adapter, m *MCPConfig) {
	write := ""
	if a.write != nil && a.write.url != nil {
		write = a.write.url.tool
	}
	seen := map[string]string{}
	list := func(key string, names []string) []string {
		var out []string
		for i, n := range names {
			field := fmt.Sprintf("mcp.%s[%d]", key, i)
			switch {
			case !toolNameRE.MatchString(n):
				c.report(field, fmt.Sprintf("%q is not a tool name (letters, digits, _ . - /, up to 128)", clip(n)))
			case n == write:
				c.report(field, fmt.Sprintf("%q is the route's write tool: the gateway offers it as a settled write, never passed through", n))
			case seen[n] != "":
				c.report(field, fmt.Sprintf("%q is already listed in mcp.%s", n, seen[n]))
			default:
				seen[n] = key
				out = append(out, n)
			}
		}
		return out
	}
	a.gateway = gatewaySpec{reads: list("reads", m.Reads), unprotected: list("unprotected", m.Unprotected)}
	if a.write == nil || a.write.url == nil {
		return
	}
	if field, reason := unmappable(a.write.url.args, "write.arguments"); field != "" {
		a.gateway.unmapped = field + ": " + reason
		c.warn(field, "the MCP gateway cannot offer the write tool: "+reason)
	}
}

// GatewayTools are the upstream's tools the route file passes through:
// reads (mcp.reads) and unprotected ones (mcp.unprotected). writable is
// nil when the gateway can offer the write tool, else why not.
func (a *Adapter) GatewayTools() (reads, unprotected []string, writable error) {
	if a.gateway.unmapped != "" {
		writable = a.errorf("%s", a.gateway.unmapped)
	}
	return a.gateway.reads, a.gateway.unprotected, writable
}

// CallTool calls one of the upstream's tools with args as they are (the
// gateway's pass-through). Its errors are those of a route's tool calls
// (*adapter.CallError: nothing sent, refused, or no answer).
func (a *Adapter) CallTool(ctx context.Context, name string, args json.RawMessage) (*sdk.CallToolResult, error) {
	if a.up == nil {
		return nil, a.errorf("the route has no MCP upstream")
	}
	res, err := a.up.call(ctx, name, args, a.mcpLim)
	if err != nil {
		return nil, a.scrub.Error(err)
	}
	return res, nil
}

// leaf is how one templated value of the write's arguments maps back.
type leaf struct {
	e      *expr
	marker bool // the marker follows the value (settle adds it)
	number bool // the value is sent as a number
}

// settleVars are filled in by settle: an agent never gives them.
var settleVars = map[string]bool{varRequestID: true, varIntentID: true, varAttemptID: true, varIdempotencyKey: true}

// leafOf reads a template of the write's arguments: one payload field,
// the parent, the account or a value settle fills in, optionally followed
// by the marker; filters other than a last number are refused.
func leafOf(t *template) (leaf, string) {
	parts := t.parts
	var l leaf
	if n := len(parts); n > 1 && parts[n-1].e != nil && parts[n-1].e.name == varMarker {
		l.marker, parts = true, parts[:n-1]
	}
	if len(parts) != 1 || parts[0].e == nil {
		return l, "a value that is not one payload field, the parent or the account (optionally followed by {{marker}}) cannot be read back from an agent's arguments"
	}
	l.e = parts[0].e
	switch {
	case l.e.name == varPayload:
		for _, s := range l.e.path.segs {
			if s.isIndex {
				return l, "a payload field under an array index cannot be read back from an agent's arguments"
			}
		}
	case l.e.name == varParent, l.e.name == varAccount:
	case settleVars[l.e.name] && !l.marker:
	default:
		return l, fmt.Sprintf("{{%s}} cannot be read back from an agent's arguments", l.e.name)
	}
	for i, f := range l.e.filters {
		if f.kind != fNumber || i != len(l.e.filters)-1 {
			return l, "a filtered value (other than a last | number) cannot be read back from an agent's arguments"
		}
		l.number = true
	}
	return l, ""
}

// unmappable finds the first value of the tree that cannot be mapped
// back ("" when every one can).
func unmappable(n *vnode, field string) (string, string) {
	if n == nil {
		return "", ""
	}
	switch n.kind {
	case vTmpl:
		if _, reason := leafOf(n.t); reason != "" {
			return field, reason
		}
	case vObj:
		for i, k := range n.keys {
			if f, r := unmappable(n.kids[i], fieldPath(field, k)); f != "" {
				return f, r
			}
		}
	case vArr:
		for i, it := range n.kids {
			if f, r := unmappable(it, fmt.Sprintf("%s[%d]", field, i)); f != "" {
				return f, r
			}
		}
	}
	return "", ""
}

// inverse collects what an agent's arguments say.
type inverse struct {
	payload        map[string]any
	parent, acct   string
	hasParent      bool
	hasAcct        bool
	fieldOfPayload map[string]string // payload.x -> the argument that gave it
}

func argErr(field, reason string) error {
	if field == "" {
		field = "arguments"
	}
	return &events.FieldError{Field: field, Reason: reason}
}

// WriteArguments maps the arguments an agent gives the route's write tool
// (through settle's MCP gateway) back to the intent they describe: the
// payload (normalized by the route), the parent and the account the
// write's arguments are templated from ("" when the template does not use
// them). Settle then makes exactly the call the route renders from them:
// a constant argument must be given as the route sends it (or left out),
// an argument the route does not send is refused, and so is a value
// settle fills in (its marker, key, ids). Errors are *events.FieldError
// naming the argument.
func (a *Adapter) WriteArguments(args json.RawMessage) (payload json.RawMessage, parent, account string, err error) {
	if a.write == nil || a.write.url == nil || a.write.url.tool == "" {
		return nil, "", "", a.errorf("the route's write calls no tool")
	}
	if a.gateway.unmapped != "" {
		return nil, "", "", a.errorf("%s", a.gateway.unmapped)
	}
	doc, derr := decodeJSON(args)
	if derr != nil {
		return nil, "", "", argErr("arguments", "are not one JSON object")
	}
	inv := &inverse{payload: map[string]any{}, fieldOfPayload: map[string]string{}}
	if a.write.url.args != nil {
		if err := inv.walk(a.write.url.args, doc, true, ""); err != nil {
			return nil, "", "", err
		}
	} else if m, ok := doc.(map[string]any); !ok || len(m) > 0 {
		return nil, "", "", argErr("arguments", "must be empty: the route's write tool takes none")
	}
	raw, _ := json.Marshal(inv.payload)
	if payload, err = a.NormalizePayload(raw); err != nil {
		var fe *events.FieldError
		if errors.As(err, &fe) {
			for p, arg := range inv.fieldOfPayload {
				if fe.Field == p || strings.HasPrefix(fe.Field, p+".") || strings.HasPrefix(fe.Field, p+"[") {
					return nil, "", "", argErr(arg+strings.TrimPrefix(fe.Field, p), fe.Reason)
				}
			}
		}
		return nil, "", "", err
	}
	return payload, inv.parent, inv.acct, nil
}

// walk matches the agent's value v (present or not) against the tree n.
func (inv *inverse) walk(n *vnode, v any, present bool, field string) error {
	switch n.kind {
	case vLit:
		if present && !jsonEqual(v, n.lit) {
			b, _ := json.Marshal(n.lit)
			return argErr(field, fmt.Sprintf("must be %s, the value the route sends (or left out)", clip(string(b))))
		}
	case vObj:
		m, ok := v.(map[string]any)
		if present && !ok {
			return argErr(field, "must be an object")
		}
		for k := range m {
			if !slices.Contains(n.keys, k) {
				return argErr(fieldPath(field, k), "is not an argument this route's write sends (settle makes the call the route declares, and would drop it)")
			}
		}
		for i, k := range n.keys {
			cv, cok := m[k]
			if err := inv.walk(n.kids[i], cv, cok, fieldPath(field, k)); err != nil {
				return err
			}
		}
	case vArr:
		arr, ok := v.([]any)
		if present && (!ok || len(arr) != len(n.kids)) {
			return argErr(field, fmt.Sprintf("must be an array of %d item(s), as the route writes", len(n.kids)))
		}
		for i, it := range n.kids {
			var cv any
			if present {
				cv = arr[i]
			}
			if err := inv.walk(it, cv, present, fmt.Sprintf("%s[%d]", field, i)); err != nil {
				return err
			}
		}
	case vTmpl:
		if present && v != nil {
			return inv.leaf(n.t, v, field)
		}
	}
	return nil
}

// leaf takes one templated value from the agent's arguments.
func (inv *inverse) leaf(t *template, v any, field string) error {
	l, _ := leafOf(t)
	_, isNum := v.(json.Number)
	_, isStr := v.(string)
	switch {
	case settleVars[l.e.name]:
		return argErr(field, "is filled in by settle ({{"+l.e.name+"}}); leave it out")
	case l.number && !isNum:
		return argErr(field, "must be a number")
	case l.marker && !isStr:
		return argErr(field, "must be a string")
	}
	switch l.e.name {
	case varParent, varAccount:
		if !isNum && !isStr {
			return argErr(field, "must be a string or a number")
		}
		s := text(v)
		dst, has := &inv.parent, &inv.hasParent
		if l.e.name == varAccount {
			dst, has = &inv.acct, &inv.hasAcct
		}
		if *has && *dst != s {
			return argErr(field, "differs from another argument that gives the "+l.e.name)
		}
		*dst, *has = s, true
	case varPayload:
		return inv.setPayload(l.e.path, v, field)
	}
	return nil
}

// setPayload sets a payload field (keys only), creating the objects on
// its way; a field given twice must agree.
func (inv *inverse) setPayload(p jpath, v any, field string) error {
	if len(p.segs) == 0 {
		m, ok := v.(map[string]any)
		if !ok {
			return argErr(field, "must be an object (the route's whole payload)")
		}
		inv.payload = m
		inv.fieldOfPayload["payload"] = field
		return nil
	}
	cur := inv.payload
	for _, s := range p.segs[:len(p.segs)-1] {
		next, ok := cur[s.key].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[s.key] = next
		}
		cur = next
	}
	last := p.segs[len(p.segs)-1].key
	if old, ok := cur[last]; ok && !jsonEqual(old, v) {
		return argErr(field, "differs from another argument that gives payload"+strings.TrimPrefix(p.src, "$"))
	}
	cur[last] = v
	inv.fieldOfPayload["payload"+strings.TrimPrefix(p.src, "$")] = field
	return nil
}

// jsonEqual compares two decoded JSON values by their JSON.
func jsonEqual(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
