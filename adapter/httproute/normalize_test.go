package httproute_test

import (
	"encoding/json"
	"slices"
	"testing"
)

// A route's declared normalisations are applied to both sides before a
// read's payload is compared: Slack's link wrapping and entity escaping
// make the same text; anything else still differs; a route that declares
// none compares as stored.
func TestNormalisationsApplyToBothSides(t *testing.T) {
	slack := loadExample(t, "slack_message.yaml", "http://127.0.0.1:9")
	cases := []struct {
		name           string
		intent, record string
		want           []string
	}{
		{"link and entity", `{"text":"see https://example.com/a?x=1&y=2 & www.example.org."}`,
			`{"text":"see <https://example.com/a?x=1&amp;y=2> &amp; <http://www.example.org|www.example.org>."}`, []string{"links", "entities"}},
		{"escaped on both sides", `{"text":"a &amp; b"}`, `{"text":"a &amp;amp; b"}`, nil},
		{"the intent wrote the entity", `{"text":"1 &lt; 2"}`, `{"text":"1 &lt; 2"}`, []string{"links", "entities"}},
		{"another text", `{"text":"hello"}`, `{"text":"hello [edit: a person fixed a typo]"}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := slack.EquivalentPayload(json.RawMessage(c.intent), json.RawMessage(c.record))
			if !slices.Equal(got, c.want) {
				t.Fatalf("EquivalentPayload = %v, want %v", got, c.want)
			}
		})
	}
	social := loadExample(t, "social.yaml", "http://127.0.0.1:9")
	if got := social.EquivalentPayload(json.RawMessage(`{"body":"a & b"}`), json.RawMessage(`{"body":"a &amp; b"}`)); got != nil {
		t.Fatalf("a route without normalisations compared %v", got)
	}
}
