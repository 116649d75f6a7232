package httproute

import (
	"strings"
	"time"
)

// RouteRisks are the risks a route still carries once it loads: what
// settle cannot tell apart on it, by what the route declares. settle
// routes check prints them for every route.
type RouteRisks struct {
	Route string
	Risks []string
}

// Risks lists every valid route of a route file with its risks, checked
// offline (placeholders for the environment); a route with problems is
// left out (Check reports those).
func Risks(data []byte) []RouteRisks {
	cfgs, failed, _ := decodeFile(data)
	var out []RouteRisks
	for i := range cfgs {
		if failed[i][""] {
			continue
		}
		cfgs[i].Env = func(string) (string, bool) { return "", false }
		a, c := compileWith(&compiler{label: cfgs[i].Name, failed: failed[i], offline: true}, cfgs[i])
		if len(c.errs) > 0 || a == nil {
			continue
		}
		out = append(out, RouteRisks{Route: cfgs[i].Name, Risks: a.risks()})
	}
	return out
}

// risks are the route's remaining risks, each a sentence.
func (a *Adapter) risks() []string {
	var out []string
	p := a.routePolicy
	skew := p.ClockSkew.D()
	if p.ClockSkew == 0 {
		skew = defaultPolicy().ClockSkew.D()
	}
	caps := a.caps
	switch {
	case !caps.Search && !caps.StatusQuery:
		out = append(out, "no search and no status query: every unknown outcome is handed to a human")
	case caps.Search && !caps.Correlation:
		out = append(out,
			"without a correlation marker, an identical object made by the same account within clock_skew ("+shortDuration(skew)+") before the write is taken as ambiguous: a hand-off, not a confirmation",
			"without a correlation marker, an identical object made by the same account after the write started, inside the search window, is taken as the write when the write itself did not land; two such objects are a hand-off")
		if a.write != nil && a.write.body != nil {
			out = append(out, "the write sends a body: a correlation marker (correlation.marker and a {{marker}} in a text field) would tell its object from any look-alike; settle routes probe suggests one")
		}
	case caps.Correlation:
		out = append(out, "the correlation marker is visible to the API's users: an edit that removes it makes the write a near match, and a copy by the same account is two marked objects (each a hand-off)")
	}
	if a.search != nil && a.search.fields.parentID != nil && a.write != nil && a.write.writesTakeParent() {
		from := ""
		if f := a.search.fields.parentFrom; f != "" {
			from = " (read from " + f + ")"
		}
		if caps.Correlation {
			out = append(out, "a parent the API shows empty"+from+" is not compared on an object the marker names")
		} else {
			out = append(out, "a parent the API shows empty"+from+" makes an object a near match: a hand-off")
		}
	}
	if caps.IdempotencyKey && caps.KeyRetention > 0 {
		out = append(out, "a retry relies on the API keeping the idempotency key for "+shortDuration(caps.KeyRetention)+", as the route declares")
	}
	return out
}

// shortDuration renders d without zero trailing units (24h, 5s, 1h30m).
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
