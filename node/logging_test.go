package node

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
)

// A log line names the error — its operation, kind and code, so that an
// operator can tell why a loop fails — and the scrubber alone decides what
// is secret: a route credential echoed into an error, a piece of one, or a
// password in a URL never reaches the line; text or JSON.
func TestLogsNameTheErrorAndNotTheSecret(t *testing.T) {
	const secret = "sk_live_0123456789abcdefSECRET"
	cause := errors.Wrapf(jetstream.ErrConsumerNotFound, "fetch from %s", "settle-reconciler-social_post")
	echoed := errors.Newf("readback: the API answered 401 %q", "token "+secret[3:20]+" is not valid")
	for _, format := range []string{LogText, LogJSON} {
		var b bytes.Buffer
		log := NewLogger(&b, format, adapter.NewScrubber(secret))
		log.Warn("reconciler: fetch failed; retrying", "err", cause)
		log.Error("projector failed; restarting it", "err", errors.Wrapf(echoed, "commit checkpoint %d", 42))
		log.Info("connecting", "url", "nats://settle:"+secret+"@127.0.0.1:4222", "note", "Bearer "+secret)
		log.With("err", errors.New("with "+secret)).Info("grouped")
		out := b.String()
		for _, want := range []string{
			"fetch from settle-reconciler-social_post: nats: API error: code=404 err_code=10014 description=consumer not found",
			"commit checkpoint 42: readback: the API answered 401",
			"nats://" + adapter.Redacted + "@127.0.0.1:4222",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the line does not name %q:\n%s", format, want, out)
			}
		}
		if strings.Contains(out, "‹×›") {
			t.Errorf("%s: redacted wholesale:\n%s", format, out)
		}
		for i := 0; i+adapter.ScrubGram <= len(secret); i++ {
			if strings.Contains(out, secret[i:i+adapter.ScrubGram]) {
				t.Fatalf("%s: a piece of the secret (%q) reached the log:\n%s", format, secret[i:i+adapter.ScrubGram], out)
			}
		}
		if format == LogJSON {
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil || m["msg"] == nil {
					t.Fatalf("not a JSON line: %s (%v)", line, err)
				}
			}
		}
	}
}
