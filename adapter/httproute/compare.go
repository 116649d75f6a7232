package httproute

import (
	"maps"
	"slices"
	"strings"
)

// A route's reads compare what they read back with the intent's payload:
// a write that sends a payload field changed ("{{payload.body}} (via
// settle)", {{payload.body | lower}}) can never be found again by a read
// that maps the field as the API stores it. checkCompare refuses such a
// route at load, unless the read declares how to compare: its mapping of
// the field is a template that undoes the change ({{$.body |
// before:' (via settle)'}}), not a bare JSON path.

// sentField is where the write body sends a payload field: its path in
// the body (keys joined by ".", [] for list items) and whether it is sent
// as it is.
type sentField struct {
	path  string
	field string // the write.body field, for errors
	whole bool
	// marker: the template sends {{marker}} next to the field, which
	// reads remove only where correlation.read looks.
	marker bool
}

// sentFields collects, for every payload field the write body sends, the
// places it is sent.
func sentFields(n *vnode, path, field string, out map[string][]sentField) {
	if n == nil {
		return
	}
	switch n.kind {
	case vObj:
		for i, k := range n.keys {
			sentFields(n.kids[i], joinPath(path, k), fieldPath(field, k), out)
		}
	case vArr:
		for _, it := range n.kids {
			sentFields(it, joinPath(path, "[]"), field+"[]", out)
		}
	case vTmpl:
		whole, marker := identity(n.t), n.t.uses(varMarker)
		for _, p := range n.t.parts {
			if p.e == nil || p.e.name != varPayload {
				continue
			}
			if len(p.e.path.segs) == 0 { // {{payload}}: every field, each as it is
				out[""] = append(out[""], sentField{path: path, field: field, whole: whole, marker: marker})
				continue
			}
			if len(p.e.path.segs) > 1 || p.e.path.segs[0].isIndex {
				continue // a part of a field: not the field itself
			}
			f := p.e.path.segs[0].key
			out[f] = append(out[f], sentField{path: path, field: field, whole: whole, marker: marker})
		}
	}
}

// identity: the template sends one payload value as it is: exactly one
// {{payload...}} without text filters, next to nothing but {{marker}}
// (which reads remove again).
func identity(t *template) bool {
	n := 0
	for _, p := range t.parts {
		switch {
		case p.e == nil:
			return false
		case p.e.name == varMarker:
		case p.e.name == varPayload && len(p.e.filters) == 0:
			n++
		default:
			return false
		}
	}
	return n == 1
}

// itemPath renders a bare JSON path ($.a.b) as a body path ("a.b"); ok is
// false when s is not a bare path without filters.
func itemPath(v any) (string, bool) {
	s, isStr := v.(string)
	if !isStr || (!strings.HasPrefix(s, "$.") && !strings.HasPrefix(s, "$[")) {
		return "", false
	}
	p, err := parsePath(s)
	if err != nil {
		return "", false
	}
	keys := make([]string, 0, len(p.segs))
	for _, sg := range p.segs {
		if sg.isIndex {
			keys = append(keys, "[]")
		} else {
			keys = append(keys, sg.key)
		}
	}
	return strings.Join(keys, "."), true
}

// checkCompare refuses a write that sends a payload field changed when a
// read compares that field as the API stores it (see above), and one that
// sends {{marker}} inside a compared field that correlation.read does not
// read: a search or readback removes the marker from the field it reads
// only, so the compared text would keep it.
func (c *compiler) checkCompare(a *Adapter, cfg RouteConfig) {
	if a.write == nil || a.write.body == nil || cfg.Write == nil || c.skipUnder("write.body") {
		return
	}
	sent := map[string][]sentField{}
	sentFields(a.write.body, "", "write.body", sent)
	corrPath, corrOK := "", false
	if cfg.Correlation != nil && a.corr != nil && !c.skipUnder("correlation") {
		corrPath, corrOK = itemPath(cfg.Correlation.Read)
	}
	for _, r := range compareReads(cfg) {
		m, ok := r.mapping.(map[string]any)
		if !ok || c.skipUnder(r.field) {
			continue
		}
		keys := slices.Sorted(maps.Keys(m))
		for _, f := range keys {
			p, bare := itemPath(m[f])
			if !bare {
				continue // the read declares how to compare: a template of its own
			}
			places := append(slices.Clone(sent[f]), wholePayloadAt(sent[""], f)...)
			if corrOK && r.field != "write.response.payload" && c.markerInCompared(cfg, r.field, f, m[f].(string), p, corrPath, places) {
				return // a write's answer loses every marker
			}
			if changed := changedOnly(places, p); changed != nil {
				c.report(changed.field, "sends payload."+f+" changed (text around it or a filter), and "+fieldPath(r.field, f)+" reads "+m[f].(string)+
					" as the API stores it: a read can never match this write, so a lost response would be written again; "+
					"send \"{{payload."+f+"}}\" as it is (a {{marker}} next to it is fine), or declare how to compare: map it back in "+
					fieldPath(r.field, f)+" with a template that undoes the change (e.g. \"{{"+m[f].(string)+" | before:' (via settle)'}}\")")
				return
			}
		}
	}
}

