package mcp

import (
	"bytes"
	"encoding/json"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/events"
)

// An idempotencyKey beside a tools/call's arguments (params.idempotencyKey,
// a sibling of params.arguments) is the key of the write when present:
// the request id, scoped per tenant, route and account like the API's
// Idempotency-Key, so the same key is the same intent over MCP and over
// the API. The SDK's call parameters do not carry the member, so both
// transports move it into the call's _meta (metaIdempotencyKey) before the
// SDK reads the message.

// metaIdempotencyKey is where a call's idempotencyKey travels inside the
// server.
const metaIdempotencyKey = "settle.dev/idempotencyKey"

// liftIdempotencyKey moves params.idempotencyKey of a tools/call message
// into params._meta; any other message is returned as it is.
func liftIdempotencyKey(data []byte) []byte {
	if !bytes.Contains(data, []byte(`"idempotencyKey"`)) {
		return data
	}
	var msg map[string]json.RawMessage
	var method string
	if json.Unmarshal(data, &msg) != nil || json.Unmarshal(msg["method"], &method) != nil || method != "tools/call" {
		return data
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil || params == nil {
		return data
	}
	key, ok := params["idempotencyKey"]
	if !ok {
		return data
	}
	meta := map[string]json.RawMessage{}
	if m, ok := params["_meta"]; ok && string(bytes.TrimSpace(m)) != "null" {
		if json.Unmarshal(m, &meta) != nil || meta == nil {
			return data
		}
	}
	meta[metaIdempotencyKey] = key
	delete(params, "idempotencyKey")
	params["_meta"], _ = json.Marshal(meta)
	msg["params"], _ = json.Marshal(params)
	out, err := json.Marshal(msg)
	if err != nil {
		return data
	}
	return out
}

// idempotencyKey is the idempotencyKey of a call ("" when it has none):
// printable, 1 to 256 bytes, no surrounding white space.
func idempotencyKey(req *sdk.CallToolRequest) (string, error) {
	v, ok := req.Params.GetMeta()[metaIdempotencyKey]
	if !ok || v == nil {
		return "", nil
	}
	s, isStr := v.(string)
	switch {
	case !isStr:
		return "", argErr("idempotencyKey", "must be a string")
	case s == "":
		return "", argErr("idempotencyKey", "must not be empty")
	case strings.TrimSpace(s) != s:
		return "", argErr("idempotencyKey", "has leading or trailing white space")
	}
	if err := events.ValidateFreeform("idempotencyKey", s); err != nil {
		return "", err
	}
	return s, nil
}
