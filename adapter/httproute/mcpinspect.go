package httproute

import (
	"context"
	"encoding/json"
)

// InspectedTools is what a probe of an MCP route found of its tools.
type InspectedTools struct {
	Listed int // tools the upstream lists
	Named  []InspectedTool
	Err    string
}

// InspectedTool is one tool the route names.
type InspectedTool struct {
	Name string
	// Role is "write" or "read".
	Role     string
	Found    bool
	ReadOnly bool // annotated readOnlyHint: true
	// InputSchema is the tool's input schema as JSON (up to 2000 bytes).
	InputSchema string
}

// inspectTools lists the upstream's tools and describes those the route
// names.
func (a *Adapter) inspectTools(ctx context.Context) *InspectedTools {
	out := &InspectedTools{}
	write, reads := a.Tools()
	tools, err := a.ListTools(ctx)
	if err != nil {
		out.Err = a.safe(err)
	}
	out.Listed = len(tools)
	named := []InspectedTool{{Name: write, Role: "write"}}
	for _, r := range reads {
		named = append(named, InspectedTool{Name: r, Role: "read"})
	}
	for _, n := range named {
		for _, t := range tools {
			if t.Name != n.Name {
				continue
			}
			n.Found = true
			n.ReadOnly = t.Annotations != nil && t.Annotations.ReadOnlyHint
			if b, err := json.Marshal(t.InputSchema); err == nil {
				n.InputSchema = clipBytes(a.scrub.Scrub(string(b)), 2000)
			}
		}
		out.Named = append(out.Named, n)
	}
	return out
}

func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
