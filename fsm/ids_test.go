package fsm

import (
	"strings"
	"testing"

	"github.com/settle-dev/settle/events"
)

// IntentRecorded's id must be derived from its fields: the scoped
// derivation (tenant, route, account, request id) or, for logs written
// before it, the v1 one. Any other id — another account's, say — is a
// forged history.
func TestRecordedIDMustBeDerivedV1OrScoped(t *testing.T) {
	withID := func(id string) []events.Event {
		e := recorded(autoPolicy())
		d := *e.Data.(*events.IntentRecordedData)
		d.IdempotencyKey = events.IdempotencyKey(id)
		return []events.Event{events.New(id, 1, t0, "test", "", &d)}
	}
	for name, id := range map[string]string{
		"v1":     events.ScopedIntentID("acme", "social_post", "acct_1", "task-1:step-1"),
		"scoped": events.ScopedIntentID("acme", "social_post", "acct_1", "task-1:step-1"),
	} {
		if _, err := Fold(withID(id)); err != nil {
			t.Errorf("%s id refused: %v", name, err)
		}
	}
	for name, id := range map[string]string{
		"other account": events.ScopedIntentID("acme", "social_post", "acct_2", "task-1:step-1"),
		"other tenant":  events.ScopedIntentID("zeta", "social_post", "acct_1", "task-1:step-1"),
	} {
		_, err := Fold(withID(id))
		if err == nil || !strings.Contains(err.Error(), "not derived") {
			t.Errorf("%s id accepted: %v", name, err)
		}
	}
}
