package mcp

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
)

const unitSecret = "route_secret_4c9e2a7f1b8d3e6c5a0f"

// TestResultsAreScrubbedOfSecretsAndTheirPieces: tool results are
// scrubbed by adapter.Scrubber, the one scrubber of settle, with the
// stricter of the two rules the API's adapters and MCP used to apply
// apart: every whole secret and every 8-byte piece of one (cut, prefixed
// or suffixed by an external API), a short secret whole only, in keys
// as in values — and ASCII case-insensitively (an API that upper-cases
// an echoed token does not get it past).
func TestResultsAreScrubbedOfSecretsAndTheirPieces(t *testing.T) {
	sc := adapter.NewScrubber(unitSecret, "short")
	upper := strings.ToUpper(unitSecret)
	for _, c := range []struct{ in, want string }{
		{"no secret here", "no secret here"},
		{"id_" + unitSecret, "id_[redacted]"},
		{unitSecret + unitSecret, "[redacted]"},
		{"a " + unitSecret[:8] + " b", "a [redacted] b"},              // a prefix of 8 bytes
		{"tail:" + unitSecret[len(unitSecret)-9:], "tail:[redacted]"}, // a suffix
		{"mid " + unitSecret[5:20] + " end", "mid [redacted] end"},    // a middle piece
		{"x" + unitSecret[:7] + "y", "x" + unitSecret[:7] + "y"},      // 7 bytes is not a piece
		{"a short word", "a [redacted] word"},                         // a short secret is scrubbed whole only
		{"shor t", "shor t"},
		{"ID_" + upper, "ID_[redacted]"},              // upper-cased
		{"a " + upper[3:12] + " b", "a [redacted] b"}, // an upper-cased piece
		{"a SHORT word", "a [redacted] word"},         // a short secret in another case
		{"é" + unitSecret[:8] + "é", "é[redacted]é"},  // valid UTF-8 around it kept
	} {
		if got := sc.Scrub(c.in); got != c.want {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
	}
	v := scrubValue(sc, map[string]any{"k_" + unitSecret: []any{"v " + upper, 3.5, nil, map[string]any{"n": unitSecret[3:15]}}})
	b, _ := json.Marshal(v)
	if strings.Contains(strings.ToLower(string(b)), unitSecret[3:11]) || !strings.Contains(string(b), "[redacted]") {
		t.Fatalf("value: %s", b)
	}
}

// TestScrubberProperty: whatever the text around it and its case, no
// 8-byte piece of a secret survives, and text without one is unchanged.
func TestScrubberProperty(t *testing.T) {
	secrets := []string{unitSecret, "tok_agent_6b1e9c4a7f2d8e3c5b0a"}
	sc := adapter.NewScrubber(secrets...)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := "abc_0123456789ef" + unitSecret
	const piece = adapter.ScrubGram
	for k := 0; k < 5000; k++ {
		var b strings.Builder
		for n := rng.IntN(80); n > 0; n-- {
			if rng.IntN(10) == 0 {
				s := secrets[rng.IntN(2)]
				i := rng.IntN(len(s))
				j := i + rng.IntN(len(s)-i+1)
				if rng.IntN(3) == 0 {
					b.WriteString(strings.ToUpper(s[i:j]))
				} else {
					b.WriteString(s[i:j])
				}
			} else {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			}
		}
		in := b.String()
		out := strings.ToLower(sc.Scrub(in))
		hit := false
		for _, s := range secrets {
			for i := 0; i+piece <= len(s); i++ {
				if strings.Contains(out, s[i:i+piece]) {
					t.Fatalf("%q -> %q keeps %q", in, out, s[i:i+piece])
				}
				hit = hit || strings.Contains(strings.ToLower(in), s[i:i+piece])
			}
		}
		if !hit && sc.Scrub(in) != in {
			t.Fatalf("%q changed to %q without a secret in it", in, sc.Scrub(in))
		}
	}
}

func TestDecodeArgs(t *testing.T) {
	for _, c := range []struct {
		raw   string
		field string // "" = accepted
	}{
		{``, ""},
		{`null`, ""},
		{`{}`, ""},
		{` {"a":1, "b":"x"} `, ""},
		{`{"a":1,"a":2}`, "a"},
		{`{"c":1}`, "c"},
		{`[]`, "arguments"},
		{`"a"`, "arguments"},
		{`{"a":1}{}`, "arguments"},
		{`{"a":}`, "a"},
		{`{"a":1`, "arguments"},
		{`{"` + strings.Repeat("z", 100) + `":1}`, strings.Repeat("z", 64) + "…"},
		{`{"\u0007":1}`, "?"},
	} {
		err := decodeArgs(json.RawMessage(c.raw), "a", "b").err
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", c.raw, err)
			}
			continue
		}
		var ae *argError
		if !errors.As(err, &ae) || ae.Field != c.field {
			t.Errorf("%s: %v, want a refusal naming %q", c.raw, err, c.field)
		}
	}
}

