package projector

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/testharness"
)

// The projector refuses a stream of another log format when it opens,
// naming both formats, and projects nothing of it.
func TestOpenRefusesAnOlderLogFormat(t *testing.T) {
	n := testharness.StartNode(t)
	testharness.OlderStream(t, n.JS)
	_, err := Open(context.Background(), n.JS, Config{DBPath: t.TempDir() + "/v.db", Logger: quietLogger()})
	if !errors.Is(err, events.ErrLogFormat) || !strings.Contains(err.Error(), testharness.OlderFormatMessage) {
		t.Fatalf("open: %v, want %q", err, testharness.OlderFormatMessage)
	}
	testharness.CheckOlderStreamUnchanged(t, n.JS)
}
