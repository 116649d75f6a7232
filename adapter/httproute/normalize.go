package httproute

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/settle-dev/settle/events"
)

// Normalisations: rewritings an API documents that it applies to the text
// it stores (Slack wraps links in <...> and escapes & < >; an API may
// collapse whitespace). A route declares the ones its API makes
// (payload.normalize); before a read's payload is compared with the
// intent's, both are normalised, every string in them, so an object the
// API rewrote that way is the same payload. The intent's frozen payload
// and its digest are never changed: the comparison alone is.
const (
	// NormLinks: a link stored as <target> or <target|label> is its
	// label, or its target without one.
	NormLinks = "links"
	// NormEntities: &amp; &lt; &gt; &quot; &#39; are & < > " '.
	NormEntities = "entities"
	// NormWhitespace: every run of white space is one space, and the
	// text is trimmed.
	NormWhitespace = "whitespace"
)

// normOrder is the order normalisations apply in, whatever the order
// declared: links first (a link's target may hold an escaped &amp;).
var normOrder = []string{NormLinks, NormEntities, NormWhitespace}

var normFuncs = map[string]func(string) string{
	NormLinks:      unwrapLinks,
	NormEntities:   unescapeEntities,
	NormWhitespace: func(s string) string { return strings.Join(strings.Fields(s), " ") },
}

// linkRE is a link as an API stores it wrapped: <target> or <target|label>.
var linkRE = regexp.MustCompile(`<([^<>|]*)(?:\|([^<>]*))?>`)

var entities = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&quot;", `"`, "&#39;", "'", "&amp;", "&")

func unwrapLinks(s string) string {
	return linkRE.ReplaceAllStringFunc(s, func(m string) string {
		sm := linkRE.FindStringSubmatch(m)
		if sm[2] != "" {
			return sm[2]
		}
		return sm[1]
	})
}

func unescapeEntities(s string) string { return entities.Replace(s) }

// compileNormalize checks payload.normalize: each a known normalisation,
// named once. It returns them in the order they apply.
func (c *compiler) compileNormalize(names []string) []string {
	var out []string
	for k, n := range names {
		field := "payload.normalize[" + strconv.Itoa(k) + "]"
		switch {
		case normFuncs[n] == nil:
			c.report(field, strconv.Quote(n)+" is not a normalisation: known: "+strings.Join(normOrder, ", "))
		case slices.Contains(names[:k], n):
			c.report(field, "names "+n+" twice")
		}
	}
	for _, n := range normOrder {
		if slices.Contains(names, n) {
			out = append(out, n)
		}
	}
	return out
}

// normalised is the canonical form of payload with every string in it
// normalised by names (nil when it is not JSON).
func normalised(payload json.RawMessage, names []string) []byte {
	var v any
	if err := json.Unmarshal(payload, &v); err != nil {
		return nil
	}
	b, err := json.Marshal(normaliseValue(v, names))
	if err != nil {
		return nil
	}
	canon, err := events.Canonicalize(b)
	if err != nil {
		return nil
	}
	return canon
}

func normaliseValue(v any, names []string) any {
	switch t := v.(type) {
	case string:
		for _, n := range names {
			t = normFuncs[n](t)
		}
		return t
	case []any:
		for k := range t {
			t[k] = normaliseValue(t[k], names)
		}
	case map[string]any:
		for k := range t {
			t[k] = normaliseValue(t[k], names)
		}
	}
	return v
}

// EquivalentPayload reports, as the normalisations it took, a record's
// payload equal to the intent's once both are normalised as the route
// declares (payload.normalize); nil when they differ still, or the route
// declares none (adapter.PayloadComparer).
func (a *Adapter) EquivalentPayload(intentPayload, recordPayload json.RawMessage) []string {
	if len(a.normalize) == 0 || len(intentPayload) == 0 || len(recordPayload) == 0 {
		return nil
	}
	x, y := normalised(intentPayload, a.normalize), normalised(recordPayload, a.normalize)
	if x == nil || !bytes.Equal(x, y) {
		return nil
	}
	return slices.Clone(a.normalize)
}

// samePayload: a write's answer shows the payload sent, as it is or
// equal under the route's normalisations.
func (a *Adapter) samePayload(got, sent []byte) bool {
	return bytes.Equal(got, sent) || a.EquivalentPayload(sent, got) != nil
}

// itemPaths names the item's fields a template reads ("$.issue_url";
// several joined by ", "; "" when it reads none).
func itemPaths(t *template) string {
	if t == nil {
		return ""
	}
	var out []string
	for _, p := range t.parts {
		if p.e != nil && p.e.name == varDoc && !slices.Contains(out, p.e.path.src) {
			out = append(out, p.e.path.src)
		}
	}
	return strings.Join(out, ", ")
}
