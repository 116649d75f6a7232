package node

import (
	"context"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/api"
)

// Readier is implemented by adapters that depend on a process or a
// connection of their own (a route's upstream MCP server,
// adapter/httproute): UpstreamReady starts it if it is not started and
// says why it is down (restarting after failed starts, and when the next
// start is due).
type Readier interface {
	UpstreamReady(ctx context.Context) error
}

// Closer is implemented by adapters that hold a process or a connection
// (a route's upstream MCP server): Close stops it.
type Closer interface {
	Close() error
}

// toolCaller is implemented by adapters whose route calls the tools of
// an upstream MCP server (write is "" on any other route).
type toolCaller interface {
	Tools() (write string, reads []string)
}

// upstreamChecks are /readyz's checks of the routes that call an
// upstream MCP server and say whether it is up, one per route
// ("upstream <route>").
func upstreamChecks(routes []adapter.Route) []api.ReadyCheck {
	var out []api.ReadyCheck
	for _, r := range routes {
		rd, ok := r.Adapter.(Readier)
		tc, calls := r.Adapter.(toolCaller)
		if !ok || !calls {
			continue
		}
		if w, _ := tc.Tools(); w == "" {
			continue
		}
		out = append(out, api.ReadyCheck{Name: "upstream " + r.Name, Check: rd.UpstreamReady})
	}
	return out
}

// closeAdapters stops what the routes' adapters hold (their upstream
// processes); Close is called once per route, and a closed adapter's
// Close does nothing.
func closeAdapters(routes []adapter.Route) {
	for _, r := range routes {
		if c, ok := r.Adapter.(Closer); ok {
			_ = c.Close()
		}
	}
}
