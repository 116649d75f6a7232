package httproute

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/settle-dev/settle/adapter"
)

// What a probe adds beyond the records: the fields a route maps that the
// API returned empty for an object it showed (a pull request's comment
// has no issue_url), and, on a route without a correlation marker, where
// its write could carry one.

// emptyMapped names the fields spec maps from the item that came back
// empty in r, each with the item's fields it reads.
func emptyMapped(spec *recordSpec, r adapter.Record) []string {
	var out []string
	for _, f := range []struct {
		name string
		t    *template
		got  string
	}{
		{"external_id", spec.externalID, r.ExternalID},
		{"live_url", spec.liveURL.template(), r.LiveURL},
		{"author_id", spec.authorID, r.AuthorID},
		{"parent_id", spec.parentID, r.ParentID},
		{"visibility", spec.visibility, r.Visibility},
	} {
		if paths := itemPaths(f.t); paths != "" && f.got == "" {
			out = append(out, f.name+" (read from "+paths+")")
		}
	}
	if paths := itemPaths(spec.createdAt); paths != "" && r.CreatedAt.IsZero() {
		out = append(out, "created_at (read from "+paths+")")
	}
	return out
}

// writeEmptyMapped reports the mapped fields the API returned empty for
// the object r (what, e.g. "item 2").
func writeEmptyMapped(out io.Writer, spec *recordSpec, r adapter.Record, what string) {
	for _, f := range emptyMapped(spec, r) {
		fmt.Fprintf(out, "  empty: %s: the API returned it empty for %s (external_id %s, live_url %s): "+
			"settle compares what it reads, and for this object it reads nothing there; with a correlation marker a marked object is the write whatever it leaves empty\n",
			f, what, orNone(r.ExternalID), orNone(r.LiveURL))
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// markerHint suggests a correlation marker on a route whose write sends
// a payload text field as it is ("" when the route has one or the write
// sends no such field).
func (a *Adapter) markerHint() string {
	if a.caps.Correlation || a.write == nil || a.write.body == nil {
		return ""
	}
	sent := map[string][]sentField{}
	sentFields(a.write.body, "", "write.body", sent)
	fields := make([]string, 0, len(sent))
	for f := range sent {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	for _, f := range fields {
		for _, pl := range sent[f] {
			if f == "" || !pl.whole || strings.Contains(pl.path, "[]") || !a.schema.isString(f) {
				continue
			}
			return "marker: the route writes none, so an identical object by the same account cannot be told from its write; " +
				pl.field + " sends payload." + f + " as text, which can carry one:\n" +
				"    correlation:\n" +
				"      marker: \" [settle:{{intent_id}}]\"   # or hidden where the API renders Markdown: \"\\n\\n<!-- settle:{{intent_id}} -->\"\n" +
				"      read: $." + pl.path + "\n" +
				"    and send \"{{payload." + f + "}}{{marker}}\" in " + pl.field
		}
	}
	return ""
}

// isString: payload field f is declared a string.
func (s *schema) isString(f string) bool {
	if s == nil {
		return false
	}
	for _, fs := range s.fields {
		if fs.name == f {
			return fs.typ == "string"
		}
	}
	return false
}
