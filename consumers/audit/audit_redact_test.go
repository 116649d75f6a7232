package audit

import (
	"strings"
	"testing"
)

// The audit's masking hides the whole token it finds, not just the part
// its pattern covers: "[redacted]_0123456789" would leak the tail.
func TestAuditRedactHidesWholeTokens(t *testing.T) {
	for in, leak := range map[string]string{
		"code sk_live_abcdefgh_0123456789 status 400":          "0123456789",
		`{"code":"sk_test_ABCDEFGH-tail.part~x"}`:              "tail.part",
		"Authorization: Bearer abcdefghijkl_mnopqrst$uvwx end": "uvwx",
		`"token":"0123456789abcdef0123_456789$$tail"`:          "tail",
		"ghp_0123456789abcdefghij_klmn and more":               "klmn",
	} {
		out := redact(in)
		if strings.Contains(out, leak) || !strings.Contains(out, "[redacted]") {
			t.Errorf("redact(%q) = %q: %q survives", in, out, leak)
		}
	}
	// Text around a secret stays readable; settle's own keys are kept.
	key := "sk_abcdefghijklmnopqrstuvwxyz234567"
	if out := redact("status 400 sk_live_abcdefgh1 retryable false " + key); out != "status 400 [redacted] retryable false "+key {
		t.Errorf("context lost: %q", out)
	}
}
