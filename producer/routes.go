package producer

import (
	"maps"
	"slices"
)

// RouteNames lists the configured routes, sorted.
func (p *Producer) RouteNames() []string { return slices.Sorted(maps.Keys(p.routes)) }