// compareRead is a read's payload mapping and the field it is under.
type compareRead struct {
	field   string
	mapping any
}

// compareReads are the payload mappings of the route's reads.
func compareReads(cfg RouteConfig) []compareRead {
	var reads []compareRead
	if cfg.Search != nil {
		reads = append(reads, compareRead{"search.fields.payload", cfg.Search.Fields.Payload})
	}
	if cfg.Readback != nil && cfg.Readback.Fields != nil {
		reads = append(reads, compareRead{"readback.fields.payload", cfg.Readback.Fields.Payload})
	}
	return append(reads, compareRead{"write.response.payload", cfg.Write.Response.Payload})
}

// markerInCompared reports (and reports true for) a write that sends
// {{marker}} inside payload field f at path p, which a read compares from
// p while correlation.read looks elsewhere.
func (c *compiler) markerInCompared(cfg RouteConfig, read, f, mapping, p, corrPath string, places []sentField) bool {
	for _, pl := range places {
		if pl.path == p && pl.marker && corrPath != p {
			c.report("correlation.read", "reads "+cfg.Correlation.Read+", but "+pl.field+" sends {{marker}} inside payload."+f+", which "+
				fieldPath(read, f)+" reads from "+mapping+": a read removes the marker only where correlation.read looks, so the "+
				"compared text would keep it, a read could never match this write, and a lost response would be written again; "+
				"read the marker where the write puts it (correlation.read: "+mapping+")")
			return true
		}
	}
	return false
}

// changedOnly is the place a field is sent changed when a read compares
// it at path p and it is never sent there as it is (nil otherwise). A
// field sent elsewhere than the read looks is refused only when it is
// never sent as it is.
func changedOnly(places []sentField, p string) *sentField {
	var changed *sentField
	whole := false
	for i := range places {
		switch {
		case places[i].path == p && !places[i].whole:
			changed = &places[i]
		case places[i].path == p:
			whole = true
		}
	}
	if changed == nil && !whole {
		for i := range places {
			if places[i].whole {
				whole = true
			} else if changed == nil {
				changed = &places[i]
			}
		}
	}
	if whole {
		return nil
	}
	return changed
}

// markerLeads: the write body's template at the path correlation.read
// reads starts with {{marker}} and has more after it.
func markerLeads(body *vnode, read string) bool {
	p, ok := itemPath(read)
	if !ok {
		return false
	}
	var find func(n *vnode, path string) bool
	find = func(n *vnode, path string) bool {
		if n == nil {
			return false
		}
		switch n.kind {
		case vObj:
			for i, k := range n.keys {
				if find(n.kids[i], joinPath(path, k)) {
					return true
				}
			}
		case vArr:
			for _, it := range n.kids {
				if find(it, joinPath(path, "[]")) {
					return true
				}
			}
		case vTmpl:
			ps := n.t.parts
			return path == p && len(ps) > 1 && ps[0].e != nil && ps[0].e.name == varMarker
		}
		return false
	}
	return find(body, "")
}

// wholePayloadAt: where {{payload}} sends the whole payload at path P,
// field f is sent at P.f, as {{payload}} is sent.
func wholePayloadAt(places []sentField, f string) []sentField {
	out := make([]sentField, 0, len(places))
	for _, p := range places {
		q := p
		if q.path == "" {
			q.path = f
		} else {
			q.path += "." + f
		}
		out = append(out, q)
	}
	return out
}

// joinPath is path's member k ("a.b" and "c": "a.b.c"; "" and "c": "c").
func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
