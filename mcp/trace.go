package mcp

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/internal/telemetry"
)

// traceCalls makes the W3C traceparent of a tools/call's _meta the parent
// of what the call does (the intent records it), and, while tracing is
// on, each tools/call a server span named after its tool.
func traceCalls(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		call, ok := req.(*sdk.CallToolRequest)
		if !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		tp, _ := call.Params.GetMeta()[telemetry.Header].(string)
		if tp == "" && !telemetry.Enabled() {
			return next(ctx, method, req)
		}
		ctx, span := telemetry.StartServer(telemetry.WithTraceparent(ctx, tp), "tools/call "+call.Params.Name)
		res, err := next(ctx, method, req)
		if r, ok := res.(*sdk.CallToolResult); ok && r.IsError {
			span.Str("error.type", "tool_error")
		}
		span.End(err)
		return res, err
	}
}