// FuzzDecodeArgs: untrusted arguments never panic the decoder; a refusal
// always names a field, and accepted arguments hold only known names.
func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{`{}`, `{"task_id":"t","step_id":"s","payload":{"body":"x"}}`, `{"a":1,"a":2}`, `[`, `{"wait_seconds":1e400}`,
		`{"task_id":"\ud800"}`, `{"payload":[1,2,{"x":null}]}`} {
		f.Add([]byte(s))
	}
	known := []string{"task_id", "step_id", "account", "payload", "wait_seconds"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a := decodeArgs(raw, known...)
		if err := a.err; err != nil {
			var ae *argError
			if !errors.As(err, &ae) || ae.Field == "" || ae.Reason == "" {
				t.Fatalf("%q: refusal without a field: %v", raw, err)
			}
			return
		}
		for k := range a.m {
			if !containsStr(known, k) {
				t.Fatalf("%q: accepted unknown %q", raw, k)
			}
		}
		for _, k := range []string{"task_id", "step_id", "account"} {
			a.err = nil
			if a.id(k, false); a.err != nil {
				err := a.err
				var ae *argError
				var fe *events.FieldError
				if !errors.As(err, &ae) && !errors.As(err, &fe) {
					t.Fatalf("%q: %s: unnamed error %v", raw, k, err)
				}
			}
		}
		_ = a.seconds("wait_seconds", 60)
	})
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestEveryStateHasAnOutcomeAndGuidance: every lifecycle state maps to an
// outcome with guidance; only settled outcomes say settled; unknown
// outcomes always say not to retry.
func TestEveryStateHasAnOutcomeAndGuidance(t *testing.T) {
	for _, st := range fsm.AllStates() {
		if st == fsm.None {
			continue
		}
		a := answerOf(&fsm.Intent{ID: "in_x", State: st}, false)
		if a.Outcome == "" || a.Guidance == "" || !strings.HasPrefix(a.Guidance, a.Outcome+":") {
			t.Fatalf("%s: outcome %q guidance %q", st, a.Outcome, a.Guidance)
		}
		if (a.Outcome == OutcomeUnknown) == a.Settled {
			t.Fatalf("%s: outcome %s settled %v", st, a.Outcome, a.Settled)
		}
		if a.Outcome == OutcomeUnknown && !strings.Contains(a.Guidance, "Do not retry") {
			t.Fatalf("%s: %q", st, a.Guidance)
		}
		if a.Outcome == OutcomeFailed && st != fsm.Failed {
			t.Fatalf("%s answers failed", st)
		}
	}
}

// TestDocsQuoteTheGuidance: docs/mcp.md quotes every guidance text
// verbatim, so the page cannot drift from what agents are told.
func TestDocsQuoteTheGuidance(t *testing.T) {
	b, err := os.ReadFile("../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, g := range []string{guideConfirmed, guideUnknown, guidePending, guideVerifying, guideInFlight, guideRejectedRetryable,
		guideRejected, guideApproval, guideApprovalRetry, guideNeedsHuman, guideFailed, guideAbandoned, guideAbandonedEffect} {
		if !strings.Contains(doc, g) {
			t.Errorf("docs/mcp.md does not quote %q", g)
		}
	}
	for _, name := range []string{ToolStatus, ToolPending, ToolApprove, ToolResolve, CodeInvalidArgument, CodePayloadMismatch,
		CodeForbidden, CodeNotFound, CodeNotAllowed, CodeConflict, CodeUnavailable} {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/mcp.md does not name `%s`", name)
		}
	}
}
